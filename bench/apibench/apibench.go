// Package apibench load-tests Filigrane's HTTP API: a fixed number of concurrent clients send one kind of
// request at a time (GET /auth/api-key, GET of one job's status, a synchronous image embed, a synchronous
// detection) to one or more nodes, round-robin, for a duration or a request count, and the report gives per
// endpoint the counts (429s apart from other failures), the throughput and latency percentiles (of the successes, and of the 429s apart). It can also time the codec alone on the
// same image in this process, so that the service's own overhead (upload, job, actors, storage, HTTP) shows,
// and start in-process nodes to test against (Spawn).
//
// `filigrane bench api` is the command line; bench/README.md has the method and the latest figures.
package apibench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Endpoint names one kind of request.
type Endpoint string

// The endpoints the harness can load.
const (
	EndpointAuth   Endpoint = "auth"   // GET /auth/api-key
	EndpointEmbed  Endpoint = "embed"  // POST /watermarks/images (synchronous, answers the marked PNG)
	EndpointDetect Endpoint = "detect" // POST /watermarks/images/detect (synchronous, answers JSON)
	// EndpointStatus is GET /watermarks/jobs/{request_id} of one job: a client polling a job's status, the
	// most frequent request of asynchronous use. The job is an async embed made before the phases.
	EndpointStatus Endpoint = "status"
)

// AllEndpoints lists every endpoint in the order phases run.
var AllEndpoints = []Endpoint{EndpointAuth, EndpointStatus, EndpointEmbed, EndpointDetect}

func (e Endpoint) method() string {
	if e == EndpointAuth || e == EndpointStatus {
		return "GET"
	}
	return "POST"
}

func (e Endpoint) path() string {
	switch e {
	case EndpointEmbed:
		return "/watermarks/images"
	case EndpointDetect:
		return "/watermarks/images/detect"
	case EndpointStatus:
		return "/watermarks/jobs/{request_id}"
	}
	return "/auth/api-key"
}

// ParseEndpoints reads a comma-separated list of endpoint names.
func ParseEndpoints(s string) ([]Endpoint, error) {
	var out []Endpoint
	seen := map[Endpoint]bool{}
	for _, f := range strings.Split(s, ",") {
		e := Endpoint(strings.TrimSpace(f))
		switch e {
		case "":
			continue
		case EndpointAuth, EndpointEmbed, EndpointDetect, EndpointStatus:
		default:
			return nil, fmt.Errorf("unknown endpoint %q (want auth, status, embed, detect)", e)
		}
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no endpoint given")
	}
	return out, nil
}

// ParseRequests reads a request count: "N" (every endpoint) or "auth=500,embed=20" (per endpoint; endpoints
// not named run for the duration). An empty string means no counts.
func ParseRequests(s string) (all int, per map[Endpoint]int, err error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil, nil
	}
	if !strings.Contains(s, "=") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return 0, nil, fmt.Errorf("request count %q: want a positive integer or endpoint=N pairs", s)
		}
		return n, nil, nil
	}
	per = map[Endpoint]int{}
	for _, f := range strings.Split(s, ",") {
		name, val, _ := strings.Cut(strings.TrimSpace(f), "=")
		eps, err := ParseEndpoints(name)
		if err != nil {
			return 0, nil, err
		}
		n, err := strconv.Atoi(val)
		if err != nil || n < 1 {
			return 0, nil, fmt.Errorf("request count for %s: %q is not a positive integer", name, val)
		}
		per[eps[0]] = n
	}
	return 0, per, nil
}

