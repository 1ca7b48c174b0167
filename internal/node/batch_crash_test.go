package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"filigrane/internal/admin"
	"filigrane/internal/clock"
)

// TestBatchSurvivesKill runs a 12-item zip batch on a `filigrane serve` process with one worker, kills the
// process with SIGKILL while items run (after the third succeeded), restarts it on its data directory and
// checks that the batch finishes with every item succeeded, each item's job charged exactly once, and
// nothing left held.
func TestBatchSurvivesKill(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	var orgID, secret string
	offline(t, dir, clock.System{}, func(a admin.Admin) { orgID, secret = newOwnerKey(t, a, "Crash") })
	procs, base := startSolo(t, dir, quickRecovery...)

	const n = 12
	files := map[string][]byte{}
	var order, items []string
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("f%02d.jpg", i)
		files[name] = photo(t, 480, 360, uint64(100+i))
		order = append(order, name)
		items = append(items, fmt.Sprintf(`{"filename":%q,"data":{"i":%d}}`, name, i))
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("manifest", `{"archive":true,"items":[`+strings.Join(items, ",")+`]}`)
	fw, _ := mw.CreateFormFile("archive", "batch.zip")
	_, _ = fw.Write(zipOf(t, files, order))
	_ = mw.Close()
	req, _ := http.NewRequest("POST", base+"/watermarks/batches/zip", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("X-API-Key", secret)
	req.Header.Set("Idempotency-Key", "crash-batch-1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 202 {
		t.Fatalf("zip batch: %d %s", res.StatusCode, b)
	}
	var created batchRes
	_ = json.Unmarshal(b, &created)

	poll := func(until func(batchRes) bool, limit time.Duration) batchRes {
		t.Helper()
		deadline := time.Now().Add(limit)
		for {
			req, _ := http.NewRequest("GET", base+"/watermarks/batches/"+created.BatchID, nil)
			req.Header.Set("X-API-Key", secret)
			res, err := http.DefaultClient.Do(req)
			if err == nil {
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				var br batchRes
				if res.StatusCode == 200 && json.Unmarshal(b, &br) == nil && until(br) {
					return br
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("batch did not get there within %v\n%s", limit, procs.List[0].Tail(30))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	mid := poll(func(b batchRes) bool { return b.Counts["succeeded"] >= 3 }, 2*time.Minute)
	if mid.Counts["succeeded"] == n {
		t.Fatal("the batch finished before the kill; the test needs items in flight")
	}
	if err := procs.List[0].Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed with %d of %d items succeeded (%d in progress)", mid.Counts["succeeded"], n, mid.Counts["in_progress"])
	rctx, rcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer rcancel()
	if err := procs.List[0].Restart(rctx); err != nil {
		t.Fatal(err)
	}
	done := poll(func(b batchRes) bool { return b.Status == "completed" || b.Status == "failed" }, 3*time.Minute)
	if done.Status != "completed" || done.Counts["succeeded"] != n || done.Credits["charged"] != n || done.Credits["reserved"] != 0 {
		t.Fatalf("after the restart: %s counts %v credits %v", done.Status, done.Counts, done.Credits)
	}
	if done.ArchiveStatus == nil || *done.ArchiveStatus != "ready" {
		t.Fatalf("archive %v", done.ArchiveStatus)
	}
	// A fresh bound for the stop: rctx (the restart's) may be spent by the polling above on a slow machine.
	sctx, scancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer scancel()
	if err := procs.List[0].Stop(sctx); err != nil {
		t.Fatal(err)
	}
	offline(t, dir, clock.System{}, func(a admin.Admin) {
		st, charged := ledgerSettled(t, a, orgID)
		if len(charged) != n || len(st.Slots) != 0 {
			t.Fatalf("%d operations charged (want %d), %d slots", len(charged), n, len(st.Slots))
		}
		for _, it := range done.Items {
			if it.RequestID == nil || !charged[*it.RequestID] {
				t.Fatalf("item %d (%v) not charged exactly once", it.Index, it.RequestID)
			}
		}
	})
}
