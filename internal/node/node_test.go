package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"filigrane/actors"
	"filigrane/internal/accounts"
	"filigrane/internal/admin"
	"filigrane/internal/clock"
	"filigrane/internal/node"
	"filigrane/persistence/pebblestore"
)

// startNode starts a node on free loopback ports (inMemory: in memory) with dir as its data directory.
// The background sweeper is off (SweepInterval < 0): tests move the clock and call Sweep themselves.
//
// A test keeps one node of its own alive at a time: it stops a node before it starts the next (stopNode,
// fixture.stop). Every node start runs protoactor's remote start, which replaces gRPC's process-global
// logger (grpclog.SetLoggerV2, a plain write; protoactor gives no way around it), and the gRPC server of a
// node already running reads that variable without synchronisation: two nodes alive at once in one process
// are a data race inside those libraries (see cluster/internal/grpcprobe), which the race detector reports
// when it still remembers the earlier read. A node that was stopped is no such reader: its gRPC server's
// goroutines were joined. So `make race` runs a subset of this package's tests one at a time
// (-test.parallel=1, RACE_NODE_TESTS in the Makefile); the package as a whole, whose parallel tests overlap,
// is not run under the race detector.
func startNode(t *testing.T, dir string, clk clock.Clock, tweaks ...func(*node.Config)) *node.Node {
	t.Helper()
	cfg := node.Config{
		DataDir: dir, APIAddr: "127.0.0.1:0", UploadAddr: "127.0.0.1:0", NodeName: "test",
		Logger: zerolog.Nop(), Clock: clk, Bootstrap: true, SweepInterval: -1, ConsolePasswordCost: cheapHash,
	}
	for _, tw := range tweaks {
		tw(&cfg)
	}
	n, err := node.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	return n
}

func stopNode(t *testing.T, n *node.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatalf("stop node: %v", err)
	}
}