// Config is one benchmark run.
type Config struct {
	// Targets are node base URLs (http://host:port); requests go to them round-robin.
	Targets []string
	// Key is the API key sent as X-API-Key. It must be valid on every target.
	Key string
	// Clients is the number of concurrent clients (each has at most one request in flight).
	Clients int
	// Endpoints run one after another, each in its own phase, so that one endpoint's latency is not mixed
	// with another's CPU load.
	Endpoints []Endpoint
	// Requests is the number of requests per endpoint phase; Duration applies to endpoints with no count.
	Requests    int
	PerEndpoint map[Endpoint]int
	Duration    time.Duration
	// Warmup runs each phase's requests for this long first, unrecorded (connections, caches, actor
	// activation, the Go scheduler's ramp-up).
	Warmup time.Duration
	// Image is the file embedded (and, unmarked, detected with DetectOriginal); nil generates a 1024x1024
	// photo-like JPEG.
	Image     []byte
	ImageName string
	// Data is the embed's JSON data field.
	Data string
	// DetectOriginal detects the unmarked Image. By default the detect phase sends a marked copy, obtained
	// by one embed request to the first target before the phases, which is the realistic case.
	DetectOriginal bool
	// Timeout bounds one request; a synchronous embed may legitimately take up to the server's sync wait.
	Timeout time.Duration
	// CodecBaseline times the codec alone on the same files, in this process, before the load phases.
	CodecBaseline bool
	// BaselineRuns is the number of codec runs per operation and goroutine (median reported); 0 means 10.
	BaselineRuns int
	// BaselineParallel is the number of goroutines running the codec at once; 0 means 1 (the codec alone).
	BaselineParallel int
	// CodecKey is the codec secret of the baseline; empty uses codec.DevelopmentKey. Timing does not depend
	// on the key, but the detection result reported with the baseline does.
	CodecKey []byte
	// Log receives progress lines; nil discards them.
	Log io.Writer

	statusPath string // the status endpoint's path, with the request id of the job made for it
}

func (c *Config) defaults() error {
	if len(c.Targets) == 0 {
		return errors.New("no target given")
	}
	if err := NormalizeTargets(c.Targets); err != nil {
		return err
	}
	if c.Key == "" {
		return errors.New("no API key given")
	}
	if c.Clients < 1 {
		c.Clients = 1
	}
	if len(c.Endpoints) == 0 {
		c.Endpoints = []Endpoint{EndpointAuth}
	}
	if c.Duration <= 0 && c.Requests <= 0 {
		for _, e := range c.Endpoints {
			if c.PerEndpoint[e] <= 0 {
				c.Duration = 10 * time.Second
			}
		}
	}
	if c.Data == "" {
		c.Data = `{"benchmark":"api"}`
	}
	if c.ImageName == "" {
		c.ImageName = "bench.jpg"
	}
	if c.Timeout <= 0 {
		c.Timeout = 2 * time.Minute
	}
	if c.BaselineRuns <= 0 {
		c.BaselineRuns = 10
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return nil
}

func (c *Config) requestsFor(e Endpoint) int {
	if n := c.PerEndpoint[e]; n > 0 {
		return n
	}
	return c.Requests
}

// Run runs the phases and returns the report. It fails only when the run cannot start (bad configuration,
// the marked copy for detection cannot be made); failed requests are counted in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	rep := &Report{Started: time.Now().UTC(), Targets: cfg.Targets, Clients: cfg.Clients,
		GOMAXPROCS: runtime.GOMAXPROCS(0), NumCPU: runtime.NumCPU()}
	rep.Host, _ = os.Hostname()
	needs := func(e Endpoint) bool {
		for _, x := range cfg.Endpoints {
			if x == e {
				return true
			}
		}
		return false
	}
	needImage := needs(EndpointEmbed) || needs(EndpointDetect) || needs(EndpointStatus) || cfg.CodecBaseline
	if cfg.Image == nil && needImage {
		img, err := PhotoJPEG(DefaultImageSide, DefaultImageSide, 1)
		if err != nil {
			return nil, err
		}
		cfg.Image, cfg.ImageName = img, fmt.Sprintf("generated-%dx%d.jpg", DefaultImageSide, DefaultImageSide)
	}
	if needImage {
		rep.Image = describeImage(cfg.ImageName, cfg.Image)
	}

	client := NewClient("filigrane-bench", cfg.Clients+4, cfg.Timeout)
	defer client.CloseIdleConnections()

	bodies := map[Endpoint]*RequestBody{}
	var embedBody *RequestBody
	if needImage {
		var err error
		if embedBody, err = MultipartBody(cfg.Image, cfg.ImageName, cfg.Data); err != nil {
			return nil, err
		}
		bodies[EndpointEmbed] = embedBody
	}
	detectInput, detectName := cfg.Image, cfg.ImageName
	if needs(EndpointDetect) || cfg.CodecBaseline {
		var err error
		if !cfg.DetectOriginal {
			fmt.Fprintf(cfg.Log, "bench api: embedding once on %s for the detection input\n", cfg.Targets[0])
			marked, err := embedOnce(client, cfg, embedBody)
			if err != nil {
				return nil, fmt.Errorf("make the marked copy for detection (use --detect-original to detect the unmarked image): %w", err)
			}
			detectInput, detectName = marked, "marked.png"
		}
		rep.DetectInput = describeImage(detectName, detectInput)
		if bodies[EndpointDetect], err = MultipartBody(detectInput, detectName, ""); err != nil {
			return nil, err
		}
	}

	if needs(EndpointStatus) {
		fmt.Fprintf(cfg.Log, "bench api: submitting one async embed on %s for the status phase\n", cfg.Targets[0])
		id, err := asyncJob(ctx, client, cfg, embedBody)
		if err != nil {
			return nil, fmt.Errorf("make the job whose status is read: %w", err)
		}
		cfg.statusPath = "/watermarks/jobs/" + id
	}

	if cfg.CodecBaseline {
		fmt.Fprintf(cfg.Log, "bench api: codec baseline, %d runs each, %d at once\n", cfg.BaselineRuns, max(cfg.BaselineParallel, 1))
		b, err := MeasureCodec(ctx, cfg.CodecKey, cfg.Image, cfg.Data, detectInput, cfg.BaselineRuns, cfg.BaselineParallel)
		if err != nil {
			return nil, fmt.Errorf("codec baseline: %w", err)
		}
		rep.Baseline = b
	}

	for _, e := range cfg.Endpoints {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		ph := phase{cfg: &cfg, client: client, endpoint: e, body: bodies[e]}
		if cfg.Warmup > 0 {
			fmt.Fprintf(cfg.Log, "bench api: %s: warm-up %s\n", e, cfg.Warmup)
			ph.run(ctx, cfg.Warmup, 0)
		}
		n := cfg.requestsFor(e)
		if n > 0 {
			fmt.Fprintf(cfg.Log, "bench api: %s: %d requests, %d clients, %d targets\n", e, n, cfg.Clients, len(cfg.Targets))
		} else {
			fmt.Fprintf(cfg.Log, "bench api: %s: %s, %d clients, %d targets\n", e, cfg.Duration, cfg.Clients, len(cfg.Targets))
		}
		er := ph.run(ctx, cfg.Duration, n)
		rep.Endpoints = append(rep.Endpoints, er)
	}
	rep.computeOverhead()
	for _, e := range rep.Endpoints {
		if e.Failures["429 rate_limited"] > 0 {
			rep.Notes = append(rep.Notes, "the plan's per-minute request limit answered 429: run the node with "+
				"`filigrane serve --plans bench/apibench/plans-unlimited.json` (or use --spawn 1) to measure the service, not the limiter")
			break
		}
	}
	return rep, nil
}

