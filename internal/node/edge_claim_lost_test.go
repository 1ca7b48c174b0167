package node_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"filigrane/persistence/s3test"
)

// lateWritingS3 is a proxy in front of the S3 server that, once armed, holds the first PUT whose path contains
// match until its client gives up (the store's call timed out), and only then writes it to the server, as a
// frozen storage server does with a request it took before it stopped. landed is closed once that write is
// stored. Later PUTs whose path contains match wait for it, as a server that resumes stores what it took in
// the order it took it: the node's own write again after its timeout otherwise raced the held one's landing
// (under load the node's won, and the late write was refused).
func lateWritingS3(t *testing.T, target, match string) (endpoint string, armed *atomic.Bool, landed chan struct{}) {
	armed, landed = &atomic.Bool{}, make(chan struct{})
	var held atomic.Bool
	endpoint = s3Proxy(t, target, func(w http.ResponseWriter, r *http.Request, pass http.Handler) {
		if r.Method != "PUT" || !strings.Contains(r.URL.Path, match) {
			pass.ServeHTTP(w, r)
			return
		}
		if !armed.CompareAndSwap(true, false) {
			if held.Load() {
				select {
				case <-landed:
				case <-r.Context().Done():
					return
				}
			}
			pass.ServeHTTP(w, r)
			return
		}
		held.Store(true)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read the held PUT: %v", err)
			return
		}
		<-r.Context().Done() // the node's call ended without an answer
		late := r.Clone(t.Context())
		late.Body, late.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		rec := httptest.NewRecorder()
		pass.ServeHTTP(rec, late)
		if rec.Code != 200 {
			t.Errorf("the late write was refused: %d %s", rec.Code, rec.Body)
		}
		close(landed)
	})
	return endpoint, armed, landed
}

// TestSyncDetectEdgeClaimLostRuns: a synchronous detection with an Idempotency-Key is recorded as a job that
// the answering node claims for itself (ClaimAs) in the record's first write. That write is held by a frozen
// storage server until the node's call times out and lands afterwards, so the job exists, running under the
// node's own lease, while the node was told the submission failed. The request must still be answered with
// the detection after one attempt: the node submits again, gets its lease back and runs it. Before, it
// answered 503 and a retry with the same key waited on a job that nobody ran until its lease (30 s) expired.
func TestSyncDetectEdgeClaimLostRuns(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("multi-process test")
	}
	srv := s3test.Start(t)
	direct := s3Config(t, srv)
	// Job records are objects named by the hex of their key, job/<request id>.
	endpoint, armed, landed := lateWritingS3(t, srv.Endpoint, hex.EncodeToString([]byte("job/req_")))
	secret, base := soloBehind(t, direct, endpoint, "Edge claim")

	img := photo(t, 400, 300, 31)
	armed.Store(true)
	r := post(t, base+"/watermarks/images/detect", secret, "edge-claim-lost-1", img, "")
	select {
	case <-landed:
	default:
		t.Fatalf("the job record's write was never held (answer %d %s)", r.status, r.body)
	}
	if r.status != 200 {
		t.Fatalf("sync detect whose claimed record landed late: %d %s, want 200 with the detection", r.status, r.body)
	}
	reqID := r.header.Get("X-Request-ID")
	if !strings.HasPrefix(reqID, "req_") {
		t.Fatalf("detection without a request id: %v", r.header)
	}
	g := call(t, "GET", base+"/watermarks/jobs/"+reqID, secret, nil)
	var rc struct {
		Status   string `json:"status"`
		Attempts int    `json:"attempts"`
	}
	if err := json.Unmarshal(g.body, &rc); err != nil || rc.Status != "succeeded" || rc.Attempts != 1 {
		t.Fatalf("the job after the answer: %d %s, want succeeded after 1 attempt", g.status, g.body)
	}
}
