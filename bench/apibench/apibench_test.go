package apibench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"filigrane/actors"
)

func TestHistogramQuantiles(t *testing.T) {
	var h Histogram
	for i := 1; i <= 10000; i++ {
		h.Record(time.Duration(i) * time.Millisecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5000 * time.Millisecond}, {0.95, 9500 * time.Millisecond}, {0.99, 9900 * time.Millisecond}, {1, 10000 * time.Millisecond}} {
		got := h.Quantile(c.q)
		if diff := float64(got-c.want) / float64(c.want); diff < -0.01 || diff > 0.01 {
			t.Errorf("q%.2f = %v, want %v within 1%%", c.q, got, c.want)
		}
	}
	if h.Max() != 10*time.Second || h.Count() != 10000 {
		t.Errorf("max %v count %d", h.Max(), h.Count())
	}
	var small Histogram
	small.Record(37 * time.Microsecond)
	if small.Quantile(0.5) != 37*time.Microsecond {
		t.Errorf("small value: %v", small.Quantile(0.5))
	}
}

func TestParseRequests(t *testing.T) {
	all, per, err := ParseRequests("auth=50,embed=4")
	if err != nil || all != 0 || per[EndpointAuth] != 50 || per[EndpointEmbed] != 4 {
		t.Fatalf("got %d %v %v", all, per, err)
	}
	if all, _, err := ParseRequests("12"); err != nil || all != 12 {
		t.Fatalf("got %d %v", all, err)
	}
	if _, _, err := ParseRequests("bogus=3"); err == nil {
		t.Fatal("unknown endpoint accepted")
	}
}

