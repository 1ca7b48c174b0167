package apibench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"filigrane/codec/imageio"
)

// Report is the outcome of a run; its JSON form is what --json writes.
type Report struct {
	Command    string    `json:"command,omitempty"`
	Started    time.Time `json:"started"`
	Host       string    `json:"host"`
	NumCPU     int       `json:"num_cpu"`
	GOMAXPROCS int       `json:"gomaxprocs"`
	Targets    []string  `json:"targets"`
	// Spawned is the number of in-process nodes the harness started (0: external targets).
	Spawned     int              `json:"spawned_nodes"`
	Clients     int              `json:"clients"`
	Image       *ImageInfo       `json:"image,omitempty"`
	DetectInput *ImageInfo       `json:"detect_input,omitempty"`
	Baseline    *Baseline        `json:"codec_baseline,omitempty"`
	Endpoints   []EndpointReport `json:"endpoints"`
	Notes       []string         `json:"notes,omitempty"`
}

// ImageInfo describes an input file.
type ImageInfo struct {
	Name   string `json:"name"`
	Bytes  int    `json:"bytes"`
	Format string `json:"format,omitempty"`
	Width  int    `json:"width,omitempty"`
	Height int    `json:"height,omitempty"`
}

func describeImage(name string, data []byte) *ImageInfo {
	info := &ImageInfo{Name: name, Bytes: len(data)}
	if f, cfg, err := imageio.DecodeConfigBytes(data); err == nil {
		info.Format, info.Width, info.Height = f, cfg.Width, cfg.Height
	}
	return info
}

// EndpointReport is one endpoint's phase.
type EndpointReport struct {
	Endpoint Endpoint `json:"endpoint"`
	Method   string   `json:"method"`
	Path     string   `json:"path"`
	Clients  int      `json:"clients"`
	Targets  int      `json:"targets"`
	ElapsedS float64  `json:"elapsed_s"`
	// Requests = Successes + Status429 + OtherErrors.
	Requests    int `json:"requests"`
	Successes   int `json:"successes"`
	Status429   int `json:"status_429"`
	OtherErrors int `json:"other_errors"`
	// Failures counts failed requests by status and problem code, 429s included.
	Failures       map[string]int    `json:"failures,omitempty"`
	FailureSamples map[string]string `json:"failure_samples,omitempty"`
	// Throughput is completed requests per second, SuccessThroughput successful ones.
	Throughput        float64 `json:"throughput_rps"`
	SuccessThroughput float64 `json:"success_throughput_rps"`
	// Latency is of successful requests, measured by the client (send to last byte).
	Latency Latency `json:"latency"`
	// Latency429 is of the 429 answers (nil without any): under overload, how long a client waits to learn
	// that the node will not take its request, its upload included.
	Latency429 *Latency `json:"latency_429,omitempty"`
	// CodecP50Ms and OverheadP50Ms are set with the codec baseline: the service's p50 minus the codec's.
	CodecP50Ms    *float64 `json:"codec_p50_ms,omitempty"`
	OverheadP50Ms *float64 `json:"overhead_p50_ms,omitempty"`
}