// offline runs fn with the admin functions on a stopped node's data directory.
func offline(t *testing.T, dir string, clk clock.Clock, fn func(admin.Admin)) {
	t.Helper()
	store, err := pebblestore.Open(node.Layout{Root: dir}.StoreDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	fn(admin.Admin{Store: store, Clock: clk, Catalog: actors.DefaultCatalog(), PasswordCost: cheapHash})
}

// cheapHash is the argon2id cost of the console passwords the package's nodes and admin calls set (the
// development owner's, made by every bootstrap): no test here signs in to the console, and the default cost
// (19 MiB, 2 passes) cost about 40 ms of CPU per fixture, a third of one.
var cheapHash = accounts.Argon2{Time: 1, MemKiB: 64, Threads: 1}

type response struct {
	status int
	header http.Header
	body   []byte
}

func call(t *testing.T, method, url, key string, body io.Reader) response {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

type problem struct {
	Type, Title, Detail, Code, RequestID string
	Status                               int
}

func decodeProblem(t *testing.T, r response) problem {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("status %d content type %q, want application/problem+json; body %s", r.status, ct, r.body)
	}
	var p struct {
		Type      string `json:"type"`
		Title     string `json:"title"`
		Status    int    `json:"status"`
		Detail    string `json:"detail"`
		Code      string `json:"code"`
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("problem body %s: %v", r.body, err)
	}
	if p.Status != r.status || p.Code == "" || p.Title == "" || p.Type == "" {
		t.Fatalf("incomplete problem %+v for status %d", p, r.status)
	}
	if p.RequestID == "" || p.RequestID != r.header.Get("X-Request-ID") {
		t.Fatalf("problem request_id %q, header %q", p.RequestID, r.header.Get("X-Request-ID"))
	}
	return problem{Type: p.Type, Title: p.Title, Detail: p.Detail, Code: p.Code, RequestID: p.RequestID, Status: p.Status}
}

// fixture is a node with two organizations and keys of every kind the matrix needs.
type fixture struct {
	n                                            *node.Node
	base                                         string
	clk                                          *clock.Manual
	dev                                          *admin.DevOrg
	orgA, orgB                                   string
	keyA, keyB, keyExpiring, keyRevoked, keyGone string
	keyNoScopes                                  string
	orgPoor, keyPoor, dataDir                    string
}

func newFixture(t *testing.T, tweaks ...func(*node.Config)) *fixture {
	t.Helper()
	dir := t.TempDir()
	clk := clock.NewManual(time.Date(2026, 5, 4, 10, 0, 30, 0, time.UTC))
	f := &fixture{clk: clk, dataDir: dir}
	// Everything is written offline, then the node starts once (TestRestartKeepsState covers a node's own
	// bootstrap on its first start).
	offline(t, dir, clk, func(a admin.Admin) {
		ctx := context.Background()
		dev, err := a.Bootstrap(ctx)
		if err != nil || dev == nil || !strings.HasPrefix(dev.Secret, "fgk_") {
			t.Fatalf("bootstrap did not create a development key: %+v %v", dev, err)
		}
		f.dev = dev
		mk := func(name, plan string) (string, string) {
			extra := int64(50)
			if plan == "launch" {
				extra = 0
			}
			st, err := a.CreateOrg(ctx, name, plan, extra)
			if err != nil {
				t.Fatal(err)
			}
			m, err := a.AddMember(ctx, st.ID, "owner of "+name, actors.RoleOwner)
			if err != nil {
				t.Fatal(err)
			}
			return st.ID, m
		}
		var memA, memB string
		f.orgA, memA = mk("A", "trial")
		f.orgB, memB = mk("B", "growth")
		key := func(org, mem string, scopes []string, exp *time.Time) string {
			s, _, err := a.CreateKey(ctx, actors.NewKeySpec{OrgID: org, MemberID: mem, Scopes: scopes, ExpiresAt: exp})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		f.keyA = key(f.orgA, memA, actors.AllScopes(), nil)
		var memPoor string
		f.orgPoor, memPoor = mk("Poor", "launch")
		f.keyPoor = key(f.orgPoor, memPoor, actors.AllScopes(), nil)
		f.keyB = key(f.orgB, memB, []string{actors.ScopeDetect}, nil)
		exp := clk.Now().Add(time.Hour)
		f.keyExpiring = key(f.orgB, memB, actors.AllScopes(), &exp)
		f.keyNoScopes = key(f.orgB, memB, []string{actors.ScopeAssetsRead}, nil)
		f.keyRevoked = key(f.orgB, memB, actors.AllScopes(), nil)
		id := strings.Split(f.keyRevoked, "_")[1]
		if _, err := a.RevokeKey(ctx, id); err != nil {
			t.Fatal(err)
		}
		gone, err := a.AddMember(ctx, f.orgB, "leaver", actors.RoleMember)
		if err != nil {
			t.Fatal(err)
		}
		f.keyGone = key(f.orgB, gone, actors.AllScopes(), nil)
		if err := a.RemoveMember(ctx, f.orgB, gone); err != nil {
			t.Fatal(err)
		}
	})
	f.n = startNode(t, dir, clk, tweaks...)
	t.Cleanup(func() { stopNode(t, f.n) })
	f.base = "http://" + f.n.APIAddr()
	return f
}

// stop stops the fixture's node before the test ends, for a test that starts another node next (one node at
// a time: see startNode).
func (f *fixture) stop(t *testing.T) {
	t.Helper()
	stopNode(t, f.n)
	f.n = nil // its cleanup's Close of nil does nothing
}

func TestAPIKeyEndpoint(t *testing.T) {
	t.Parallel()
	f := newFixture(t, inMemory(t))
	r := call(t, "GET", f.base+"/auth/api-key", f.keyA, nil)
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if cc := r.header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("Cache-Control %q", cc)
	}
	var info struct {
		OrganizationID string   `json:"organization_id"`
		KeyID          string   `json:"key_id"`
		Scopes         []string `json:"scopes"`
	}
	if err := json.Unmarshal(r.body, &info); err != nil {
		t.Fatal(err)
	}
	if info.OrganizationID != f.orgA || info.KeyID != strings.Split(f.keyA, "_")[1] || len(info.Scopes) != len(actors.AllScopes()) {
		t.Fatalf("key info %+v", info)
	}
	if !strings.HasPrefix(r.header.Get("X-Request-ID"), "req_") || len(r.header.Get("X-Request-ID")) != 68 {
		t.Fatalf("X-Request-ID %q", r.header.Get("X-Request-ID"))
	}
	for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
		if r.header.Get(h) == "" {
			t.Fatalf("missing %s", h)
		}
	}
	// A key with no watermark scope still reads its own info: any active key may.
	if r := call(t, "GET", f.base+"/auth/api-key", f.keyNoScopes, nil); r.status != 200 {
		t.Fatalf("assets-only key: %d", r.status)
	}
	// The development key works too, and the call costs no credits.
	if r := call(t, "GET", f.base+"/auth/api-key", f.dev.Secret, nil); r.status != 200 {
		t.Fatalf("development key: %d %s", r.status, r.body)
	}
}

