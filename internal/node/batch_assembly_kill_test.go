package node_test

import (
	"archive/zip"
	"bytes"
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
	"filigrane/persistence/s3test"
)

// gatedS3 is an HTTP proxy in front of the S3 server that holds every request whose path contains gate (and
// whose method is method, when set) until opened (or until the client goes away), and reports the first one
// it holds.
type gatedS3 struct {
	url      string
	gate     string
	method   string
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
	u, err := url.Parse("http://" + target)
	if err != nil {
		t.Fatal(err)
	}
	g := &gatedS3{gate: gate, method: method, open: make(chan struct{}), held: make(chan struct{})}
	proxy := httputil.NewSingleHostReverseProxy(u) // keeps the client's Host header, which SigV4 signed
	proxy.ErrorLog = log.New(io.Discard, "", 0)    // a held request whose node was killed ends in an error
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, g.gate) && (g.method == "" || r.Method == g.method) {
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

// TestBatchSurvivesKillDuringAssembly: a single `filigrane serve` process on object storage runs a 4-item
// archive batch; the upload of the archive is held at the storage proxy, so the node is killed with SIGKILL
// while the batch is assembling (checked through the API). Restarted, it builds the archive again: the batch
// completes with the archive ready, the zip holds every result and the manifest, and each item was charged
// exactly once.
func TestBatchSurvivesKillDuringAssembly(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("multi-process test")
	}
	srv := s3test.Start(t)
	gate := newGatedS3(t, srv.Endpoint, "/blobs/archives/")
	direct := &node.S3Config{Endpoint: "http://" + srv.Endpoint, Bucket: srv.NewBucket(t), AccessKey: srv.AccessKey,
		SecretKey: srv.SecretKey, Region: srv.Region}
	c := &clusterFixture{s3: direct}
	c.admin(t, func(a admin.Admin) {
		ctx := context.Background()
		st, err := a.CreateOrg(ctx, "Assembler", "scale", 100)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := a.AddMember(ctx, st.ID, "ops", actors.RoleOwner)
		if c.secret, _, err = a.CreateKey(ctx, actors.NewKeySpec{OrgID: st.ID, MemberID: m, Scopes: actors.AllScopes()}); err != nil {
			t.Fatal(err)
		}
		c.orgID = st.ID
	})
	bin := buildBinary(t)
	dir := t.TempDir()
	start, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	procs, err := clustertest.StartProcesses(start, clustertest.ProcessConfig{
		Binary: bin, N: 1, Ports: 4,
		Args: func(i int, ports [][]int) []string {
			p := ports[i]
			return append([]string{"serve", "--data", dir, "--node-name", "solo",
				"--listen", fmt.Sprintf("127.0.0.1:%d", p[0]), "--upload-listen", fmt.Sprintf("127.0.0.1:%d", p[1]),
				"--cluster-bind", fmt.Sprintf("127.0.0.1:%d", p[2]), "--remote-port", strconv.Itoa(p[3]),
				"--s3-endpoint", gate.url, "--s3-bucket", direct.Bucket, "--s3-access-key", direct.AccessKey,
				"--s3-secret-key", direct.SecretKey, "--workers", "1", "--log-format", "json", "--log-level", "warn"}, quickRecovery...)
		},
		Ready: clustertest.ReadyHTTP(0, "/healthz"),
	})
	if err != nil {
		t.Fatal(err)
	}
	c.procs = procs
	t.Cleanup(procs.KillAll)
	f := &batchFixture{base: c.base(0), key: c.secret}

	const n = 4
	files := map[string][]byte{}
	var order, items []string
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("a%d.jpg", i)
		files[name] = photo(t, 320, 280, uint64(200+i))
		order = append(order, name)
		items = append(items, fmt.Sprintf(`{"filename":%q,"data":{"i":%d}}`, name, i))
	}
	r := postZip(t, f, "assembly-kill-1", zipOf(t, files, order), `{"archive":true,"items":[`+strings.Join(items, ",")+`]}`)
	if r.status != 202 {
		t.Fatalf("zip batch: %d %s", r.status, r.body)
	}
	id := decodeBatch(t, r).BatchID
	select {
	case <-gate.held:
	case <-time.After(3 * time.Minute):
		t.Fatalf("the archive upload never started\n%s", procs.List[0].Tail(30))
	}
	if b := decodeBatch(t, sendBatch(t, "GET", f.base+"/watermarks/batches/"+id, f.key, "", "")); b.Status != "assembling" || b.Counts["succeeded"] != n {
		t.Fatalf("while the archive upload is held the batch is %s %v, want assembling with %d succeeded", b.Status, b.Counts, n)
	}
	if err := procs.List[0].Kill(); err != nil {
		t.Fatal(err)
	}
	gate.release()
	rctx, rcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer rcancel()
	if err := procs.List[0].Restart(rctx); err != nil {
		t.Fatal(err)
	}
	var done batchRes
	deadline := time.Now().Add(2 * time.Minute) // the next sweep ticks the batch (1 s; 4 s if the dead node's lease must lapse: quickRecovery)
	for {
		res := sendBatch(t, "GET", f.base+"/watermarks/batches/"+id, f.key, "", "")
		if res.status == 200 {
			if done = decodeBatch(t, res); done.Status != "assembling" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch after the restart: %d %s\n%s", res.status, res.body, procs.List[0].Tail(30))
		}
		time.Sleep(100 * time.Millisecond) // polling a condition; the deadline bounds it
	}
	if done.Status != "completed" || done.ArchiveStatus == nil || *done.ArchiveStatus != "ready" || done.Credits["charged"] != n {
		t.Fatalf("after the restart: %s archive %v credits %v", done.Status, done.ArchiveStatus, done.Credits)
	}
	arch := sendBatch(t, "GET", f.base+done.ArchiveURL, f.key, "", "")
	if arch.status != 200 {
		t.Fatalf("archive: %d %s", arch.status, arch.body)
	}
	zr, err := zip.NewReader(bytes.NewReader(arch.body), int64(len(arch.body)))
	if err != nil {
		t.Fatalf("archive is not a zip: %v", err)
	}
	names := map[string]bool{}
	for _, zf := range zr.File {
		names[zf.Name] = true
	}
	if len(zr.File) != n+1 || !names["manifest.json"] {
		t.Fatalf("archive entries %v, want %d results and manifest.json", names, n)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer scancel()
	if err := procs.List[0].Stop(sctx); err != nil {
		t.Fatal(err)
	}
	c.admin(t, func(a admin.Admin) {
		st, entries, err := a.Balance(context.Background(), c.orgID, 1000)
		if err != nil {
			t.Fatal(err)
		}
		charges := map[string]int{}
		for _, e := range entries {
			if e.Kind == "charge" {
				charges[e.Operation]++
			}
		}
		if len(charges) != n || st.Held() != 0 {
			t.Fatalf("%d operations charged (want %d), %d held", len(charges), n, st.Held())
		}
		for op, k := range charges {
			if k != 1 {
				t.Fatalf("%s charged %d times", op, k)
			}
		}
	})
}
