package node_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"filigrane/persistence/s3test"
)

// refusingS3 is a proxy in front of the S3 server that, while refuse is set, drops the connection of every
// PUT whose path contains match without an answer, as a storage server that was killed does; it counts them.
func refusingS3(t *testing.T, target, match string) (endpoint string, refuse *atomic.Bool, refused *atomic.Int64) {
	refuse, refused = &atomic.Bool{}, &atomic.Int64{}
	endpoint = s3Proxy(t, target, func(w http.ResponseWriter, r *http.Request, pass http.Handler) {
		if refuse.Load() && r.Method == "PUT" && strings.Contains(r.URL.Path, match) {
			refused.Add(1)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		pass.ServeHTTP(w, r)
	})
	return endpoint, refuse, refused
}

// TestUploadPutStoreDownIsRetryable: a signed upload's PUT whose body arrived whole but that the storage did
// not take (the S3 server down) is answered 503 with Retry-After, not 400 "the body could not be received":
// the client did nothing wrong and sends the same file again, which is received once the storage answers.
// A chaos run (`bench chaos --mix batch=4,status=1`, S3 killed 6 s) saw the 400, and the client gave up on a
// batch item's upload as if its file were bad.
func TestUploadPutStoreDownIsRetryable(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("multi-process test")
	}
	srv := s3test.Start(t)
	direct := s3Config(t, srv)
	// Upload files are objects under uploads/ (their records are hex-encoded names under records/).
	endpoint, refuse, refused := refusingS3(t, srv.Endpoint, "/uploads/")
	secret, base := soloBehind(t, direct, endpoint, "Store down")

	img := photo(t, 400, 300, 17)
	r := sendJSON(t, "POST", base+"/uploads", secret, fmt.Sprintf(`{"kind":"image","filename":"x.png","size":%d}`, len(img)))
	if r.status != 201 {
		t.Fatalf("create upload: %d %s", r.status, r.body)
	}
	u := decodeUpload(t, r)

	refuse.Store(true)
	r = putFile(t, u.Upload.URL, img, putOpts{})
	if refused.Load() == 0 {
		t.Fatalf("the file's write never reached the storage (answer %d %s)", r.status, r.body)
	}
	wantProblem(t, "PUT while the storage drops writes", r, 503, "service_unavailable")
	if r.header.Get("Retry-After") == "" {
		t.Errorf("503 without Retry-After: %v", r.header)
	}

	refuse.Store(false)
	r = putFile(t, u.Upload.URL, img, putOpts{})
	if r.status != 200 || decodeUpload(t, r).Status != "received" {
		t.Fatalf("the same PUT once the storage answers: %d %s", r.status, r.body)
	}
	g := sendJSON(t, "GET", base+"/uploads/"+u.UploadID, secret, "")
	if got := decodeUpload(t, g); g.status != 200 || got.Status != "received" || got.Size != int64(len(img)) {
		t.Fatalf("upload after the retry: %d %s", g.status, g.body)
	}
}
