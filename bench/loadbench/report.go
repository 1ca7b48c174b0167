package loadbench

import (
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"filigrane/bench/apibench"
	"filigrane/bench/canvas"
)

// Report is a load run's outcome; its JSON form is report.json.
type Report struct {
	Command    string    `json:"command,omitempty"`
	Started    time.Time `json:"started"`
	Host       string    `json:"host"`
	NumCPU     int       `json:"num_cpu"`
	Targets    []string  `json:"targets"`
	LocalNodes int       `json:"local_nodes"`
	// Mode is "open" (Rate arrivals per second) or "closed" (Clients clients).
	Mode       string  `json:"mode"`
	Rate       float64 `json:"rate_per_s,omitempty"`
	Clients    int     `json:"clients,omitempty"`
	Mix        string  `json:"mix"`
	Image      string  `json:"image"`
	ImageBytes int     `json:"image_bytes"`
	DurationS  float64 `json:"duration_s"`
	// ElapsedS runs from the first start to the last end; DrainS is its part after the last start.
	ElapsedS float64        `json:"elapsed_s"`
	DrainS   float64        `json:"drain_s"`
	Total    TotalReport    `json:"total"`
	Ops      []OpReport     `json:"operations"`
	Errors   map[string]int `json:"errors_by_code"`
	Jobs     JobsReport     `json:"jobs"`
	Credits  *Credits       `json:"credits,omitempty"`
	Series   []SecondReport `json:"series"`
	Chaos    *ChaosReport   `json:"chaos,omitempty"`
	// Webhooks is the check of the embed_webhook operations' events (nil without that operation).
	Webhooks *WebhookReport `json:"webhooks,omitempty"`
	// Storage is the check of the embed_storage operations' deliveries (nil without that operation).
	Storage *StorageReport `json:"storage,omitempty"`
	// Slowest is the run's slowest operations (at most SlowestKept), slowest first: what a stall is traced
	// from, in the nodes' logs by request or batch id.
	Slowest []SlowOp `json:"slowest,omitempty"`
	Notes   []string `json:"notes,omitempty"`
}

// SlowestKept is how many of the slowest operations a report names.
const SlowestKept = 5

// SlowOp is one operation of the slowest: its kind, the id the service gave it (a request id, or a batch id
// and its items' request ids), when it started after the load began, how long it took and how it ended.
type SlowOp struct {
	Op      Op       `json:"op"`
	ID      string   `json:"id,omitempty"`
	Items   []string `json:"items,omitempty"`
	StartS  float64  `json:"start_s"`
	TookMs  float64  `json:"took_ms"`
	Failure string   `json:"failure,omitempty"`
	// Receipts are the job receipts of its request or items, read after the run (report.json only): their
	// attempts and times say where the time went.
	Receipts []json.RawMessage `json:"receipts,omitempty"`
}

// TotalReport sums the operations.
type TotalReport struct {
	Count   int              `json:"count"`
	OK      int              `json:"ok"`
	Failed  int              `json:"failed"`
	OKPerS  float64          `json:"ok_per_s"`
	Retries int              `json:"retries"`
	Late    int              `json:"late_starts"`
	Dropped int              `json:"dropped_starts"`
	Latency apibench.Latency `json:"latency"`
}

// OpReport is one operation kind. Latency is of successes, from when the operation was due to its end
// (retries and polls included).
type OpReport struct {
	Op             Op                `json:"op"`
	Count          int               `json:"count"`
	OK             int               `json:"ok"`
	Failed         int               `json:"failed"`
	OKPerS         float64           `json:"ok_per_s"`
	Latency        apibench.Latency  `json:"latency"`
	Failures       map[string]int    `json:"failures,omitempty"`
	FailureSamples map[string]string `json:"failure_samples,omitempty"`
	// Retries counts answers that were retried (on the next node), by status and code.
	Retries map[string]int `json:"retries,omitempty"`
}

// JobsReport follows the jobs the service accepted (202 receipts).
type JobsReport struct {
	Accepted int `json:"accepted"`
	Terminal int `json:"terminal"`
	// EndedAfterRun is jobs first seen ended by the final check.
	EndedAfterRun int `json:"ended_after_run"`
	// Replayed is charged requests the client gave up on without an answer, sent again after the run with
	// their Idempotency-Key to learn their outcome; ReplayedOK of them answered a success.
	Replayed   int `json:"replayed"`
	ReplayedOK int `json:"replayed_ok"`
	// Lost is accepted jobs the service no longer knows (404); Stuck those not ended at the final check;
	// Unchecked those whose status could not be read then (the service kept failing).
	Lost      int      `json:"lost"`
	Stuck     int      `json:"stuck"`
	Unchecked int      `json:"unchecked"`
	LostIDs   []string `json:"lost_ids,omitempty"`
	StuckIDs  []string `json:"stuck_ids,omitempty"`
	// Batches is the batches the service created (batch operations), BatchesEnded those seen ended. Their
	// accepted items are jobs above; a batch lost or stuck counts in Lost or Stuck with its batch id.
	Batches      int `json:"batches,omitempty"`
	BatchesEnded int `json:"batches_ended,omitempty"`
	// BatchesCancelled is those that ended cancelled (batch_cancel operations whose cancel came in time).
	BatchesCancelled int `json:"batches_cancelled,omitempty"`
}

