package node_test

import (
	"context"
	"encoding/hex"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"filigrane/internal/admin"
	"filigrane/persistence/s3test"
)

// s3Proxy puts an HTTP server in front of the S3 server at target and returns its URL, the endpoint to give a
// node: handle sees every request with pass, a reverse proxy to the server that keeps the client's Host header
// (which SigV4 signed), and decides what becomes of it.
func s3Proxy(t *testing.T, target string, handle func(w http.ResponseWriter, r *http.Request, pass http.Handler)) string {
	u, err := url.Parse("http://" + target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handle(w, r, proxy) }))
	t.Cleanup(srv.Close)
	return srv.URL
}

// answerDroppingS3 forwards every request to the S3 server but, for the first PUT whose path contains
// match, never answers: the write lands and the node sees a timeout, as when a storage server or the
// network between fails after the commit.
func answerDroppingS3(t *testing.T, target, match string) (endpoint string, dropped *atomic.Bool) {
	dropped = &atomic.Bool{}
	endpoint = s3Proxy(t, target, func(w http.ResponseWriter, r *http.Request, pass http.Handler) {
		if r.Method == "PUT" && strings.Contains(r.URL.Path, match) && dropped.CompareAndSwap(false, true) {
			rec := httptest.NewRecorder()
			pass.ServeHTTP(rec, r.WithContext(context.WithoutCancel(r.Context())))
			<-r.Context().Done() // the write is done; its answer is lost
			return
		}
		pass.ServeHTTP(w, r)
	})
	return endpoint, dropped
}

// TestLostSubmitAnswerKeepsTheInput: the job record of a synchronous embed is written but the storage's
// answer is lost, so the request cannot tell whether the job exists and answers 503 (retry with the same
// Idempotency-Key). The job does exist and runs: its input file must not be removed with the failed
// request, or every attempt fails on a missing input. The client's retry with the same key gets the
// marked image, charged once.
func TestLostSubmitAnswerKeepsTheInput(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("multi-process test")
	}
	srv := s3test.Start(t)
	direct := s3Config(t, srv)
	// Records are objects named by their hex-encoded keys under records/ (persistence/s3store).
	endpoint, dropped := answerDroppingS3(t, srv.Endpoint, "/records/"+hex.EncodeToString([]byte("job/req_")))
	var orgID, secret string
	(&clusterFixture{s3: direct}).admin(t, func(a admin.Admin) { orgID, secret = newOwnerKey(t, a, "Lost") })
	_, base := startSolo(t, t.TempDir(), append(s3Flags(endpoint, direct), quickRecovery...)...)

	img := photo(t, 400, 300, 91)
	r := post(t, base+"/watermarks/images", secret, "lost-answer-1", img, `{"lost":1}`)
	if !dropped.Load() {
		t.Fatalf("the job record's write was not seen by the proxy (answer %d %s)", r.status, r.body)
	}
	if r.status != 503 {
		t.Fatalf("embed whose job record's answer was lost: %d %s, want 503", r.status, r.body)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		r = post(t, base+"/watermarks/images", secret, "lost-answer-1", img, `{"lost":1}`)
		if r.status == 200 || r.status != 202 && r.status != 503 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond) // the client's retry interval; the deadline bounds it
	}
	if r.status != 200 || len(r.header.Get("X-Watermark-ID")) != 64 {
		t.Fatalf("retry with the same Idempotency-Key: %d %.300s", r.status, r.body)
	}
	(&clusterFixture{s3: direct}).admin(t, func(a admin.Admin) {
		_, charged := ledgerSettled(t, a, orgID)
		if len(charged) != 1 {
			t.Fatalf("charged operations %v, want the one embed", charged)
		}
	})
}
