package node_test

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"filigrane/internal/admin"
	"filigrane/persistence/s3test"
)

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
	direct := s3Config(t, srv)
	c := &clusterFixture{s3: direct}
	c.admin(t, func(a admin.Admin) { c.orgID, c.secret = newOwnerKey(t, a, "Assembler") })
	procs, base := startSolo(t, t.TempDir(), append(s3Flags(gate.url, direct), quickRecovery...)...)
	f := &batchFixture{base: base, key: c.secret}

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
		if _, charged := ledgerSettled(t, a, c.orgID); len(charged) != n {
			t.Fatalf("%d operations charged, want %d", len(charged), n)
		}
	})
}