// Credits compares the organization's ledger with what the client saw.
type Credits struct {
	LedgerEntries int `json:"ledger_entries"`
	// ChargedOps is the operations with a charge in the ledger during the run, ChargedCredits their sum.
	ChargedOps     int   `json:"charged_ops"`
	ChargedCredits int64 `json:"charged_credits"`
	// ClientSuccesses is the charged kinds of operations the client saw succeed.
	ClientSuccesses int      `json:"client_successes"`
	ChargedTwice    int      `json:"charged_twice"`
	ChargedNotSeen  []string `json:"charged_not_seen,omitempty"`
	SeenNotCharged  []string `json:"seen_not_charged,omitempty"`
	HeldBefore      int64    `json:"held_before"`
	HeldAfter       int64    `json:"held_after"`
	// GPUOnCPU is the embed_gpu jobs seen succeeding on a CPU; GPUChargedWrong those not charged the plain
	// price (three times it is held while they run).
	GPUOnCPU        int      `json:"gpu_on_cpu,omitempty"`
	GPUChargedWrong []string `json:"gpu_charged_wrong,omitempty"`
	// MediaChecked is the embed_pdf and embed_video operations seen succeeding whose charge was compared with
	// the catalog's price; MediaChargedWrong those charged otherwise.
	MediaChecked      int      `json:"media_checked,omitempty"`
	MediaChargedWrong []string `json:"media_charged_wrong,omitempty"`
	// UnkeyedLost is the charged requests without an Idempotency-Key (detect_nokey) that got no answer: each
	// may have been charged without the client learning its id, so up to that many charges not seen are
	// allowed, if the service has no job record of them (a job's charge is always one the client can see).
	UnkeyedLost int `json:"unkeyed_lost,omitempty"`
	// UnseenNotes describe the first charges not seen as the service knows them (a job record or none).
	UnseenNotes []string `json:"unseen_notes,omitempty"`
	// Equal: every success charged once, nothing else charged (but up to UnkeyedLost), and the credits held
	// after the run are those held before it (no hold outlived its operation).
	Equal bool `json:"equal"`
}

// SecondReport is one second of the run: operations that ended in it and the latency of its successes.
type SecondReport struct {
	T      int     `json:"t"`
	OK     int     `json:"ok"`
	Failed int     `json:"failed"`
	P50Ms  float64 `json:"p50_ms"`
	P95Ms  float64 `json:"p95_ms"`
	P99Ms  float64 `json:"p99_ms"`
}

// WriteFiles writes report.json, report.md and chart.png into dir.
func (r *Report) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create report directory: %w", err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	var md strings.Builder
	r.WriteMarkdown(&md)
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(md.String()), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "chart.png"))
	if err != nil {
		return fmt.Errorf("write chart: %w", err)
	}
	if err := r.WriteChart(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write chart: %w", err)
	}
	return nil
}