// RequestBody is a prepared request body, shared read-only by every client.
type RequestBody struct {
	ContentType string
	Data        []byte
}

// MultipartBody builds a multipart form with the optional data field and the file.
func MultipartBody(file []byte, name, data string) (*RequestBody, error) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if data != "" {
		if err := mw.WriteField("data", data); err != nil {
			return nil, fmt.Errorf("build multipart body: %w", err)
		}
	}
	fw, err := mw.CreateFormFile("file", name)
	if err != nil {
		return nil, fmt.Errorf("build multipart body: %w", err)
	}
	if _, err := fw.Write(file); err != nil {
		return nil, fmt.Errorf("build multipart body: %w", err)
	}
	if err := mw.Close(); err != nil {
		return nil, fmt.Errorf("build multipart body: %w", err)
	}
	return &RequestBody{ContentType: mw.FormDataContentType(), Data: buf.Bytes()}, nil
}

// embedOnce runs one synchronous embed on the first target and returns the marked PNG.
func embedOnce(client *fasthttp.Client, cfg Config, body *RequestBody) ([]byte, error) {
	req, res := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(res)
	prepare(req, cfg.Targets[0], cfg.Key, EndpointEmbed, body, "")
	if err := client.DoTimeout(req, res, cfg.Timeout); err != nil {
		return nil, fmt.Errorf("POST %s: %w", EndpointEmbed.path(), err)
	}
	if res.StatusCode() != 200 || !bytes.HasPrefix(res.Header.ContentType(), []byte("image/png")) {
		return nil, fmt.Errorf("POST %s answered %d %s: %s", EndpointEmbed.path(), res.StatusCode(),
			res.Header.ContentType(), Snippet(res.Body()))
	}
	return append([]byte(nil), res.Body()...), nil
}

