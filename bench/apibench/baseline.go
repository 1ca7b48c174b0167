package apibench

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"filigrane/codec"
	"filigrane/codec/imageio"
)

// Baseline is the codec-only time of the benchmark's files, measured in this process.
type Baseline struct {
	Runs int `json:"runs"`
	// Parallel is the number of goroutines that ran the codec at once, each doing Runs runs. 1 is the codec
	// alone; matching it to the clients shows what the codec costs when that many requests share the CPUs,
	// so that CPU contention is not mistaken for service overhead.
	Parallel int `json:"parallel"`
	// Embed is decode + codec.Embed + PNG encode of the embed input, what a worker does minus storage.
	Embed CodecTiming `json:"embed"`
	// Detect is decode + codec.Detect of the detection input.
	Detect CodecTiming `json:"detect"`
	// Watermarked is the baseline detection's verdict on the detection input (true for a marked copy made
	// under the same codec key).
	Watermarked bool `json:"watermarked"`
}

// CodecTiming summarises the runs of one operation.
type CodecTiming struct {
	P50Ms float64 `json:"p50_ms"`
	MinMs float64 `json:"min_ms"`
	MaxMs float64 `json:"max_ms"`
}

// MeasureCodec times the codec alone: parallel goroutines each run, after one unrecorded warm-up pass, runs
// passes of decode + Embed + PNG encode on embedInput (with the watermark id of data) and decode + Detect on
// detectInput. The codec is single-threaded, like one service worker, so with parallel 1 these compare
// directly with one request's service latency.
func MeasureCodec(ctx context.Context, key []byte, embedInput []byte, data string, detectInput []byte, runs, parallel int) (*Baseline, error) {
	if len(key) == 0 {
		key = []byte(codec.DevelopmentKey)
	}
	runs, parallel = max(runs, 1), max(parallel, 1)
	cdc, err := codec.New(key)
	if err != nil {
		return nil, fmt.Errorf("codec key: %w", err)
	}
	id, err := codec.IDFromJSON([]byte(data))
	if err != nil {
		return nil, fmt.Errorf("watermark id of the embed data: %w", err)
	}
	type result struct {
		embed, detect []time.Duration
		watermarked   bool
		err           error
	}
	results := make([]result, parallel)
	var wg sync.WaitGroup
	for g := range results {
		wg.Add(1)
		go func(r *result) {
			defer wg.Done()
			r.embed, r.detect, r.watermarked, r.err = codecRuns(ctx, cdc, id, embedInput, detectInput, runs)
		}(&results[g])
	}
	wg.Wait()
	b := &Baseline{Runs: runs, Parallel: parallel, Watermarked: true}
	var embedTimes, detectTimes []time.Duration
	for _, r := range results {
		if r.err != nil {
			return nil, r.err
		}
		embedTimes, detectTimes = append(embedTimes, r.embed...), append(detectTimes, r.detect...)
		b.Watermarked = b.Watermarked && r.watermarked
	}
	b.Embed, b.Detect = timingOf(embedTimes), timingOf(detectTimes)
	return b, nil
}

func codecRuns(ctx context.Context, cdc *codec.Codec, id codec.ID, embedInput, detectInput []byte, runs int) (
	embedTimes, detectTimes []time.Duration, watermarked bool, err error) {
	lim := imageio.Limits{MaxPixels: imageio.DefaultMaxPixels}
	var png bytes.Buffer
	// Pass -1 is an unrecorded warm-up: the first pass pays for page faults on a fresh heap and cold caches,
	// which no request to a running service pays.
	for i := -1; i < runs; i++ {
		if err := ctx.Err(); err != nil {
			return nil, nil, false, err
		}
		t0 := time.Now()
		pic, err := imageio.DecodeBytes(embedInput, lim)
		if err != nil {
			return nil, nil, false, fmt.Errorf("decode embed input: %w", err)
		}
		marked, _, err := cdc.Embed(pic.Image, id, codec.EmbedOptions{})
		if err != nil {
			return nil, nil, false, fmt.Errorf("embed: %w", err)
		}
		png.Reset()
		if err := imageio.EncodePNG(&png, marked, pic.ICC); err != nil {
			return nil, nil, false, fmt.Errorf("encode PNG: %w", err)
		}
		embedTime := time.Since(t0)

		t0 = time.Now()
		dpic, err := imageio.DecodeBytes(detectInput, lim)
		if err != nil {
			return nil, nil, false, fmt.Errorf("decode detection input: %w", err)
		}
		det := cdc.Detect(dpic.Image)
		detectTime := time.Since(t0)
		watermarked = det.Watermarked
		if i >= 0 {
			embedTimes = append(embedTimes, embedTime)
			detectTimes = append(detectTimes, detectTime)
		}
	}
	return embedTimes, detectTimes, watermarked, nil
}

func timingOf(ds []time.Duration) CodecTiming {
	slices.Sort(ds)
	// The lower median for an even count: a slow outlier from a neighbour's build should not pull it up.
	return CodecTiming{P50Ms: ms(ds[(len(ds)-1)/2]), MinMs: ms(ds[0]), MaxMs: ms(ds[len(ds)-1])}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
