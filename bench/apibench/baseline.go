package apibench

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"filigrane/codec"
	"filigrane/codec/imageio"
)

// Baseline is the codec-only time of the benchmark's files, measured in this process one run at a time.
type Baseline struct {
	Runs int `json:"runs"`
	// Embed is decode + codec.Embed + PNG encode of the embed input, what a worker does minus storage.
	Embed CodecTiming `json:"embed"`
	// Detect is decode + codec.Detect of the detection input.
	Detect CodecTiming `json:"detect"`
	// Watermarked is the baseline detection's verdict on the detection input (true for a marked copy made
	// under the same codec key).
	Watermarked bool `json:"watermarked"`
}

// CodecTiming summarises sequential runs of one operation.
type CodecTiming struct {
	P50Ms float64 `json:"p50_ms"`
	MinMs float64 `json:"min_ms"`
	MaxMs float64 `json:"max_ms"`
}

// MeasureCodec times the codec alone: after one warm-up pass, runs sequential runs of decode + Embed + PNG encode on embedInput
// (with the watermark id of data) and of decode + Detect on detectInput. The codec is single-threaded, like
// one service worker, so these are directly comparable with one request's service latency.
func MeasureCodec(ctx context.Context, key []byte, embedInput []byte, data string, detectInput []byte, runs int) (*Baseline, error) {
	if len(key) == 0 {
		key = []byte(codec.DevelopmentKey)
	}
	if runs < 1 {
		runs = 1
	}
	cdc, err := codec.New(key)
	if err != nil {
		return nil, fmt.Errorf("codec key: %w", err)
	}
	id, err := codec.IDFromJSON([]byte(data))
	if err != nil {
		return nil, fmt.Errorf("watermark id of the embed data: %w", err)
	}
	lim := imageio.Limits{MaxPixels: imageio.DefaultMaxPixels}
	b := &Baseline{Runs: runs}
	embedTimes := make([]time.Duration, 0, runs)
	detectTimes := make([]time.Duration, 0, runs)
	var png bytes.Buffer
	// Run 0 is an unrecorded warm-up: the first pass pays for page faults on a fresh heap and cold caches,
	// which no request to a running service pays.
	for i := -1; i < runs; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t0 := time.Now()
		pic, err := imageio.DecodeBytes(embedInput, lim)
		if err != nil {
			return nil, fmt.Errorf("decode embed input: %w", err)
		}
		marked, _, err := cdc.Embed(pic.Image, id, codec.EmbedOptions{})
		if err != nil {
			return nil, fmt.Errorf("embed: %w", err)
		}
		png.Reset()
		if err := imageio.EncodePNG(&png, marked, pic.ICC); err != nil {
			return nil, fmt.Errorf("encode PNG: %w", err)
		}
		embedTime := time.Since(t0)

		t0 = time.Now()
		dpic, err := imageio.DecodeBytes(detectInput, lim)
		if err != nil {
			return nil, fmt.Errorf("decode detection input: %w", err)
		}
		det := cdc.Detect(dpic.Image)
		detectTime := time.Since(t0)
		b.Watermarked = det.Watermarked
		if i >= 0 {
			embedTimes = append(embedTimes, embedTime)
			detectTimes = append(detectTimes, detectTime)
		}
	}
	b.Embed, b.Detect = timingOf(embedTimes), timingOf(detectTimes)
	return b, nil
}

func timingOf(ds []time.Duration) CodecTiming {
	slices.Sort(ds)
	// The lower median for an even count: a slow outlier from a neighbour's build should not pull it up.
	return CodecTiming{P50Ms: ms(ds[(len(ds)-1)/2]), MinMs: ms(ds[0]), MaxMs: ms(ds[len(ds)-1])}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