// asyncJob submits one async embed on the first target and waits until the job has ended (a status poll
// then reads a settled record, the steady state of a client that polls), returning its request id.
func asyncJob(ctx context.Context, client *fasthttp.Client, cfg Config, body *RequestBody) (string, error) {
	req, res := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(res)
	prepare(req, cfg.Targets[0], cfg.Key, EndpointEmbed, body, "/watermarks/images/async")
	if err := client.DoTimeout(req, res, cfg.Timeout); err != nil {
		return "", fmt.Errorf("POST /watermarks/images/async: %w", err)
	}
	var rc struct {
		RequestID string `json:"request_id"`
		Status    string `json:"status"`
	}
	if res.StatusCode() != 202 || json.Unmarshal(res.Body(), &rc) != nil || rc.RequestID == "" {
		return "", fmt.Errorf("POST /watermarks/images/async answered %d: %s", res.StatusCode(), Snippet(res.Body()))
	}
	deadline := time.Now().Add(cfg.Timeout)
	for rc.Status != "succeeded" && rc.Status != "failed" {
		if time.Now().After(deadline) {
			return "", fmt.Errorf("job %s still %s after %v", rc.RequestID, rc.Status, cfg.Timeout)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond): // polling the public API: there is nothing to wait on
		}
		prepare(req, cfg.Targets[0], cfg.Key, EndpointStatus, nil, "/watermarks/jobs/"+rc.RequestID)
		res.Reset()
		if err := client.DoTimeout(req, res, cfg.Timeout); err != nil {
			return "", fmt.Errorf("GET job %s: %w", rc.RequestID, err)
		}
		if res.StatusCode() != 200 || json.Unmarshal(res.Body(), &rc) != nil {
			return "", fmt.Errorf("GET job %s answered %d: %s", rc.RequestID, res.StatusCode(), Snippet(res.Body()))
		}
	}
	return rc.RequestID, nil
}

// prepare sets req up for endpoint e on target; path, when not empty, replaces the endpoint's path.
func prepare(req *fasthttp.Request, target, key string, e Endpoint, body *RequestBody, path string) {
	req.Reset()
	if path == "" {
		path = e.path()
	}
	req.SetRequestURI(target + path)
	req.Header.SetMethod(e.method())
	req.Header.Set("X-API-Key", key)
	if body != nil && e.method() == "POST" {
		req.Header.SetContentType(body.ContentType)
		// The body is shared by all clients and never written to, so no copy is needed.
		req.SetBodyRaw(body.Data)
	}
}

// phase runs one endpoint with cfg.Clients clients.
type phase struct {
	cfg      *Config
	client   *fasthttp.Client
	endpoint Endpoint
	body     *RequestBody
}

// clientStats is one client's tally; clients merge theirs at the end so that the hot path takes no lock.
type clientStats struct {
	hist Histogram
	// refused is the latency of the 429 answers: how fast the node sheds what it will not take.
	refused   Histogram
	requests  int
	successes int
	failures  map[string]int
	samples   map[string]string
}

func (s *clientStats) fail(key, sample string) {
	if s.failures == nil {
		s.failures, s.samples = map[string]int{}, map[string]string{}
	}
	s.failures[key]++
	if _, ok := s.samples[key]; !ok {
		s.samples[key] = sample
	}
}