// TestNormalizeTargets: targets lose their spaces and trailing slashes; anything but an http(s) base URL is
// refused with the target named.
func TestNormalizeTargets(t *testing.T) {
	ts := []string{" http://127.0.0.1:8080/ ", "https://node.example//"}
	if err := NormalizeTargets(ts); err != nil || ts[0] != "http://127.0.0.1:8080" || ts[1] != "https://node.example" {
		t.Fatalf("got %q, %v", ts, err)
	}
	for _, bad := range []string{"127.0.0.1:8080", "ftp://host", "http://", "http://a b"} {
		if err := NormalizeTargets([]string{bad}); err == nil || !strings.Contains(err.Error(), "want a base URL") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestPlanCatalogFile keeps plans-unlimited.json (documented for `filigrane serve --plans`) equal to what
// --spawn uses, and checks that the node's catalog loader accepts it with the business plan's limits lifted.
func TestPlanCatalogFile(t *testing.T) {
	want, err := PlanCatalog()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("plans-unlimited.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("plans-unlimited.json differs from PlanCatalog():\n%s", want)
	}
	cat, err := actors.LoadCatalog("plans-unlimited.json")
	if err != nil {
		t.Fatal(err)
	}
	p, ok := cat.Plan("business")
	if !ok || p.RequestsPerMinute != UnlimitedRequestsPerMinute || p.Concurrency != UnlimitedConcurrency || !p.GPU ||
		!p.HasFormat("image") {
		t.Fatalf("business plan %+v", p)
	}
}

func TestSpawnRefusesSeveralNodes(t *testing.T) {
	if _, err := Spawn(context.Background(), SpawnConfig{Nodes: 3}); !errors.Is(err, ErrMultiNodeSpawn) {
		t.Fatalf("Spawn(3) = %v, want ErrMultiNodeSpawn", err)
	}
}

// TestRunAgainstSpawnedNode runs the harness end to end on one in-process node: 50 key look-ups and a few
// synchronous embeds and detections, 40 status reads of one async job, from 2 clients, with the codec baseline.
func TestRunAgainstSpawnedNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node and runs the codec")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sp, err := Spawn(ctx, SpawnConfig{Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := sp.Close(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	// A smaller image than the default keeps the test quick on a shared 2-core machine.
	img, err := PhotoJPEG(512, 384, 7)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	rep, err := Run(ctx, Config{
		Targets: sp.Targets(), Key: sp.Key, Clients: 2, Image: img,
		Endpoints:     []Endpoint{EndpointAuth, EndpointStatus, EndpointEmbed, EndpointDetect},
		PerEndpoint:   map[Endpoint]int{EndpointAuth: 50, EndpointStatus: 40, EndpointEmbed: 4, EndpointDetect: 3},
		CodecBaseline: true, BaselineRuns: 1, BaselineParallel: 2, Log: &log,
	})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	want := map[Endpoint]int{EndpointAuth: 50, EndpointStatus: 40, EndpointEmbed: 4, EndpointDetect: 3}
	if len(rep.Endpoints) != 4 {
		t.Fatalf("%d endpoint reports", len(rep.Endpoints))
	}
	for _, e := range rep.Endpoints {
		n := want[e.Endpoint]
		if e.Requests != n || e.Successes != n || e.Status429 != 0 || e.OtherErrors != 0 || len(e.Failures) != 0 {
			t.Errorf("%s: requests %d ok %d 429 %d other %d %v %v, want %d clean", e.Endpoint, e.Requests, e.Successes,
				e.Status429, e.OtherErrors, e.Failures, e.FailureSamples, n)
		}
		if e.Latency.P50Ms <= 0 || e.Latency.P50Ms > e.Latency.P99Ms || e.Latency.P99Ms > e.Latency.MaxMs || e.Throughput <= 0 {
			t.Errorf("%s: implausible latency %+v or throughput %v", e.Endpoint, e.Latency, e.Throughput)
		}
	}
	if rep.Baseline == nil || !rep.Baseline.Watermarked || rep.Baseline.Embed.P50Ms <= 0 {
		t.Errorf("baseline %+v: want a timed embed and a watermarked detection input", rep.Baseline)
	}
	if e := rep.Endpoint(EndpointEmbed); e.OverheadP50Ms == nil {
		t.Error("no embed overhead computed")
	}

	var md bytes.Buffer
	rep.WriteMarkdown(&md)
	for _, s := range []string{"| auth `GET /auth/api-key` | 50 | 50 | 0 | 0 |",
		"| status `GET /watermarks/jobs/{request_id}` | 40 | 40 | 0 | 0 |", "overhead p50 ms"} {
		if !strings.Contains(md.String(), s) {
			t.Errorf("markdown lacks %q:\n%s", s, md.String())
		}
	}
	path := filepath.Join(t.TempDir(), "out", "api.json")
	if err := rep.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	var back Report
	if b, err := os.ReadFile(path); err != nil || json.Unmarshal(b, &back) != nil || len(back.Endpoints) != 4 {
		t.Errorf("JSON report does not read back: %v", err)
	}
}

// TestFailuresCountedApart runs against a fake server that answers every third request 429 (rate limited,
// after refusalDelay), every third 503 and the rest 200, over two targets, and checks the split, the
// round-robin and that the report gives the 429s' own latency (what a load tester reads to see how fast a
// node sheds), apart from the successes'.
func TestFailuresCountedApart(t *testing.T) {
	const refusalDelay = 40 * time.Millisecond
	var calls atomic.Int64
	hits := make([]atomic.Int64, 2)
	handler := func(i int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			hits[i].Add(1)
			if r.Header.Get("X-API-Key") != "k" || r.URL.Path != "/auth/api-key" {
				w.WriteHeader(400)
				return
			}
			switch calls.Add(1) % 3 {
			case 0:
				time.Sleep(refusalDelay) // the server's pace, measured by the report
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(429)
				w.Write([]byte(`{"status":429,"code":"rate_limited"}`))
			case 1:
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(503)
				w.Write([]byte(`{"status":503,"code":"unavailable"}`))
			default:
				w.Write([]byte(`{"key_id":"x"}`))
			}
		}
	}
	a, b := httptest.NewServer(handler(0)), httptest.NewServer(handler(1))
	defer a.Close()
	defer b.Close()
	rep, err := Run(context.Background(), Config{Targets: []string{a.URL, b.URL + "/"}, Key: "k", Clients: 3,
		Endpoints: []Endpoint{EndpointAuth}, Requests: 30})
	if err != nil {
		t.Fatal(err)
	}
	e := rep.Endpoints[0]
	if e.Requests != 30 || e.Successes != 10 || e.Status429 != 10 || e.OtherErrors != 10 ||
		e.Failures["429 rate_limited"] != 10 || e.Failures["503 unavailable"] != 10 {
		t.Errorf("got %+v", e)
	}
	if hits[0].Load() != 15 || hits[1].Load() != 15 {
		t.Errorf("round-robin: %d and %d requests", hits[0].Load(), hits[1].Load())
	}
	if l := e.Latency429; l == nil || l.P50Ms < ms(refusalDelay) || l.MaxMs < l.P50Ms {
		t.Errorf("429 latency %+v, want a p50 of at least %v", l, refusalDelay)
	}
	var md bytes.Buffer
	rep.WriteMarkdown(&md)
	if !strings.Contains(md.String(), "Latency of the 429 answers") || !strings.Contains(md.String(), "* auth: 10 answers, p50 ") {
		t.Errorf("markdown lacks the 429 latency:\n%s", md.String())
	}
}

// TestCodecBaselineCPU: the codec baseline run alone reports the CPU time of an embed and a detection pass,
// and leaves it out when several run at once (the process's CPU time would mix them).
func TestCodecBaselineCPU(t *testing.T) {
	img, err := PhotoJPEG(256, 256, 3)
	if err != nil {
		t.Fatal(err)
	}
	b, err := MeasureCodec(context.Background(), nil, img, `{"a":1}`, img, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if b.EmbedCPUMs <= 0 || b.DetectCPUMs <= 0 {
		t.Fatalf("CPU per pass: embed %v ms, detect %v ms", b.EmbedCPUMs, b.DetectCPUMs)
	}
	if b2, err := MeasureCodec(context.Background(), nil, img, `{"a":1}`, img, 1, 2); err != nil || b2.EmbedCPUMs != 0 {
		t.Fatalf("two at once: %v, embed CPU %v", err, b2.EmbedCPUMs)
	}
}
