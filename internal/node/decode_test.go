package node_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"filigrane/actors"
	"filigrane/codec/imageio/imageiotest"
	"filigrane/internal/node"
)

// TestDecodeBudgets runs synchronous detections on a node with a 600 MiB decode budget: each costly file gets
// a clear answer within seconds, and only the detections that answered 200 are charged.
func TestDecodeBudgets(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *node.Config) { c.DecodeMemory = 600 << 20 })
	url := f.base + "/watermarks/images/detect"
	bal0, _ := balance(t, f, f.orgA)
	charged := int64(0)

	// 5,000 scans (a 90 kB file): refused from the marker walk, before any scan is decoded.
	r := post(t, url, f.keyA, "", imageiotest.ScanBomb(2048, 5000), "")
	if p := decodeProblem(t, r); r.status != 422 || p.Code != "image_too_complex" {
		t.Fatalf("many scans: %d %+v", r.status, p)
	}

	// 156250×256 (40 MP in a small PNG): the detector analyses its top-left 1024×256, so the estimate (and
	// the real cost) fits the 600 MiB budget; uncropped, detection took 2.3 GB.
	r = post(t, url, f.keyA, "", imageiotest.StripedGrayPNG(156250, 256), "")
	if r.status != 200 {
		t.Fatalf("extreme aspect: %d %s", r.status, r.body)
	}
	charged++

	// Detection is not limited to 40 MP.
	r = post(t, url, f.keyA, "", imageiotest.StripedGrayPNG(8200, 5000), "")
	if r.status != 200 {
		t.Fatalf("41 MP: %d %s", r.status, r.body)
	}
	charged++

	// 190 MP of 16-bit RGBA needs more than the whole budget: 413 at once, nothing decoded.
	r = post(t, url, f.keyA, "", imageiotest.PNGHeaderOnly(19000, 10000, 16, 6), "")
	if p := decodeProblem(t, r); r.status != 413 || p.Code != "image_too_large" {
		t.Fatalf("over the budget: %d %+v", r.status, p)
	}

	// The budget in use by other decodes: 503 decode_busy with Retry-After after a short wait.
	release, err := f.n.DecodeBudget().Acquire(context.Background(), f.n.DecodeBudget().Capacity())
	if err != nil {
		t.Fatal(err)
	}
	r = post(t, url, f.keyA, "", imageiotest.StripedGrayPNG(512, 512), "")
	release()
	if p := decodeProblem(t, r); r.status != 503 || p.Code != "decode_busy" || r.header.Get("Retry-After") != "5" {
		t.Fatalf("budget busy: %d %+v Retry-After %q", r.status, p, r.header.Get("Retry-After"))
	}
	// Every reservation was given back.
	release, err = f.n.DecodeBudget().Acquire(context.Background(), f.n.DecodeBudget().Capacity())
	if err != nil {
		t.Fatal("budget not fully released:", err)
	}
	release()

	if bal, held := balance(t, f, f.orgA); bal != bal0-charged || held != 0 {
		t.Fatalf("balance %d held %d, want %d and 0", bal, held, bal0-charged)
	}
}