func TestAuthenticationFailures(t *testing.T) {
	t.Parallel()
	f := newFixture(t, inMemory(t))
	cases := []struct {
		name, key string
		status    int
		code      string
	}{
		{"missing", "", 401, "unauthorized"},
		{"garbage", "hello", 401, "unauthorized"},
		{"unknown id", "fgk_0123456789abcdef_AAAA", 401, "unauthorized"},
		{"wrong secret", f.keyA[:len(f.keyA)-2] + "xx", 401, "unauthorized"},
		{"revoked", f.keyRevoked, 401, "unauthorized"},
		{"removed member", f.keyGone, 403, "not_a_member"},
	}
	for _, c := range cases {
		r := call(t, "GET", f.base+"/auth/api-key", c.key, nil)
		if r.status != c.status {
			t.Fatalf("%s: status %d, want %d (%s)", c.name, r.status, c.status, r.body)
		}
		if p := decodeProblem(t, r); p.Code != c.code {
			t.Fatalf("%s: code %q, want %q", c.name, p.Code, c.code)
		}
	}
	if r := call(t, "GET", f.base+"/auth/api-key", f.keyExpiring, nil); r.status != 200 {
		t.Fatalf("key before expiry: %d", r.status)
	}
	f.clk.Advance(time.Hour)
	if r := call(t, "GET", f.base+"/auth/api-key", f.keyExpiring, nil); r.status != 401 {
		t.Fatalf("key at expiry: %d", r.status)
	}
}

func TestUnknownRoutesAndMethods(t *testing.T) {
	t.Parallel()
	f := newFixture(t, inMemory(t))
	r := call(t, "GET", f.base+"/no/such/thing", f.keyA, nil)
	if p := decodeProblem(t, r); r.status != 404 || p.Code != "not_found" {
		t.Fatalf("unknown route: %d %+v", r.status, p)
	}
	r = call(t, "DELETE", f.base+"/auth/api-key", f.keyA, nil)
	if p := decodeProblem(t, r); r.status != 405 || p.Code != "method_not_allowed" || r.header.Get("Allow") != "GET, HEAD" {
		t.Fatalf("wrong method: %d %+v allow %q", r.status, p, r.header.Get("Allow"))
	}
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, inMemory(t)) // orgA is on trial: 20 requests per minute
	// The clock stands at hh:mm:30, so the window resets in 30 s.
	for i := 1; i <= 20; i++ {
		r := call(t, "GET", f.base+"/auth/api-key", f.keyA, nil)
		if r.status != 200 {
			t.Fatalf("request %d: %d", i, r.status)
		}
		if got, want := r.header.Get("X-RateLimit-Remaining"), fmt.Sprint(20-i); got != want {
			t.Fatalf("request %d: remaining %s, want %s", i, got, want)
		}
		if r.header.Get("X-RateLimit-Limit") != "20" || r.header.Get("X-RateLimit-Reset") != "30" {
			t.Fatalf("limit headers %v", r.header)
		}
	}
	r := call(t, "GET", f.base+"/auth/api-key", f.keyA, nil)
	if p := decodeProblem(t, r); r.status != 429 || p.Code != "rate_limited" || r.header.Get("Retry-After") != "30" {
		t.Fatalf("21st request: %d %+v Retry-After %q", r.status, p, r.header.Get("Retry-After"))
	}
	// Another organization has its own window.
	if r := call(t, "GET", f.base+"/auth/api-key", f.keyB, nil); r.status != 200 {
		t.Fatalf("other organization limited too: %d", r.status)
	}
	f.clk.Advance(30 * time.Second)
	if r := call(t, "GET", f.base+"/auth/api-key", f.keyA, nil); r.status != 200 || r.header.Get("X-RateLimit-Remaining") != "19" {
		t.Fatalf("after the window: %d remaining %s", r.status, r.header.Get("X-RateLimit-Remaining"))
	}
}

