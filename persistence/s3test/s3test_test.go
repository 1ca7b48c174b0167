package s3test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
)

func TestStartAndConditionalPut(t *testing.T) {
	s := Start(t)
	bucket := s.NewBucket(t)
	ctx := context.Background()
	c := s.Client()
	put := func(opts minio.PutObjectOptions) (minio.UploadInfo, error) {
		opts.DisableMultipart = true
		return c.PutObject(ctx, bucket, "k", bytes.NewReader([]byte("v")), 1, opts)
	}
	var create minio.PutObjectOptions
	create.SetMatchETagExcept("*")
	info, err := put(create)
	if err != nil {
		t.Fatalf("create-only put: %v", err)
	}
	if _, err := put(create); minio.ToErrorResponse(err).Code != "PreconditionFailed" {
		t.Fatalf("second create-only put = %v, want PreconditionFailed", err)
	}
	var cas minio.PutObjectOptions
	cas.SetMatchETag(info.ETag)
	if _, err := put(cas); err != nil {
		t.Fatalf("If-Match put with current etag: %v", err)
	}
}

// TestStartOnATakenPortFails: when another test's server holds the port picked for a new one (it took it
// between the pick and the bind), the new server's start fails, so that Start retries on another port,
// instead of handing the test the other server: each server has its own secret. A read-only twin shares
// its server's credentials and data.
func TestStartOnATakenPortFails(t *testing.T) {
	other := Start(t)
	base := t.TempDir()
	if _, err := startAt(t, Binary(), base, filepath.Join(base, "root"), other.Endpoint, false, false, newSecret()); err == nil ||
		!strings.Contains(err.Error(), "did not accept this server's secret") {
		t.Fatalf("start on a port another server holds: %v", err)
	}
	bucket := other.NewBucket(t)
	twin := other.ReadOnlyTwin(t)
	if ok, err := twin.Client().BucketExists(context.Background(), bucket); err != nil || !ok {
		t.Fatalf("the read-only twin does not see its server's bucket: %v %v", ok, err)
	}
}