// run sends requests until d has passed (n == 0), n requests were sent or ctx ends, and reports on them.
// Requests in flight when the time is up finish and count; the phase's elapsed time runs until the last one
// ends. fasthttp takes no context, so a cancelled ctx stops new requests and those in flight end within
// Config.Timeout (for the endpoints here, in well under a second unless the server is stuck).
func (p *phase) run(ctx context.Context, d time.Duration, n int) EndpointReport {
	var issued, rr atomic.Int64
	stats := make([]clientStats, p.cfg.Clients)
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for i := range stats {
		wg.Add(1)
		go func(st *clientStats) {
			defer wg.Done()
			req, res := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(res)
			for ctx.Err() == nil {
				if n > 0 {
					if issued.Add(1) > int64(n) {
						return
					}
				} else if !time.Now().Before(deadline) {
					return
				}
				target := p.cfg.Targets[int(rr.Add(1)-1)%len(p.cfg.Targets)]
				path := ""
				if p.endpoint == EndpointStatus {
					path = p.cfg.statusPath
				}
				prepare(req, target, p.cfg.Key, p.endpoint, p.body, path)
				res.Reset()
				t0 := time.Now()
				err := p.client.DoTimeout(req, res, p.cfg.Timeout)
				lat := time.Since(t0)
				st.requests++
				if key, sample, ok := classify(p.endpoint, res, err); ok {
					st.successes++
					// Latency percentiles are of successful requests: a fast 429 or a timeout would
					// otherwise pull them away from the work being measured. Failures are counted apart.
					st.hist.Record(lat)
				} else {
					st.fail(key, sample)
					if strings.HasPrefix(key, "429") {
						st.refused.Record(lat)
					}
					if err != nil {
						// A refused or broken connection fails at once; pausing keeps a dead target from
						// turning the client into a busy loop that starves the live ones of CPU.
						time.Sleep(10 * time.Millisecond)
					}
				}
			}
		}(&stats[i])
	}
	wg.Wait()
	elapsed := time.Since(start)

	er := EndpointReport{Endpoint: p.endpoint, Method: p.endpoint.method(), Path: p.endpoint.path(),
		Clients: p.cfg.Clients, Targets: len(p.cfg.Targets), ElapsedS: elapsed.Seconds()}
	var hist, refused Histogram
	for i := range stats {
		st := &stats[i]
		hist.Merge(&st.hist)
		refused.Merge(&st.refused)
		er.Requests += st.requests
		er.Successes += st.successes
		for k, v := range st.failures {
			if er.Failures == nil {
				er.Failures, er.FailureSamples = map[string]int{}, map[string]string{}
			}
			er.Failures[k] += v
			if _, ok := er.FailureSamples[k]; !ok {
				er.FailureSamples[k] = st.samples[k]
			}
			if strings.HasPrefix(k, "429") {
				er.Status429 += v
			} else {
				er.OtherErrors += v
			}
		}
	}
	if s := elapsed.Seconds(); s > 0 {
		er.Throughput = float64(er.Requests) / s
		er.SuccessThroughput = float64(er.Successes) / s
	}
	er.Latency = LatencyOf(&hist)
	if er.Status429 > 0 {
		l := LatencyOf(&refused)
		er.Latency429 = &l
	}
	return er
}

// classify says whether a response is the endpoint's success, and otherwise names the failure: the status
// and the problem code ("429 rate_limited", "429 concurrency_limited", "503 unavailable"), "202 accepted" for a
// synchronous embed that outlived the server's sync wait, or "transport: ..." when no response came.
func classify(e Endpoint, res *fasthttp.Response, err error) (key, sample string, ok bool) {
	if err != nil {
		return "transport: " + TransportKind(err), err.Error(), false
	}
	status := res.StatusCode()
	if status == 200 {
		// A cheap look at the body, so that a proxy's or a stub's 200 is not counted as the real answer.
		switch {
		case e == EndpointEmbed && !bytes.HasPrefix(res.Header.ContentType(), []byte("image/png")):
			return "200 not image/png", string(res.Header.ContentType()), false
		case e == EndpointAuth && !bytes.Contains(res.Body(), []byte(`"key_id"`)):
			return "200 without key_id", Snippet(res.Body()), false
		case e == EndpointDetect && !bytes.Contains(res.Body(), []byte(`"watermarked"`)):
			return "200 without watermarked", Snippet(res.Body()), false
		case e == EndpointStatus && !bytes.Contains(res.Body(), []byte(`"request_id"`)):
			return "200 without request_id", Snippet(res.Body()), false
		}
		return "", "", true
	}
	key = strconv.Itoa(status)
	if status == 202 {
		key += " accepted (sync wait exceeded)"
	} else {
		var prob struct {
			Code string `json:"code"`
		}
		if json.Unmarshal(res.Body(), &prob) == nil && prob.Code != "" {
			key += " " + prob.Code
		}
	}
	return key, Snippet(res.Body()), false
}

// TransportKind names a failure that left no response: timeout, connection closed, connection refused, other.
func TransportKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, fasthttp.ErrTimeout), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, fasthttp.ErrConnectionClosed):
		return "connection closed"
	case strings.Contains(err.Error(), "connection refused"):
		return "connection refused"
	}
	return "other"
}

// Snippet is the start of a response body for a report, or a note that it is binary.
func Snippet(b []byte) string {
	const max = 300
	s := string(b)
	if len(s) > max {
		s = s[:max] + "..."
	}
	if !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 && r != '\n' && r != '\t' }) {
		return s
	}
	return fmt.Sprintf("(%d bytes of binary)", len(b))
}
