package s3blobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"filigrane/persistence"
	"filigrane/persistence/blobtest"
	"filigrane/persistence/s3test"
)

func TestContract(t *testing.T) {
	srv := s3test.Start(t)
	blobtest.Run(t, func(t *testing.T) persistence.Blobs {
		b, err := New(srv.Client(), srv.NewBucket(t), "blobs/")
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

// TestContractStreamed runs the contract with a tiny in-memory limit, so that every non-trivial blob takes the
// streamed path (multipart upload to staging, server-side copy) that production uses for large files.
func TestContractStreamed(t *testing.T) {
	srv := s3test.Start(t)
	blobtest.Run(t, func(t *testing.T) persistence.Blobs {
		bucket := srv.NewBucket(t)
		b, err := New(srv.Client(), bucket, "")
		if err != nil {
			t.Fatal(err)
		}
		b.smallLimit = 1024
		b.partSize = 5 << 20 // S3's minimum part size, so the large blob spans parts
		t.Cleanup(func() { expectNoStaging(t, srv.Client(), bucket) })
		return b
	})
}

// expectNoStaging fails the test if bucket holds a staging object under any prefix, or an incomplete
// multipart upload.
func expectNoStaging(t *testing.T, c *minio.Client, bucket string) {
	t.Helper()
	for up := range c.ListIncompleteUploads(context.Background(), bucket, "", true) {
		if up.Err != nil {
			t.Errorf("list incomplete uploads: %v", up.Err)
			return
		}
		t.Errorf("incomplete multipart upload left behind: %s (%s)", up.Key, up.UploadID)
	}
	for obj := range c.ListObjectsIter(context.Background(), bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			t.Errorf("list staging: %v", obj.Err)
			return
		}
		if !strings.Contains("/"+obj.Key, "/"+stagingDir+"/") {
			continue
		}
		t.Errorf("staging object left behind: %s", obj.Key)
	}
}

func TestReservedAndPrefix(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	b, err := New(srv.Client(), srv.NewBucket(t), "blobs/")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{".staging", ".staging/x"} {
		if _, err := b.Put(ctx, k, strings.NewReader("x")); !errors.Is(err, persistence.ErrInvalidKey) {
			t.Errorf("Put(%q) = %v, want ErrInvalidKey", k, err)
		}
	}
	if _, err := New(srv.Client(), "b", "no-slash"); err == nil {
		t.Error("New accepted a prefix without trailing slash")
	}
	if _, err := New(srv.Client(), "b", "../"); err == nil {
		t.Error("New accepted a .. prefix")
	}
}

// TestForeignObjectStat: an object written around Put (say, by a presigned upload) has no digest metadata;
// Stat hashes it.
func TestForeignObjectStat(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	bucket := srv.NewBucket(t)
	b, err := New(srv.Client(), bucket, "")
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("uploaded around the store")
	if _, err := srv.Client().PutObject(ctx, bucket, "up/1", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	info, err := b.Stat(ctx, "up/1")
	sum := sha256.Sum256(data)
	if err != nil || info.Size != int64(len(data)) || info.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("Stat = %+v, %v", info, err)
	}
}

func TestSweepStaging(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	bucket := srv.NewBucket(t)
	b, err := New(srv.Client(), bucket, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Client().PutObject(ctx, bucket, stagingDir+"/orphan", strings.NewReader("x"), 1, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if n, err := b.SweepStaging(ctx, time.Hour); err != nil || n != 0 {
		t.Fatalf("SweepStaging(1h) = %d, %v; want 0 (the orphan is young)", n, err)
	}
	if n, err := b.SweepStaging(ctx, -time.Minute); err != nil || n != 1 {
		t.Fatalf("SweepStaging(-1m) = %d, %v; want 1", n, err)
	}
	expectNoStaging(t, srv.Client(), bucket)
}

// TestDigestInMetadata checks that both Put paths store the digest as metadata (Stat's fallback would hide a
// missing one by hashing).
func TestDigestInMetadata(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	bucket := srv.NewBucket(t)
	b, err := New(srv.Client(), bucket, "blobs/")
	if err != nil {
		t.Fatal(err)
	}
	b.smallLimit = 100
	for _, data := range [][]byte{[]byte("small"), bytes.Repeat([]byte("large "), 100)} {
		info, err := b.Put(ctx, "k", bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		oi, err := srv.Client().StatObject(ctx, bucket, "blobs/k", minio.StatObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := oi.UserMetadata[metaSHA256]; got != info.SHA256 || oi.Size != int64(len(data)) {
			t.Fatalf("%d-byte blob: metadata %v size %d, want sha %s", len(data), oi.UserMetadata, oi.Size, info.SHA256)
		}
	}
	expectNoStaging(t, srv.Client(), bucket)
}
