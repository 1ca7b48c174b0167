package s3test

import (
	"bytes"
	"context"
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
