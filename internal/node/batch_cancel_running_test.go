package node_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"filigrane/actors"
	"filigrane/internal/admin"
	"filigrane/internal/clock"
	"filigrane/internal/node"
	"filigrane/persistence/s3test"
)

// TestBatchCancelLetsTheRunningFileFinish (spec 3.2: a started batch is "cancelled (after running files
// finish)"; 3.3: a queued item is failed and refunded). A node with one worker keeps its files in object
// storage reached through a proxy that holds the worker's read of a job's input, so the first file of a
// three-file batch stays running while the other two wait queued for the worker. The cancel fails the two
// queued files (cancelled, refunded, their results 409 cancelled) and leaves the batch processing with
// cancel_requested and the running file's job running; once the read is let through, that file succeeds and is
// charged, and only then does the batch end cancelled.
func TestBatchCancelLetsTheRunningFileFinish(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t)
	direct := s3Config(t, srv)
	inputs := newGatedS3Reads(t, srv.Endpoint, "/blobs/inputs/")
	behind := *direct
	behind.Endpoint = inputs.url
	f := &batchFixture{dir: t.TempDir(), clk: clock.NewManual(time.Date(2026, 5, 4, 10, 0, 30, 0, time.UTC))}
	st, err := node.OpenStorage(context.Background(), t.TempDir(), direct, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	a := admin.Admin{Store: st.Store, Clock: f.clk, Catalog: actors.DefaultCatalog()}
	ctx := context.Background()
	org, err := a.CreateOrg(ctx, "Batcher", "scale", 50) // 5 slots: 4 for batch files
	if err != nil {
		t.Fatal(err)
	}
	m, err := a.AddMember(ctx, org.ID, "owner", actors.RoleOwner)
	if err != nil {
		t.Fatal(err)
	}
	if f.key, _, err = a.CreateKey(ctx, actors.NewKeySpec{OrgID: org.ID, MemberID: m, Scopes: actors.AllScopes()}); err != nil {
		t.Fatal(err)
	}
	f.org = org.ID
	st.Close()
	f.n = startNode(t, f.dir, f.clk, inMemory(t), func(c *node.Config) { c.S3, c.Workers = &behind, 1 })
	t.Cleanup(func() { stopNode(t, f.n) })
	f.base = "http://" + f.n.APIAddr()

	b := zipBatch(t, f, "cancel-running-1", 3)
	select {
	case <-inputs.held:
	case <-time.After(60 * time.Second):
		t.Fatal("no worker read a file's input within 60 s")
	}
	jobStatus := func(reqID string) string {
		t.Helper()
		r := call(t, "GET", f.base+"/watermarks/jobs/"+reqID, f.key, nil)
		var j struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal(r.body, &j); r.status != 200 || err != nil {
			t.Fatalf("GET job %s: %d %s", reqID, r.status, r.body)
		}
		return j.Status
	}
	// Every file became a job: one running (held at its input's read), two queued behind the only worker.
	running := -1
	for deadline := time.Now().Add(60 * time.Second); running < 0; {
		cur := decodeBatch(t, sendBatch(t, "GET", f.base+"/watermarks/batches/"+b.BatchID, f.key, "", ""))
		var states []string
		for _, it := range cur.Items {
			s := "pending"
			if it.RequestID != nil {
				s = jobStatus(*it.RequestID)
			}
			states = append(states, s)
		}
		if strings.Count(strings.Join(states, " "), "running") == 1 && strings.Count(strings.Join(states, " "), "queued") == 2 {
			for i, s := range states {
				if s == "running" {
					running = i
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the batch's jobs are %v after 60 s; want one running and two queued", states)
		}
		time.Sleep(50 * time.Millisecond) // polling the API for a condition with a deadline, as a client does
	}

	r := sendBatch(t, "POST", f.base+"/watermarks/batches/"+b.BatchID+"/cancel", f.key, "", "")
	if c := decodeBatch(t, r); r.status != 200 || !c.CancelRequested {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	// The queued files end failed and refunded; the running file's job runs on, and so does the batch.
	var mid batchRes
	for deadline := time.Now().Add(60 * time.Second); ; {
		mid = decodeBatch(t, sendBatch(t, "GET", f.base+"/watermarks/batches/"+b.BatchID, f.key, "", ""))
		if mid.Counts["failed"] == 2 || mid.Status != "processing" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the queued files did not end within 60 s of the cancel: %+v", mid)
		}
		time.Sleep(50 * time.Millisecond) // polling, as above
	}
	if mid.Status != "processing" || !mid.CancelRequested || mid.Counts["in_progress"] != 1 ||
		mid.Credits["reserved"] != 1 || mid.Credits["refunded"] != 2 || mid.Credits["charged"] != 0 {
		t.Fatalf("while the running file runs: %s cancel_requested %v counts %v credits %v; want processing with one file in progress",
			mid.Status, mid.CancelRequested, mid.Counts, mid.Credits)
	}
	if s := jobStatus(*mid.Items[running].RequestID); s != "running" {
		t.Fatalf("the running file's job is %s after the cancel, want running", s)
	}
	for i, it := range mid.Items {
		if i == running {
			continue
		}
		if it.Status != "failed" || it.ErrorCode == nil || *it.ErrorCode != "cancelled" || it.Credits == nil || *it.Credits != 0 {
			t.Fatalf("queued item %d after the cancel: %+v", i, it)
		}
		if r := call(t, "GET", f.base+it.ResultURL, f.key, nil); r.status != 409 || !strings.Contains(string(r.body), `"cancelled"`) {
			t.Fatalf("result of a cancelled file: %d %s", r.status, r.body)
		}
	}

	inputs.release()
	done := waitBatch(t, f, b.BatchID, "cancelled", "completed", "failed")
	it := done.Items[running]
	if done.Status != "cancelled" || it.Status != "succeeded" || it.Credits == nil || *it.Credits != 1 ||
		done.Counts["succeeded"] != 1 || done.Counts["failed"] != 2 || done.Credits["charged"] != 1 ||
		done.Credits["refunded"] != 2 || done.Credits["reserved"] != 0 {
		t.Fatalf("ended %s, running item %+v, counts %v, credits %v; want cancelled with the running file succeeded and charged",
			done.Status, it, done.Counts, done.Credits)
	}
	if r := call(t, "GET", f.base+it.ResultURL, f.key, nil); r.status != 200 {
		t.Fatalf("result of the file that ran: %d %s", r.status, r.body)
	}
}