// Latency holds percentiles in milliseconds.
type Latency struct {
	P50Ms  float64 `json:"p50_ms"`
	P95Ms  float64 `json:"p95_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
	MeanMs float64 `json:"mean_ms"`
}

// LatencyOf returns h's percentiles in milliseconds.
func LatencyOf(h *Histogram) Latency {
	return Latency{P50Ms: ms(h.Quantile(0.50)), P95Ms: ms(h.Quantile(0.95)), P99Ms: ms(h.Quantile(0.99)),
		MaxMs: ms(h.Max()), MeanMs: ms(h.Mean())}
}

func (r *Report) computeOverhead() {
	if r.Baseline == nil {
		return
	}
	for i := range r.Endpoints {
		e := &r.Endpoints[i]
		var codecMs float64
		switch e.Endpoint {
		case EndpointEmbed:
			codecMs = r.Baseline.Embed.P50Ms
		case EndpointDetect:
			codecMs = r.Baseline.Detect.P50Ms
		default:
			continue
		}
		if e.Successes == 0 {
			continue
		}
		over := e.Latency.P50Ms - codecMs
		e.CodecP50Ms, e.OverheadP50Ms = &codecMs, &over
	}
}

// Endpoint returns the report of endpoint e, or nil.
func (r *Report) Endpoint(e Endpoint) *EndpointReport {
	for i := range r.Endpoints {
		if r.Endpoints[i].Endpoint == e {
			return &r.Endpoints[i]
		}
	}
	return nil
}

// WriteJSON writes the report to path (creating its directory).
func (r *Report) WriteJSON(path string) error {
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create report directory: %w", err)
		}
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// WriteMarkdown writes the report as Markdown tables.
func (r *Report) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "## API benchmark\n\n")
	where := fmt.Sprintf("%d target(s): %s", len(r.Targets), strings.Join(r.Targets, ", "))
	if r.Spawned > 0 {
		where = fmt.Sprintf("%d in-process node(s) started by the harness (%s)", r.Spawned, strings.Join(r.Targets, ", "))
	}
	fmt.Fprintf(w, "%s; %d clients; %d CPUs (GOMAXPROCS %d) shared by clients and server; started %s.\n\n",
		where, r.Clients, r.NumCPU, r.GOMAXPROCS, r.Started.Format(time.RFC3339))
	if r.Image != nil {
		fmt.Fprintf(w, "Image: %s.", *r.Image)
		if r.DetectInput != nil {
			fmt.Fprintf(w, " Detection input: %s.", *r.DetectInput)
		}
		fmt.Fprintf(w, "\n\n")
	}
	fmt.Fprintln(w, "| endpoint | requests | ok | 429 | other errors | req/s | ok/s | p50 ms | p95 ms | p99 ms | max ms |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, e := range r.Endpoints {
		fmt.Fprintf(w, "| %s `%s %s` | %d | %d | %d | %d | %.1f | %.1f | %s | %s | %s | %s |\n",
			e.Endpoint, e.Method, e.Path, e.Requests, e.Successes, e.Status429, e.OtherErrors, e.Throughput,
			e.SuccessThroughput, fmtMs(e.Latency.P50Ms), fmtMs(e.Latency.P95Ms), fmtMs(e.Latency.P99Ms), fmtMs(e.Latency.MaxMs))
	}
	var shed []string
	for _, e := range r.Endpoints {
		if l := e.Latency429; l != nil {
			shed = append(shed, fmt.Sprintf("* %s: %d answers, p50 %s ms, p95 %s ms, p99 %s ms, max %s ms", e.Endpoint,
				e.Status429, fmtMs(l.P50Ms), fmtMs(l.P95Ms), fmtMs(l.P99Ms), fmtMs(l.MaxMs)))
		}
	}
	if len(shed) > 0 {
		fmt.Fprintf(w, "\nLatency of the 429 answers (the table's percentiles are of successes):\n\n%s\n", strings.Join(shed, "\n"))
	}
	var fails []string
	for _, e := range r.Endpoints {
		keys := make([]string, 0, len(e.Failures))
		for k := range e.Failures {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fails = append(fails, fmt.Sprintf("* %s: %d x %s (first: %s)", e.Endpoint, e.Failures[k], k,
				strings.ReplaceAll(e.FailureSamples[k], "\n", " ")))
		}
	}
	if len(fails) > 0 {
		fmt.Fprintf(w, "\nFailures by status and problem code:\n\n%s\n", strings.Join(fails, "\n"))
	}
	if b := r.Baseline; b != nil {
		if b.Parallel > 1 {
			fmt.Fprintf(w, "\nCodec in this process, %d goroutines at once, %d runs each after a warm-up (median of all):\n\n", b.Parallel, b.Runs)
		} else {
			fmt.Fprintf(w, "\nCodec alone in this process (%d sequential runs after a warm-up, median; single-threaded like one worker):\n\n", b.Runs)
		}
		fmt.Fprintln(w, "| operation | codec p50 ms | codec min-max ms | service p50 ms | overhead p50 ms |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
		row := func(name string, t CodecTiming, e Endpoint) {
			svc, over := "-", "-"
			if er := r.Endpoint(e); er != nil && er.OverheadP50Ms != nil {
				svc, over = fmtMs(er.Latency.P50Ms), fmtMs(*er.OverheadP50Ms)
			}
			fmt.Fprintf(w, "| %s | %s | %s-%s | %s | %s |\n", name, fmtMs(t.P50Ms), fmtMs(t.MinMs), fmtMs(t.MaxMs), svc, over)
		}
		row("embed: decode + Embed + PNG encode", b.Embed, EndpointEmbed)
		row("detect: decode + Detect", b.Detect, EndpointDetect)
		if b.EmbedCPUMs > 0 {
			fmt.Fprintf(w, "\nCodec CPU time per pass (user + system): embed %s ms, detect %s ms.\n", fmtMs(b.EmbedCPUMs), fmtMs(b.DetectCPUMs))
		}
		fmt.Fprintf(w, "\nBaseline detection of the detection input: watermarked=%v.\n", b.Watermarked)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "\nNote: %s\n", n)
	}
}

func (i ImageInfo) String() string {
	if i.Width > 0 {
		return fmt.Sprintf("%s (%s %dx%d, %d bytes)", i.Name, i.Format, i.Width, i.Height, i.Bytes)
	}
	return fmt.Sprintf("%s (%d bytes)", i.Name, i.Bytes)
}

func fmtMs(v float64) string {
	// An overhead can be negative when the codec's own run-to-run noise exceeds it.
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}