func TestOversizedHeadersAndBodies(t *testing.T) {
	t.Parallel()
	f := newFixture(t, inMemory(t))
	conn := dial(t, f.n.APIAddr())
	fmt.Fprintf(conn, "GET /auth/api-key HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 64<<10))
	res, err := http.ReadResponse(bufioReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	r := response{status: res.StatusCode, header: res.Header, body: b}
	if p := decodeProblem(t, r); r.status != 431 || p.Code != "headers_too_large" {
		t.Fatalf("oversized headers: %d %+v", r.status, p)
	}
	// A declared body above the limit is refused before it is read.
	conn2 := dial(t, f.n.APIAddr())
	fmt.Fprintf(conn2, "POST /auth/api-key HTTP/1.1\r\nHost: x\r\nX-API-Key: %s\r\nContent-Length: %d\r\n\r\n", f.keyA, 64<<20)
	conn2.Write(bytes.Repeat([]byte("x"), 100<<10)) // past what the server reads ahead before routing
	res, err = http.ReadResponse(bufioReader(conn2), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(res.Body)
	r = response{status: res.StatusCode, header: res.Header, body: b}
	if p := decodeProblem(t, r); r.status != 413 || p.Code != "payload_too_large" {
		t.Fatalf("oversized body: %d %+v", r.status, p)
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	f := newFixture(t, inMemory(t))
	call(t, "GET", f.base+"/auth/api-key", f.keyA, nil)
	call(t, "GET", f.base+"/auth/api-key", "", nil)
	r := call(t, "GET", f.base+"/metrics", "", nil)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("metrics: %d %s", r.status, r.header.Get("Content-Type"))
	}
	body := string(r.body)
	for _, want := range []string{
		`filigrane_http_requests_total{method="GET",route="/auth/api-key",status="200"} 1`,
		`filigrane_http_requests_total{method="GET",route="/auth/api-key",status="401"} 1`,
		// The latency of successes is read apart from refusals (before, one series held both).
		`filigrane_http_request_duration_seconds_count{route="/auth/api-key",status_class="2xx"} 1`,
		`filigrane_http_request_duration_seconds_count{route="/auth/api-key",status_class="4xx"} 1`,
		`filigrane_actors_active{kind="org"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Fatalf("metrics lack %q:\n%s", want, body)
		}
	}
}

// TestRestartKeepsState stops a node and starts it again on the same data directory: organizations, keys and
// balances are intact and the development organization is not created twice.
func TestRestartKeepsState(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clk := clock.NewManual(time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC))
	n := startNode(t, dir, clk)
	dev := n.DevOrg
	ctx := context.Background()
	orgs := actors.OrgClient{Caller: n.Cluster()}
	if r, err := orgs.Reserve(ctx, actors.OrgReserve{OrgID: dev.OrgID, Op: "req_1", Credits: 7}); err != nil || r.Code != actors.ReplyOK {
		t.Fatalf("reserve: %v %+v", err, r)
	}
	if r, err := orgs.Charge(ctx, actors.OrgCharge{OrgID: dev.OrgID, Op: "req_1", Credits: 7}); err != nil || r.Code != actors.ReplyOK {
		t.Fatalf("charge: %v %+v", err, r)
	}
	stopNode(t, n)

	n = startNode(t, dir, clk)
	defer stopNode(t, n)
	if n.DevOrg != nil {
		t.Fatal("the development organization was created again on restart")
	}
	r := call(t, "GET", "http://"+n.APIAddr()+"/auth/api-key", dev.Secret, nil)
	if r.status != 200 {
		t.Fatalf("key after restart: %d %s", r.status, r.body)
	}
	rep, err := actors.OrgClient{Caller: n.Cluster()}.Get(ctx, dev.OrgID)
	if err != nil || rep.Balance != 1_000_000-7 || rep.Held != 0 {
		t.Fatalf("balance after restart: %v %+v", err, rep)
	}
	// A replayed charge after the restart moves nothing.
	if r, err := (actors.OrgClient{Caller: n.Cluster()}).Charge(ctx, actors.OrgCharge{OrgID: dev.OrgID, Op: "req_1", Credits: 7}); err != nil || r.Balance != 1_000_000-7 {
		t.Fatalf("replayed charge: %v %+v", err, r)
	}
}

// TestCloseJoinsItsGoroutines: when Close returns, the sweeper, the workers and the listeners' goroutines
// have returned; none is left running against a closed store. The sweeper ticks every millisecond so that it
// is busy when Close begins.
//
// Not parallel: it reads every goroutine of the test process, and other tests' nodes have the same ones.
func TestCloseJoinsItsGoroutines(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC))
	n := startNode(t, t.TempDir(), clk, func(c *node.Config) { c.SweepInterval = time.Millisecond })
	running := func() []string {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		var found []string
		for _, fn := range []string{"filigrane/actors/sweep.(*Sweeper).Run", "filigrane/actors.(*Pool).work", "filigrane/internal/node.(*Node).serve"} {
			if strings.Contains(stacks, fn) {
				found = append(found, fn)
			}
		}
		return found
	}
	// Start has started each goroutine, but one the scheduler has not run yet shows only its closure (seen
	// once a warm suite's files were in memory and Start returned sooner): wait until each is in its loop.
	closed := false
	t.Cleanup(func() {
		if !closed {
			stopNode(t, n) // a failure below must not leave the node writing into a removed directory
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for got := running(); len(got) != 3; got = running() {
		if time.Now().After(deadline) {
			t.Fatalf("10 s after Start, running %v; want the sweeper, the workers and the listeners", got)
		}
		runtime.Gosched()
	}
	closed = true
	stopNode(t, n)
	if got := running(); len(got) != 0 {
		t.Fatalf("after Close returned, still running: %v", got)
	}
}
