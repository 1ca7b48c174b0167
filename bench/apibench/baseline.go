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
	// EmbedCPUMs and DetectCPUMs are the process CPU time (user + system, garbage collection included) of one
	// embed and one detection pass, the mean of the recorded passes; only with Parallel 1, where the codec is
	// all the process runs. Unlike the wall times they hold on a machine whose other work takes the cores,
	// so the service's CPU per request compares with them (bench/scripts/cluster-figures.sh).
	EmbedCPUMs  float64 `json:"embed_cpu_ms,omitempty"`
	DetectCPUMs float64 `json:"detect_cpu_ms,omitempty"`
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
		embed, detect       []time.Duration
		embedCPU, detectCPU time.Duration
		watermarked         bool
		err                 error
	}
	results := make([]result, parallel)
	var wg sync.WaitGroup
	for g := range results {
		wg.Add(1)
		go func(r *result) {
			defer wg.Done()
			r.embed, r.detect, r.embedCPU, r.detectCPU, r.watermarked, r.err = codecRuns(ctx, cdc, id, embedInput, detectInput, runs)
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
	if parallel == 1 {
		b.EmbedCPUMs, b.DetectCPUMs = ms(results[0].embedCPU)/float64(runs), ms(results[0].detectCPU)/float64(runs)
	}
	return b, nil
}

// codecRuns times runs passes (after one warm-up) and adds up the process CPU time of the recorded ones.
func codecRuns(ctx context.Context, cdc *codec.Codec, id codec.ID, embedInput, detectInput []byte, runs int) (
	embedTimes, detectTimes []time.Duration, embedCPU, detectCPU time.Duration, watermarked bool, err error) {
	lim := imageio.Limits{MaxPixels: imageio.DefaultMaxPixels}
	var png bytes.Buffer
	// Pass -1 is an unrecorded warm-up: the first pass pays for page faults on a fresh heap and cold caches,
	// which no request to a running service pays.
	for i := -1; i < runs; i++ {
		if err := ctx.Err(); err != nil {
			return nil, nil, 0, 0, false, err
		}
		t0, c0 := time.Now(), processCPU()
		pic, err := imageio.DecodeBytes(embedInput, lim)
		if err != nil {
			return nil, nil, 0, 0, false, fmt.Errorf("decode embed input: %w", err)
		}
		marked, _, err := cdc.Embed(pic.Image, id, codec.EmbedOptions{})
		if err != nil {
			return nil, nil, 0, 0, false, fmt.Errorf("embed: %w", err)
		}
		png.Reset()
		if err := imageio.EncodePNG(&png, marked, pic.Metadata); err != nil {
			return nil, nil, 0, 0, false, fmt.Errorf("encode PNG: %w", err)
		}
		embedTime, c1 := time.Since(t0), processCPU()

		t0 = time.Now()
		dpic, err := imageio.DecodeBytes(detectInput, lim)
		if err != nil {
			return nil, nil, 0, 0, false, fmt.Errorf("decode detection input: %w", err)
		}
		det := cdc.Detect(dpic.Image)
		detectTime, c2 := time.Since(t0), processCPU()
		watermarked = det.Watermarked
		if i >= 0 {
			embedTimes = append(embedTimes, embedTime)
			detectTimes = append(detectTimes, detectTime)
			embedCPU += c1 - c0
			detectCPU += c2 - c1
		}
	}
	return embedTimes, detectTimes, embedCPU, detectCPU, watermarked, nil
}

func timingOf(ds []time.Duration) CodecTiming {
	slices.Sort(ds)
	// The lower median for an even count: a slow outlier from a neighbour's build should not pull it up.
	return CodecTiming{P50Ms: ms(ds[(len(ds)-1)/2]), MinMs: ms(ds[0]), MaxMs: ms(ds[len(ds)-1])}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
