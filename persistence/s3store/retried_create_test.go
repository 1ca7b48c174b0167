package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"filigrane/persistence"
	"filigrane/persistence/s3test"
)

// roundTripFunc is an http.RoundTripper from a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestCreateRetriedByTheClientOverItsOwnTornPut: a create whose first PUT the storage server tore (versitygw
// --sidecar stored the new ETag, then was killed before it published the body, so the PUT got no answer) is
// sent again by the S3 client library itself (minio-go repeats a PUT with a seekable body after a transport
// error or a 5xx), and that repeat gets 412 from the ETag without a body: the write's own. The store must
// still count that ETag as one of its unanswered PUTs and repair the key with it, as it does when the lost
// answer reaches it. Before, the create failed with ErrTornObject, and so did every later create of the key
// on every node: in `bench chaos --s3-sidecar` (chaos15) a batch created across a kill -9 of the S3 server
// answered 503 to its Idempotency-Key for good.
//
// The server is the real versitygw; only the first PUT's connection is cut, right after the tear that a kill
// at that moment leaves (s3test.TearETag), since a kill cannot be timed inside one PUT.
func TestCreateRetriedByTheClientOverItsOwnTornPut(t *testing.T) {
	srv := s3test.StartSidecar(t)
	bucket := srv.NewBucket(t)
	key, value := []byte("batch/bat_1"), []byte("draft batch")
	probe := &Store{prefix: "records/"}
	name := probe.objectName(key)
	var cut, puts atomic.Int32
	transport := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/"+name) {
			puts.Add(1)
			if cut.Add(1) == 1 {
				// The server read the body and stored its ETag; then it died.
				wire, err := io.ReadAll(r.Body)
				if err != nil {
					return nil, err
				}
				sent, err := decodeChunked(wire, r.Header.Get("Content-Encoding"))
				if err != nil {
					t.Errorf("first PUT's body: %v", err)
					return nil, err
				}
				srv.TearETag(t, bucket, name, md5Hex(sent))
				return nil, errors.New("connection reset by peer (the server was killed inside the PUT)")
			}
		}
		return http.DefaultTransport.RoundTrip(r)
	})
	client, err := minio.New(srv.Endpoint, &minio.Options{
		Creds: credentials.NewStaticV4(srv.AccessKey, srv.SecretKey, ""), Region: srv.Region, Transport: transport})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(client, bucket, "records/")
	if err != nil {
		t.Fatal(err)
	}
	var repairs atomic.Int32
	s.OnTorn(func(tr Torn) {
		if tr.Repaired {
			repairs.Add(1)
		}
	})
	ctx := context.Background()
	v, err := s.CompareAndSet(ctx, key, persistence.NoVersion, value)
	if err != nil {
		t.Fatalf("create whose first PUT was torn and repeated by the client: %v", err)
	}
	if n := puts.Load(); n < 2 {
		t.Fatalf("%d PUTs of the key: the client did not repeat the cut one, so this tests nothing", n)
	}
	it, err := s.Get(ctx, key)
	if err != nil || string(it.Value) != string(value) || it.Version != v {
		t.Fatalf("Get after the create = %q %q, %v; want %q %q", it.Value, it.Version, err, value, v)
	}
	if n := repairs.Load(); n != 1 {
		t.Errorf("%d repairs reported, want 1", n)
	}
	// A plain create of a key that exists is still refused, and leaves nothing remembered for it.
	if _, err := s.CompareAndSet(ctx, key, persistence.NoVersion, []byte("other")); !errors.Is(err, persistence.ErrVersionMismatch) {
		t.Fatalf("second create = %v, want ErrVersionMismatch", err)
	}
	if l := s.unanswered(name); len(l) != 0 {
		t.Errorf("after a refused create of an existing key the store remembers %q", l)
	}
}

// decodeChunked returns the payload of a request body sent with Content-Encoding aws-chunked (SigV4 streaming:
// "<hex size>;chunk-signature=...\r\n<data>\r\n" per chunk, a chunk of size 0 last), or the body itself.
func decodeChunked(wire []byte, encoding string) ([]byte, error) {
	if !strings.Contains(encoding, "aws-chunked") {
		return wire, nil
	}
	var out []byte
	for {
		line, rest, ok := bytes.Cut(wire, []byte("\r\n"))
		if !ok {
			return nil, errors.New("aws-chunked: no chunk header")
		}
		sizeHex, _, _ := bytes.Cut(line, []byte(";"))
		n, err := strconv.ParseInt(string(sizeHex), 16, 64)
		if err != nil || n < 0 || int64(len(rest)) < n {
			return nil, fmt.Errorf("aws-chunked: chunk header %q", line)
		}
		if n == 0 {
			return out, nil
		}
		out = append(out, rest[:n]...)
		wire = bytes.TrimPrefix(rest[n:], []byte("\r\n"))
	}
}
