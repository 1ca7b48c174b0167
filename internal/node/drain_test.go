package node_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"filigrane/actors"
	"filigrane/cluster"
	"filigrane/internal/node"
)

// TestGracefulStopForABalancer: an api node (it accepts work and runs none, so its job stays queued) with a
// synchronous wait of ten minutes and a drain delay of ten minutes. A synchronous embed waits for its queued
// job; Close begins. At once: the waiting embed answers 202 with the receipt (before, it held its answer for
// the whole synchronous wait and the stop with it), /readyz on both listeners answers 503 service_unavailable
// with the reason in its checks, a new embed and a signed-upload PUT are refused with 503 and Retry-After and
// their connections closed, and a status read is still answered. The job stays queued through the stop and
// succeeds on a worker node started on the same data directory.
func TestGracefulStopForABalancer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, inMemory(t), func(c *node.Config) {
		c.Roles = []cluster.Role{cluster.RoleAPI}
		c.SyncWait = 10 * time.Minute
		c.DrainDelay = 10 * time.Minute
	})
	upload := createUpload(t, f, f.keyA, "image", "a.png", 1000)
	waiting := make(chan response, 1)
	go func() {
		waiting <- post(t, f.base+"/watermarks/images", f.keyA, "", photo(t, 320, 256, 3), `{"drain":1}`)
	}()
	// The embed is past the gate once its job's actor is active: from there it waits for the job.
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(string(call(t, "GET", f.base+"/metrics", "", nil).body), `filigrane_actors_active{kind="job"} 1`) {
		if time.Now().After(deadline) {
			t.Fatal("the synchronous embed's job never became active")
		}
		time.Sleep(5 * time.Millisecond) // polling the metrics endpoint
	}

	closeCtx, cancelClose := context.WithCancel(context.Background())
	n := f.n
	f.n = nil // closed here, not by the fixture's cleanup
	var closeErr error
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		closeErr = n.Close(closeCtx)
	}()
	t.Cleanup(func() {
		cancelClose()
		<-closed
	})

	var rc receipt
	select {
	case r := <-waiting:
		if r.status != 202 || r.header.Get("Location") == "" {
			t.Fatalf("the waiting synchronous embed on a draining node: %d %s; want 202 with the receipt", r.status, r.body)
		}
		if rc = decodeReceipt(t, r); rc.Status != "queued" {
			t.Fatalf("receipt %s; want the job queued", rc.raw)
		}
	case <-time.After(time.Minute): // only turns a ten-minute hold into a failure
		t.Fatal("the waiting synchronous embed was not answered within a minute of the drain")
	}
	for _, addr := range []string{n.APIAddr(), n.UploadAddr()} {
		r := getReady(t, "http://"+addr+"/readyz")
		if r.status != 503 || r.code != "service_unavailable" || !strings.HasPrefix(r.checks["shutdown"], "draining") {
			t.Fatalf("/readyz of %s while draining: %+v; want 503 with the shutdown check", addr, r)
		}
	}
	refused := func(what string, r response) {
		t.Helper()
		if p := decodeProblem(t, r); r.status != 503 || p.Code != "service_unavailable" || r.header.Get("Retry-After") == "" ||
			!strings.Contains(p.Detail, "shutting down") {
			t.Fatalf("%s on a draining node: %d %s (Retry-After %q); want 503 service_unavailable with Retry-After",
				what, r.status, r.body, r.header.Get("Retry-After"))
		}
	}
	r := post(t, f.base+"/watermarks/images", f.keyA, "", photo(t, 64, 64, 4), `{"drain":2}`)
	refused("a new embed", r)
	put := putFile(t, upload.Upload.URL, make([]byte, 1000), putOpts{})
	refused("a signed-upload PUT", put)
	// A read is answered, and its connection closed (Go's client hides the Connection header: read it raw).
	conn := dial(t, n.APIAddr())
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nX-API-Key: %s\r\n\r\n", rc.StatusURL, f.keyA)
	head, err := bufioReader(conn).ReadString('{')
	if err != nil || !strings.HasPrefix(head, "HTTP/1.1 200 ") || !strings.Contains(head, "\r\nConnection: close\r\n") {
		t.Fatalf("a status read on a draining node: %q %v; want 200, its connection closed", head, err)
	}

	cancelClose() // the end of the delay, as a second signal would
	<-closed
	if closeErr != nil && !errors.Is(closeErr, context.Canceled) {
		t.Fatalf("close: %v", closeErr)
	}

	f.n = startNode(t, f.dataDir, f.clk, inMemory(t))
	t.Cleanup(func() { stopNode(t, f.n) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // only turns a hang into a failure
	defer cancel()
	if _, _, err := f.n.Sweep(ctx); err != nil { // offers the queued jobs of a node that starts
		t.Fatal(err)
	}
	if rep, err := (actors.JobClient{Caller: f.n.Cluster()}).Await(ctx, f.orgA, rc.RequestID); err != nil || rep.Record == nil {
		t.Fatalf("awaiting the job after the restart: %v %+v", err, rep)
	}
	if st := decodeReceipt(t, call(t, "GET", "http://"+f.n.APIAddr()+rc.StatusURL, f.keyA, nil)); st.Status != "succeeded" {
		t.Fatalf("the job accepted before the stop, after the restart: %s; want succeeded", st.raw)
	}
}