// WriteMarkdown writes the report as Markdown.
func (r *Report) WriteMarkdown(w io.Writer) {
	title := "Load"
	if r.Chaos != nil {
		title = "Chaos"
	}
	fmt.Fprintf(w, "## %s benchmark\n\n", title)
	where := fmt.Sprintf("%d target(s): %s", len(r.Targets), strings.Join(r.Targets, ", "))
	if r.LocalNodes > 0 {
		where = fmt.Sprintf("%d local node process(es) and versitygw started by the harness", r.LocalNodes)
	}
	load := fmt.Sprintf("open loop at %.0f operations/s", r.Rate)
	if r.Mode == "closed" {
		load = fmt.Sprintf("closed loop, %d clients", r.Clients)
	}
	fmt.Fprintf(w, "%s; %s for %.0f s (mix %s); %d CPUs shared by harness and nodes; started %s. Image: %s (%d bytes).\n\n",
		where, load, r.DurationS, r.Mix, r.NumCPU, r.Started.Format(time.RFC3339), r.Image, r.ImageBytes)
	fmt.Fprintln(w, "| operation | count | ok | failed | ok/s | p50 ms | p95 ms | p99 ms | max ms | retried answers |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	row := func(name string, count, ok, failed int, okps float64, l apibench.Latency, retries int) {
		fmt.Fprintf(w, "| %s | %d | %d | %d | %.1f | %s | %s | %s | %s | %d |\n", name, count, ok, failed, okps,
			fmtMs(l.P50Ms), fmtMs(l.P95Ms), fmtMs(l.P99Ms), fmtMs(l.MaxMs), retries)
	}
	for _, o := range r.Ops {
		n := 0
		for _, v := range o.Retries {
			n += v
		}
		row(string(o.Op), o.Count, o.OK, o.Failed, o.OKPerS, o.Latency, n)
	}
	row("**all**", r.Total.Count, r.Total.OK, r.Total.Failed, r.Total.OKPerS, r.Total.Latency, r.Total.Retries)
	fmt.Fprintf(w, "\nElapsed %.1f s (drain %.1f s). Late starts (> %s behind schedule): %d; dropped starts (too many in flight): %d.\n",
		r.ElapsedS, r.DrainS, LateThreshold, r.Total.Late, r.Total.Dropped)
	if len(r.Errors) > 0 {
		fmt.Fprintf(w, "\nFailures by status and problem code:\n\n")
		for _, k := range sortedKeys(r.Errors) {
			fmt.Fprintf(w, "* %s: %d\n", k, r.Errors[k])
		}
	}
	var retried []string
	for _, o := range r.Ops {
		for _, k := range sortedKeys(o.Retries) {
			retried = append(retried, fmt.Sprintf("* %s: %d x %s", o.Op, o.Retries[k], k))
		}
	}
	if len(retried) > 0 {
		fmt.Fprintf(w, "\nRetried answers (the operation went on on the next node):\n\n%s\n", strings.Join(retried, "\n"))
	}
	j := r.Jobs
	fmt.Fprintf(w, "\nJobs: %d accepted, %d ended (%d first seen ended by the final check), **%d lost, %d stuck**, %d not checked. Requests given up without an answer and replayed with their Idempotency-Key after the run: %d (%d succeeded).\n",
		j.Accepted, j.Terminal, j.EndedAfterRun, j.Lost, j.Stuck, j.Unchecked, j.Replayed, j.ReplayedOK)
	if r.Webhooks != nil {
		r.Webhooks.writeMarkdown(w)
	}
	if r.Storage != nil {
		r.Storage.writeMarkdown(w)
	}
	if j.Batches > 0 {
		fmt.Fprintf(w, "\nBatches: %d created, %d seen ended, %d of them cancelled (their accepted items are counted among the jobs above; a batch lost or stuck counts there too).\n",
			j.Batches, j.BatchesEnded, j.BatchesCancelled)
	}
	if c := r.Credits; c != nil {
		verdict := "equal"
		if !c.Equal {
			verdict = "**NOT EQUAL**"
		}
		fmt.Fprintf(w, "\nCredits: the ledger charged **%d operations** (%d credits), the client saw **%d succeed**: %s; charged twice: %d; charged but not seen: %d; seen but not charged: %d; credits held before %d, after %d.\n",
			c.ChargedOps, c.ChargedCredits, c.ClientSuccesses, verdict, c.ChargedTwice, len(c.ChargedNotSeen), len(c.SeenNotCharged), c.HeldBefore, c.HeldAfter)
		if c.UnkeyedLost > 0 {
			fmt.Fprintf(w, "Key-less requests (detect_nokey) that got no answer: %d (each may be a charge not seen).\n", c.UnkeyedLost)
		}
		if c.HeldAfter != c.HeldBefore {
			fmt.Fprintf(w, "**Credits still held after the run: %d (before: %d)**: a hold outlived its operation.\n", c.HeldAfter, c.HeldBefore)
		}
		if c.GPUOnCPU > 0 || len(c.GPUChargedWrong) > 0 {
			fmt.Fprintf(w, "accelerator=gpu jobs run on a CPU: %d, charged other than a plain embed: **%d**.\n", c.GPUOnCPU, len(c.GPUChargedWrong))
		}
		if c.MediaChecked > 0 || len(c.MediaChargedWrong) > 0 {
			fmt.Fprintf(w, "Document and video embeds priced: %d, charged other than the catalog's price: **%d**.\n", c.MediaChecked, len(c.MediaChargedWrong))
		}
	}
	if c := r.Chaos; c != nil {
		c.writeMarkdown(w)
	}
	if len(r.Slowest) > 0 {
		fmt.Fprintf(w, "\nSlowest operations (start s after the load began, took s, id):\n\n")
		for _, o := range r.Slowest {
			line := fmt.Sprintf("* %s at %.1f s took %.1f s: %s", o.Op, o.StartS, o.TookMs/1000, o.ID)
			if len(o.Items) > 0 {
				line += " (items " + strings.Join(o.Items, ", ") + ")"
			}
			if o.Failure != "" {
				line += "; " + o.Failure
			}
			fmt.Fprintln(w, line)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "\nNote: %s\n", n)
	}
}

