package node_test

// Helpers of the kill tests: one `filigrane serve` process killed with SIGKILL at a chosen point and
// restarted on its data directory, its object storage reached through a proxy that can hold a request, and
// the ledger read afterwards to show that the work settled (each operation charged once, nothing held).

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"filigrane/actors"
	"filigrane/cluster/clustertest"
	"filigrane/internal/admin"
	"filigrane/internal/node"
)

// gatedS3 is an HTTP proxy in front of the S3 server that holds every request whose path contains gate (and
// whose method is method, when set; that reads the whole object, when whole is set) until opened (or until
// the client goes away), and reports the first one it holds.
type gatedS3 struct {
	url      string
	gate     string
	method   string
	whole    bool
	open     chan struct{}
	openOnce sync.Once
	held     chan struct{}
	heldOnce sync.Once
}

func newGatedS3(t *testing.T, target, gate string) *gatedS3 {
	return newGatedS3Method(t, target, "", gate)
}

// newGatedS3Method is newGatedS3 holding only requests of method ("" for any).
func newGatedS3Method(t *testing.T, target, method, gate string) *gatedS3 {
	return startGatedS3(t, target, &gatedS3{gate: gate, method: method})
}

// newGatedS3Reads is newGatedS3 holding only whole-object reads (GET without a Range header): a worker
// reading a job's input, not the edge reading its header.
func newGatedS3Reads(t *testing.T, target, gate string) *gatedS3 {
	return startGatedS3(t, target, &gatedS3{gate: gate, method: "GET", whole: true})
}

func startGatedS3(t *testing.T, target string, g *gatedS3) *gatedS3 {
	u, err := url.Parse("http://" + target)
	if err != nil {
		t.Fatal(err)
	}
	g.open, g.held = make(chan struct{}), make(chan struct{})
	proxy := httputil.NewSingleHostReverseProxy(u) // keeps the client's Host header, which SigV4 signed
	proxy.ErrorLog = log.New(io.Discard, "", 0)    // a held request whose node was killed ends in an error
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, g.gate) && (g.method == "" || r.Method == g.method) &&
			(!g.whole || r.Header.Get("Range") == "") {
			g.heldOnce.Do(func() { close(g.held) })
			select {
			case <-g.open:
			case <-r.Context().Done():
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { g.release(); srv.Close() })
	g.url = srv.URL
	return g
}

func (g *gatedS3) release() { g.openOnce.Do(func() { close(g.open) }) }

// startSolo starts one `filigrane serve` process, named solo, on the data directory dir with one worker and
// JSON logs at warn, extra flags after those, and returns it with its API's base URL. It is killed when the
// test ends.
func startSolo(t *testing.T, dir string, extra ...string) (*clustertest.Processes, string) {
	t.Helper()
	bin := buildBinary(t)
	start, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	procs, err := clustertest.StartProcesses(start, clustertest.ProcessConfig{
		Binary: bin, N: 1, Ports: 4,
		Args: func(i int, ports [][]int) []string {
			p := ports[i]
			return append([]string{"serve", "--data", dir, "--node-name", "solo",
				"--listen", fmt.Sprintf("127.0.0.1:%d", p[0]), "--upload-listen", fmt.Sprintf("127.0.0.1:%d", p[1]),
				"--cluster-bind", fmt.Sprintf("127.0.0.1:%d", p[2]), "--remote-port", strconv.Itoa(p[3]),
				"--workers", "1", "--log-format", "json", "--log-level", "warn",
				"--drain-delay", "0"}, extra...) // no balancer probes it: a SIGTERM closes the listeners at once
		},
		Ready: clustertest.ReadyHTTP(0, "/healthz"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(procs.KillAll)
	return procs, "http://127.0.0.1:" + strconv.Itoa(procs.List[0].Ports[0])
}

// s3Flags are the serve flags that keep a node's records and files in s3's bucket, reached at endpoint (a
// gatedS3's URL, or s3's own endpoint).
func s3Flags(endpoint string, s3 *node.S3Config) []string {
	return []string{"--s3-endpoint", endpoint, "--s3-bucket", s3.Bucket, "--s3-access-key", s3.AccessKey,
		"--s3-secret-key", s3.SecretKey}
}

// soloBehind starts one node process whose storage is direct's bucket reached through endpoint (a proxy the
// test puts in front of the S3 server to hold, drop or refuse writes), with an owner key named name made
// directly on the bucket first; it returns the key's secret and the node's API base URL.
func soloBehind(t *testing.T, direct *node.S3Config, endpoint, name string) (secret, base string) {
	t.Helper()
	(&clusterFixture{s3: direct}).admin(t, func(a admin.Admin) { _, secret = newOwnerKey(t, a, name) })
	_, base = startSolo(t, t.TempDir(), s3Flags(endpoint, direct)...)
	return secret, base
}

// newOwnerKey creates an organization named name on the scale plan with 100 credits, and a key with every
// scope for an owner of it.
func newOwnerKey(t *testing.T, a admin.Admin, name string) (orgID, secret string) {
	t.Helper()
	ctx := context.Background()
	st, err := a.CreateOrg(ctx, name, "scale", 100)
	if err != nil {
		t.Fatal(err)
	}
	m, err := a.AddMember(ctx, st.ID, "ops", actors.RoleOwner)
	if err != nil {
		t.Fatal(err)
	}
	if secret, _, err = a.CreateKey(ctx, actors.NewKeySpec{OrgID: st.ID, MemberID: m, Scopes: actors.AllScopes()}); err != nil {
		t.Fatal(err)
	}
	return st.ID, secret
}

// ledgerSettled reads the organization's ledger once its work is over and fails the test when an operation
// was charged more than once or credits are still held. It returns the organization's state, for checks of
// the balance, and the operations charged, for checks of which and how many.
func ledgerSettled(t *testing.T, a admin.Admin, orgID string) (*actors.OrgState, map[string]bool) {
	t.Helper()
	st, entries, err := a.Balance(context.Background(), orgID, 10000)
	if err != nil {
		t.Fatal(err)
	}
	charges := map[string]int{}
	for _, e := range entries {
		if e.Kind == "charge" {
			charges[e.Operation]++
		}
	}
	charged := map[string]bool{}
	for op, k := range charges {
		if k != 1 {
			t.Fatalf("%s charged %d times", op, k)
		}
		charged[op] = true
	}
	if st.Held() != 0 {
		t.Fatalf("%d credits still held after the work ended (%d operations charged)", st.Held(), len(charged))
	}
	return st, charged
}

// chargedEach reads organization orgID's ledger (through withAdmin, a fixture's admin method) once its work is
// over and fails the test unless every job of ids was charged (each operation once, nothing held:
// ledgerSettled) and the balance is the fixture's 1,000 credits less total.
func chargedEach(t *testing.T, withAdmin func(*testing.T, func(admin.Admin)), orgID string, ids []string, total int64) {
	t.Helper()
	withAdmin(t, func(a admin.Admin) {
		st, charged := ledgerSettled(t, a, orgID)
		for _, id := range ids {
			if !charged[id] {
				t.Fatalf("job %s never charged", id)
			}
		}
		if st.Balance != 1000-total {
			t.Fatalf("balance %d, want %d", st.Balance, 1000-total)
		}
	})
}
