package storagedest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/minio/minio-go/v7"
	"github.com/rs/zerolog"

	"filigrane/internal/egress"
	"filigrane/internal/hiddenchar"
	"filigrane/persistence/pebblestore"
	"filigrane/persistence/s3test"
)

var t0 = time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)

func newLib(t *testing.T, allowPrivate bool) *Library {
	t.Helper()
	st, err := pebblestore.Open(t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	s, err := NewSealer(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return &Library{Store: st, Sealer: s, Guard: &egress.Guard{AllowPrivate: allowPrivate}}
}

func yes() *bool { b := true; return &b }
func no() *bool  { b := false; return &b }

func input(srv *s3test.Server, bucket string) Input {
	return Input{Name: "mine", Endpoint: srv.Endpoint, Region: srv.Region, Bucket: bucket, Prefix: "out",
		AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, PathStyle: yes(), Secure: no()}
}

func TestSealerBindsSecretToDestination(t *testing.T) {
	s, _ := NewSealer(bytes.Repeat([]byte{1}, 32))
	sealed, err := s.Seal("dst_a", "top-secret")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("top-secret")) {
		t.Fatal("sealed secret contains the clear text")
	}
	if got, err := s.Open("dst_a", sealed); err != nil || got != "top-secret" {
		t.Fatalf("open = %q, %v", got, err)
	}
	if _, err := s.Open("dst_b", sealed); err == nil {
		t.Fatal("a sealed secret opened under another destination id")
	}
	other, _ := NewSealer(bytes.Repeat([]byte{2}, 32))
	if _, err := other.Open("dst_a", sealed); err == nil {
		t.Fatal("a sealed secret opened under another key")
	}
}

func TestCreateLimitUpdateDelete(t *testing.T) {
	l := newLib(t, true)
	ctx := context.Background()
	in := Input{Endpoint: "s3.example.com", Bucket: "bucket", AccessKey: "AK", SecretKey: "SK"}
	var first *Destination
	for i := range MaxPerOrg {
		d, err := l.Create(ctx, "org_1", in, t0)
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
		if first == nil {
			first = d
		}
	}
	if !first.Secure {
		t.Fatal("a destination created without secure connects over plain HTTP; want HTTPS")
	}
	if _, err := l.Create(ctx, "org_1", in, t0); !errors.Is(err, ErrLimit) {
		t.Fatalf("11th create: %v, want ErrLimit", err)
	}
	if _, err := l.Create(ctx, "org_2", in, t0); err != nil {
		t.Fatalf("another org is not limited by org_1: %v", err)
	}
	if _, err := l.Create(ctx, "org_1", Input{Endpoint: "http://x/y", Bucket: "bucket", AccessKey: "a", SecretKey: "b"}, t0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("endpoint with scheme: %v, want ErrInvalid", err)
	}
	// A verified destination loses its verification when its credentials change.
	now := t0
	_, err := l.record(ctx, "org_1", first.ID, func(d *Destination) { d.VerifiedAt = &now })
	if err != nil {
		t.Fatal(err)
	}
	d, err := l.Update(ctx, "org_1", first.ID, Input{Name: "renamed"}, t0)
	if err != nil || d.VerifiedAt == nil || d.Name != "renamed" {
		t.Fatalf("rename: %+v, %v; want still verified", d, err)
	}
	d, err = l.Update(ctx, "org_1", first.ID, Input{SecretKey: "new"}, t0)
	if err != nil || d.VerifiedAt != nil {
		t.Fatalf("new secret: %+v, %v; want unverified", d, err)
	}
	// A refused update changes nothing; another organization's id is not found.
	if _, err := l.Update(ctx, "org_1", first.ID, Input{Name: "other", Endpoint: "http://x/y"}, t0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("update with a bad endpoint: %v, want ErrInvalid", err)
	}
	if got, err := l.Get(ctx, "org_1", first.ID); err != nil || got.Name != "renamed" || got.Endpoint != in.Endpoint {
		t.Fatalf("after a refused update: %+v, %v", got, err)
	}
	if _, err := l.Update(ctx, "org_2", first.ID, Input{Name: "x"}, t0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("update through another organization: %v, want ErrNotFound", err)
	}
	if err := l.Delete(ctx, "org_1", first.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Get(ctx, "org_1", first.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if err := l.Delete(ctx, "org_1", first.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

func TestVerifyAndPutAgainstRealS3(t *testing.T) {
	srv := s3test.Start(t)
	l := newLib(t, true)
	ctx := context.Background()
	bucket := srv.NewBucket(t)

	d, err := l.Create(ctx, "org_1", input(srv, bucket), t0)
	if err != nil {
		t.Fatal(err)
	}
	if d.Usable() {
		t.Fatal("a new destination is usable before verification")
	}
	d, se, err := l.Verify(ctx, "org_1", d.ID, t0)
	if err != nil || se != nil || !d.Usable() {
		t.Fatalf("verify: %+v step=%v err=%v", d, se, err)
	}
	// The probe is deleted again: the bucket is empty.
	for obj := range srv.Client().ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
		t.Fatalf("probe left behind: %s (%v)", obj.Key, obj.Err)
	}

	etag, err := l.Put(ctx, d, "a/result.png", "req_1", strings.NewReader("first"), 5, "image/png")
	if err != nil || etag == "" {
		t.Fatalf("put: %q, %v", etag, err)
	}
	// The same delivery again (a node died before recording it) finds its own object: no second write.
	again, err := l.Put(ctx, d, "a/result.png", "req_1", strings.NewReader("first"), 5, "image/png")
	if err != nil || again != etag {
		t.Fatalf("repeated put of the same delivery: %q, %v; want %q", again, err, etag)
	}
	// Another request's object is never overwritten.
	_, err = l.Put(ctx, d, "a/result.png", "req_2", strings.NewReader("second"), 6, "image/png")
	var step *StepError
	if !errors.As(err, &step) || !errors.Is(err, ErrExists) || step.Step != "write" {
		t.Fatalf("second put: %v, want write step with ErrExists", err)
	}
	obj, err := srv.Client().GetObject(ctx, bucket, "out/a/result.png", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(obj)
	if string(got) != "first" {
		t.Fatalf("object = %q, want the first write kept", got)
	}
}

func TestVerifyReportsWrongCredentials(t *testing.T) {
	srv := s3test.Start(t)
	l := newLib(t, true)
	ctx := context.Background()
	in := input(srv, srv.NewBucket(t))
	in.SecretKey = "wrong-secret"
	d, _ := l.Create(ctx, "org_1", in, t0)
	d, se, err := l.Verify(ctx, "org_1", d.ID, t0)
	if err != nil {
		t.Fatal(err)
	}
	if se == nil || se.Step != "write" || !strings.Contains(se.Reason, "credentials") {
		t.Fatalf("verify with a wrong secret: %v, want the write step naming the credentials", se)
	}
	if d.Usable() || !strings.Contains(d.LastError, "credentials") {
		t.Fatalf("destination after a failed verify: %+v", d)
	}

	in = input(srv, "no-such-bucket-here")
	d, _ = l.Create(ctx, "org_1", in, t0)
	_, se, _ = l.Verify(ctx, "org_1", d.ID, t0)
	if se == nil || !strings.Contains(se.Reason, "NoSuchBucket") {
		t.Fatalf("verify of a missing bucket: %v", se)
	}
}

func TestEgressGuardRefusesLoopbackWithoutDevelopmentOption(t *testing.T) {
	srv := s3test.Start(t)
	l := newLib(t, false)
	ctx := context.Background()
	bucket := srv.NewBucket(t)
	d, _ := l.Create(ctx, "org_1", input(srv, bucket), t0)
	_, se, err := l.Verify(ctx, "org_1", d.ID, t0)
	if err != nil {
		t.Fatal(err)
	}
	if se == nil || se.Step != "connect" || !errors.Is(se, egress.ErrRefused) {
		t.Fatalf("verify of a loopback endpoint: %v, want a connect refusal", se)
	}
	for obj := range srv.Client().ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
		t.Fatalf("an object reached the loopback bucket: %s", obj.Key)
	}
}

// TestEndlessAnswerIsCut: an endpoint (any server a customer names) that answers the bucket-location request
// with an endless XML body gets its answer cut at 1 MiB: verification fails and the node stops reading. Before,
// minio-go's XML decoder read it to the end, growing the node's memory for as long as the server sent (10.9 GB
// in 40 s on loopback).
func TestEndlessAnswerIsCut(t *testing.T) {
	const offered = 128 << 20
	var sent atomic.Int64
	done := make(chan struct{}, 64) // one per request; minio-go may retry
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { done <- struct{}{} }()
		w.Header().Set("Content-Type", "application/xml")
		if _, err := io.WriteString(w, `<?xml version="1.0"?><LocationConstraint>`); err != nil {
			return
		}
		chunk := bytes.Repeat([]byte("A"), 64<<10)
		for sent.Load() < offered { // in all requests
			n, err := w.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	l := newLib(t, true)
	ctx := context.Background()
	// No region: minio-go asks the endpoint for the bucket's location first.
	d, err := l.Create(ctx, "org_1", Input{Name: "hostile", Endpoint: strings.TrimPrefix(srv.URL, "http://"), Bucket: "bucket",
		AccessKey: "a", SecretKey: "b", PathStyle: yes(), Secure: no()}, t0)
	if err != nil {
		t.Fatal(err)
	}
	_, se, err := l.Verify(ctx, "org_1", d.ID, t0)
	if err != nil {
		t.Fatal(err)
	}
	if se == nil {
		t.Fatal("verification of an endpoint answering endlessly succeeded")
	}
	srv.CloseClientConnections()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the endpoint's handler never ended")
	}
	if n := sent.Load(); n >= 32<<20 {
		t.Fatalf("the node read on: the endpoint sent %d MB of one answer", n>>20)
	}
}

// TestLargeCreateOverExistingKeyIsAConflict: a server may refuse a conditional create (412) as soon as it has
// the headers, before reading a large body, and close the connection; the client then sees a write error
// (broken pipe, connection reset) rather than the 412. The delivery must still end as "already exists", not
// as an unreachable endpoint retried for ever.
func TestLargeCreateOverExistingKeyIsAConflict(t *testing.T) {
	srv := s3test.Start(t)
	l := newLib(t, true)
	ctx := context.Background()
	d, err := l.Create(ctx, "org_1", input(srv, srv.NewBucket(t)), t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Put(ctx, d, "big.png", "req_1", strings.NewReader("first"), 5, "image/png"); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte{1}, 32<<20)
	// Not every attempt is cut off (the server may read the body before answering): several, so that this
	// fails without the re-check (with 3 attempts it did in 4 runs of 6, with 6 in 3 of 4).
	for i := range 10 {
		_, err = l.Put(ctx, d, "big.png", "req_2", bytes.NewReader(big), int64(len(big)), "image/png")
		var step *StepError
		if !errors.As(err, &step) || !errors.Is(err, ErrExists) || step.Code != CodeKeyConflict {
			t.Fatalf("put %d of a large body over another request's object: %v, want %s", i, err, CodeKeyConflict)
		}
	}
}

// TestHostileErrorTextIsEscapedAndBounded: an endpoint (any server a customer names) refusing the probe write
// with an error that holds terminal escape sequences (an OSC 52 clipboard write, a screen clear), a
// right-to-left override, or a message of most of a megabyte leaves a last_error of at most
// hiddenchar.RemoteLimit bytes in which every such character is escaped: no reader of the record (the API,
// `filigrane storage list`, the console, a storage.delivery.failed event) gets them as themselves.
func TestHostileErrorTextIsEscapedAndBounded(t *testing.T) {
	const hostile = "\x1b]52;c;cm0gLXJmIH4=\a\x1b[2J\u202eexe.txt"
	answers := map[string]struct{ contentType, body string }{
		// Not XML: minio-go keeps the first KiB of the body as the message.
		"plain": {"text/plain", hostile + strings.Repeat("x", 256<<10)},
		// XML: minio-go keeps the whole <Message> of an answer up to 1 MiB.
		"xml": {"application/xml", `<?xml version="1.0"?><Error><Code>Hostile` + "\u202e" + `</Code><Message>` +
			"\u202eexe.txt" + strings.Repeat("y", 900<<10) + `</Message></Error>`},
	}
	for name, a := range answers {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
				w.Header().Set("Content-Type", a.contentType)
				w.WriteHeader(http.StatusBadRequest) // not retried by the client
				_, _ = io.WriteString(w, a.body)
			}))
			defer srv.Close()
			l := newLib(t, true)
			ctx := context.Background()
			d, err := l.Create(ctx, "org_1", Input{Name: "hostile", Endpoint: strings.TrimPrefix(srv.URL, "http://"),
				Region: "us-east-1", Bucket: "bucket", AccessKey: "a", SecretKey: "b", PathStyle: yes(), Secure: no()}, t0)
			if err != nil {
				t.Fatal(err)
			}
			_, se, err := l.Verify(ctx, "org_1", d.ID, t0)
			if err != nil || se == nil {
				t.Fatalf("verify against a refusing endpoint: %v %v", se, err)
			}
			stored, err := l.Get(ctx, "org_1", d.ID)
			if err != nil {
				t.Fatal(err)
			}
			for what, s := range map[string]string{"reason": se.Reason, "last_error": stored.LastError} {
				if len(s) > hiddenchar.RemoteLimit || !utf8.ValidString(s) || strings.ContainsAny(s, "\x1b\a\u202e") ||
					!strings.Contains(s, `\u202eexe.txt`) {
					t.Errorf("%s: %d bytes, %+q", what, len(s), s[:min(len(s), 200)])
				}
			}
		})
	}
}