// TestSyncDetectClientGoneNotCharged closes the connection while a synchronous detection waits for a CPU
// token: the work is cancelled, the hold released, nothing charged.
func TestSyncDetectClientGoneNotCharged(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *node.Config) { c.Workers = 1 })
	bal0, _ := balance(t, f, f.orgA)
	// Hold the node's one CPU token so that the detection waits after its credit is held.
	rel, err := f.n.Pool().Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	releases := []func(){rel}
	defer func() {
		for _, rel := range releases {
			rel()
		}
	}()

	ct, body := form(t, photo(t, 320, 320, 3), "p.jpg", "")
	req, _ := http.NewRequest("POST", f.base+"/watermarks/images/detect", bytes.NewReader(body))
	req.Header.Set("Content-Type", ct)
	req.Header.Set("X-API-Key", f.keyA)
	conn := dial(t, f.n.APIAddr())
	w := bufio.NewWriter(conn)
	if err := req.Write(w); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	waitHeld(t, f, f.orgA, 1)
	conn.Close()
	waitHeld(t, f, f.orgA, 0)
	if bal, _ := balance(t, f, f.orgA); bal != bal0 {
		t.Fatalf("balance %d, want %d: a detection the client left was charged", bal, bal0)
	}
	// The tokens are free again for the next request, which is answered and charged.
	for _, rel := range releases {
		rel()
	}
	releases = nil
	r := post(t, f.base+"/watermarks/images/detect", f.keyA, "", photo(t, 320, 320, 3), "")
	if r.status != 200 {
		t.Fatalf("next detection: %d %s", r.status, r.body)
	}
	if bal, held := balance(t, f, f.orgA); bal != bal0-1 || held != 0 {
		t.Fatalf("balance %d held %d after one answered detection", bal, held)
	}
}

// waitHeld polls the organization until it holds want credits, within a bounded time.
func waitHeld(t *testing.T, f *fixture, org string, want int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, held := balance(t, f, org); held == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("organization never held %d credits", want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAsyncDetectWaitsForDecodeMemory: a job does not fail while the node's decode memory is in use: its
// worker waits for it (renewing its lease) and the job succeeds on its first attempt once memory is free.
func TestAsyncDetectWaitsForDecodeMemory(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := f.n.DecodeBudget()
	hold, err := b.Acquire(context.Background(), b.Capacity())
	if err != nil {
		t.Fatal(err)
	}
	r := post(t, f.base+"/watermarks/images/detect/async", f.keyA, "", photo(t, 320, 320, 4), "")
	if r.status != 202 {
		t.Fatalf("async detect: %d %s", r.status, r.body)
	}
	rc := decodeReceipt(t, r)
	// Poll the job actor rather than the API, whose rate limit (on the test's manual clock) polling would hit.
	waitJob(t, f, rc.RequestID, "running")
	hold()
	waitJob(t, f, rc.RequestID, "succeeded")
	if res := call(t, "GET", f.base+rc.ResultURL, f.keyA, nil); res.status != 200 {
		t.Fatalf("result: %d %s", res.status, res.body)
	}
	if final := decodeReceipt(t, call(t, "GET", f.base+rc.StatusURL, f.keyA, nil)); final.Status != "succeeded" || final.Attempts != 1 {
		t.Fatalf("job %+v, want succeeded on its first attempt", final)
	}
}

// waitJob polls the job actor until the job has the status want, within a bounded time.
func waitJob(t *testing.T, f *fixture, requestID, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rep, err := actors.JobClient{Caller: f.n.Cluster()}.Get(context.Background(), f.orgA, requestID)
		if err == nil && rep.Record != nil && string(rep.Record.Status) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s never reached %s (%v %+v)", requestID, want, err, rep)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDetectUploadAbove40MP: an image of more than 40 megapixels sent through a detect upload is detected
// synchronously (the 40 MP limit is embedding's), and a 201 MP one is refused from its header.
func TestDetectUploadAbove40MP(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	u := uploaded(t, f, f.keyA, "detect", "wide.png", imageiotest.StripedGrayPNG(9000, 5000))
	r := postUpload(t, f.base+"/watermarks/images/detect", f.keyA, "", u.UploadID, "")
	var d detection
	if r.status != 200 {
		t.Fatalf("45 MP through an upload: %d %s", r.status, r.body)
	}
	if err := json.Unmarshal(r.body, &d); err != nil || d.Watermarked {
		t.Fatalf("detection %s: %v", r.body, err)
	}
	u = uploaded(t, f, f.keyA, "detect", "huge.png", pngHeader(20100, 10000))
	r = postUpload(t, f.base+"/watermarks/images/detect", f.keyA, "", u.UploadID, "")
	wantProblem(t, "201 MP through an upload", r, 413, "image_too_large")
}
