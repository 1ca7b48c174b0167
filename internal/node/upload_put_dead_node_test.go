package node_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"filigrane/actors"
	"filigrane/cluster/clustertest"
	"filigrane/internal/admin"
	"filigrane/internal/clock"
)

// TestUploadPutOfADeadNodeFreesTheUpload: a node is killed while its upload host receives an upload's file,
// so the PUT's lease on the upload is never released. Once the cluster has declared the node dead, the same
// file sent through another node's upload host is received: a dead member's PUT holds nothing. Before, the
// upload stayed refused with 409 upload_in_use for the lease's whole minute (`bench chaos` with batches, two
// of five nodes killed: a batch item's file waited 60 s).
//
// Not parallel, as the other tests that kill a node under quick failure detection.
func TestUploadPutOfADeadNodeFreesTheUpload(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	c := startCluster(t, 3, clustertest.QuickDetection())
	body := bytes.Repeat([]byte{5}, 300<<10)
	r := sendJSON(t, "POST", c.base(1)+"/uploads", c.secret, fmt.Sprintf(`{"kind":"image","filename":"x.png","size":%d}`, len(body)))
	if r.status != 201 {
		t.Fatalf("create upload: %d %s", r.status, r.body)
	}
	u := decodeUpload(t, r)
	conn := startPut(t, u.Upload.URL, len(body), body[:100<<10]) // node 1's upload host
	defer conn.Close()

	// The URL as node 2 signs it.
	fresh := func() string {
		g := sendJSON(t, "GET", c.base(2)+"/uploads/"+u.UploadID, c.secret, "")
		if g.status != 200 {
			t.Fatalf("GET upload on node 2: %d %s", g.status, g.body)
		}
		return decodeUpload(t, g).Upload.URL
	}
	// Node 1's PUT holds the upload once its lease is in the upload's record, read straight from the bucket
	// (a PUT through node 2 sent before that would take the upload itself). The deadline only bounds a broken
	// server.
	c.admin(t, func(a admin.Admin) {
		uploads := actors.Uploads{Store: a.Store, Clock: clock.System{}}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			up, _, err := uploads.Load(context.Background(), u.UploadID)
			if err != nil {
				t.Fatal(err)
			}
			if up.Put != nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("node 1's PUT never took the upload's lease")
			}
		}
	})
	// Another PUT is refused while it holds it.
	r = putFile(t, fresh(), body, putOpts{})
	if r.status != 409 || decodeProblem(t, r).Code != "upload_in_use" {
		t.Fatalf("PUT while node 1 receives the file: %d %s, want 409 upload_in_use", r.status, r.body)
	}

	if err := c.procs.List[1].Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	c.waitMembers(t, 2, 2) // node 2 has declared node 1 dead
	r = putFile(t, fresh(), body, putOpts{})
	if r.status != 200 || decodeUpload(t, r).Status != "received" {
		t.Fatalf("PUT through node 2 %s after node 1 was killed (declared dead): %d %s, want 200 received",
			time.Since(killed).Round(time.Second), r.status, r.body)
	}
	if since := time.Since(killed); since >= actors.UploadPutLease {
		t.Fatalf("received %s after the kill: the dead PUT's lease ran out instead", since)
	}
}