func fmtMs(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

var (
	colOK     = color.RGBA{0x2b, 0x6c, 0xb0, 255}
	colFailed = color.RGBA{0xd0, 0x10, 0x10, 255}
	colP50    = color.RGBA{0x3a, 0x9a, 0x4a, 255}
	colP95    = color.RGBA{0xe0, 0x8a, 0x1e, 255}
	colP99    = color.RGBA{0x8a, 0x4f, 0xb5, 255}
	colGrid   = color.RGBA{0xdd, 0xdd, 0xdd, 255}
	colEvent  = color.RGBA{0x60, 0x60, 0x60, 255}
)

// WriteChart draws two panels over the run's seconds: successes and failures per second, and the p50/p95/p99
// latency of the successes that ended in each second, with chaos actions as vertical lines. It draws on a
// bench/canvas, as bench/codecbench's chart.
func (r *Report) WriteChart(w io.Writer) error {
	const (
		left, right, top = 70, 30, 40
		plotW, plotH     = 720, 180
		gap              = 60
	)
	height := top + 2*plotH + gap + 50
	cv := canvas.New(left+plotW+right, height)
	text, fill, line := cv.Text, cv.Fill, cv.Line
	n := max(1, len(r.Series))
	xOf := func(t float64) int { return left + int(t*float64(plotW)/float64(n)+0.5) }
	panel := func(y0 int, title string, maxV float64, unit string, series []struct {
		name string
		c    color.Color
		v    func(SecondReport) float64
	}) {
		text(left, y0-8, title, color.Black)
		for i, s := range series {
			x := left + 280 + i*110
			fill(x, y0-17, x+12, y0-7, s.c)
			text(x+16, y0-8, s.name, color.Black)
		}
		maxV = niceMax(maxV)
		for g := 0; g <= 4; g++ {
			y := y0 + plotH - g*plotH/4
			fill(left, y, left+plotW, y+1, colGrid)
			text(4, y+4, axisLabel(maxV*float64(g)/4)+unit, color.Black)
		}
		for _, s := range series {
			px, py := -1, -1
			for i, sec := range r.Series {
				x := xOf(float64(i) + 0.5)
				y := y0 + plotH - int(s.v(sec)/maxV*float64(plotH)+0.5)
				if px >= 0 {
					line(px, py, x, y, s.c)
				}
				px, py = x, y
			}
		}
		if r.Chaos != nil {
			for i, e := range r.Chaos.Actions {
				x := xOf(e.AtS)
				fill(x, y0, x+1, y0+plotH, colEvent)
				// Labels step down so that close actions stay readable.
				text(x+2, y0+12+(i%4)*13, e.Action+" "+e.Target, colEvent)
			}
		}
	}
	var maxOps, maxMs float64
	for _, s := range r.Series {
		maxOps = math.Max(maxOps, float64(max(s.OK, s.Failed)))
		maxMs = math.Max(maxMs, s.P99Ms)
	}
	type ser = struct {
		name string
		c    color.Color
		v    func(SecondReport) float64
	}
	panel(top, "Operations ended per second", maxOps, "", []ser{
		{"ok/s", colOK, func(s SecondReport) float64 { return float64(s.OK) }},
		{"failed/s", colFailed, func(s SecondReport) float64 { return float64(s.Failed) }},
	})
	panel(top+plotH+gap, "Latency of successes (ms)", maxMs, "", []ser{
		{"p50", colP50, func(s SecondReport) float64 { return s.P50Ms }},
		{"p95", colP95, func(s SecondReport) float64 { return s.P95Ms }},
		{"p99", colP99, func(s SecondReport) float64 { return s.P99Ms }},
	})
	for t := 0; t <= n; t += max(1, n/10) {
		text(xOf(float64(t))-4, top+2*plotH+gap+16, fmt.Sprintf("%ds", t), color.Black)
	}
	if err := cv.WritePNG(w); err != nil {
		return fmt.Errorf("loadbench: %w", err)
	}
	return nil
}

func axisLabel(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return strings.TrimRight(fmt.Sprintf("%.2f", v), "0")
}

// niceMax rounds v up to 1, 2 or 5 times a power of ten (at least 1).
func niceMax(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}
