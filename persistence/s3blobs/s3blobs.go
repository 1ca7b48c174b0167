// Package s3blobs implements persistence.Blobs on S3-compatible object storage: the blob store of the cluster
// mode. Blob key k is object prefix+k, stored as is, so objects can be presigned for download and are readable
// with any S3 tool.
//
// The SHA-256 of each blob is kept in its user metadata (x-amz-meta-sha256), so Stat is one HEAD. S3 takes
// metadata with the first request of an upload, before the bytes whose digest it is, so Put works in one of two
// ways:
//
//   - Blobs up to smallLimit (8 MiB) are read into memory, hashed, and sent in one PUT carrying the digest.
//   - Larger blobs are streamed, hashed on the way, to a staging object (prefix+".staging/<random>") with a
//     multipart upload, then copied server-side onto the key with the digest as replaced metadata, and the
//     staging object is removed. The copy is what makes the blob and its digest appear together, atomically.
//     It costs server-side I/O equal to the blob's size; the alternative (spooling to local disk first)
//     costs the same on the node instead.
//
// A Put that fails or is cancelled leaves the key as it was, and aborts its multipart upload. The only
// leftovers are a staging object or an incomplete multipart upload when the process dies mid-Put (or the
// server is unreachable for the abort). SweepStaging removes the former; a bucket lifecycle rule
// (AbortIncompleteMultipartUpload) should cover the latter.
//
// Keys whose first segment is ".staging" are refused, since that name is taken by the staging objects.
// Objects not written by Put (for example through a presigned upload) have no digest metadata: Stat then
// hashes the object once by reading it.
package s3blobs

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"filigrane/persistence"
)

const (
	stagingDir  = ".staging"
	metaSHA256  = "Sha256" // canonical form of the x-amz-meta-sha256 header suffix
	contentType = "application/octet-stream"

	defaultSmallLimit = 8 << 20
	// defaultPartSize is the multipart part size for streamed uploads: it is also the memory one upload holds
	// (the client buffers a part), and with S3's 10,000 parts it caps a blob at 160 GiB.
	defaultPartSize = 16 << 20

	cleanupTimeout = 30 * time.Second
)

// Blobs is a persistence.Blobs on one bucket under an optional object-name prefix. Safe for concurrent use.
type Blobs struct {
	client *minio.Client
	bucket string
	prefix string

	smallLimit int64
	partSize   uint64
}

var _ persistence.Blobs = (*Blobs)(nil)

// New returns a Blobs keeping blob k in bucket as object prefix+k (prefix is "" or ends with "/", for example
// "blobs/"). The bucket must exist. New does no I/O.
func New(client *minio.Client, bucket, prefix string) (*Blobs, error) {
	if client == nil || bucket == "" {
		return nil, errors.New("s3blobs: new: client and bucket are required")
	}
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		return nil, fmt.Errorf("s3blobs: new: prefix %q must end with /", prefix)
	}
	if prefix != "" {
		if err := persistence.ValidateBlobKey(strings.TrimSuffix(prefix, "/")); err != nil {
			return nil, fmt.Errorf("s3blobs: new: prefix: %w", err)
		}
	}
	return &Blobs{client: client, bucket: bucket, prefix: prefix, smallLimit: defaultSmallLimit, partSize: defaultPartSize}, nil
}

func (b *Blobs) objectName(key string) (string, error) {
	if err := persistence.ValidateBlobKey(key); err != nil {
		return "", err
	}
	if key == stagingDir || strings.HasPrefix(key, stagingDir+"/") {
		return "", fmt.Errorf("%w: blob key %q uses the reserved segment %q", persistence.ErrInvalidKey, key, stagingDir)
	}
	return b.prefix + key, nil
}

func errCode(err error) (string, int) {
	r := minio.ToErrorResponse(err)
	return r.Code, r.StatusCode
}

func isNotFound(err error) bool {
	code, status := errCode(err)
	return code == "NoSuchKey" || status == http.StatusNotFound
}

func isInvalidRange(err error) bool {
	code, status := errCode(err)
	return code == "InvalidRange" || status == http.StatusRequestedRangeNotSatisfiable
}

// ctxErr prefers the context's error: when the context ends mid-request, the client's error says less.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}

// hashReader hashes and counts what passes through it, and stops when the context ends so that a cancelled
// Put does not first drain its source.
type hashReader struct {
	ctx context.Context
	r   io.Reader
	h   hash.Hash
	n   int64
	err error // the first error from r, kept to tell the caller's failure from the client's
}

func (h *hashReader) Read(p []byte) (int, error) {
	if err := h.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := h.r.Read(p)
	h.h.Write(p[:n])
	h.n += int64(n)
	if err != nil && err != io.EOF && h.err == nil {
		h.err = err
	}
	return n, err
}

func (h *hashReader) info() persistence.BlobInfo {
	return persistence.BlobInfo{Size: h.n, SHA256: hex.EncodeToString(h.h.Sum(nil))}
}

// Put implements persistence.Blobs.
func (b *Blobs) Put(ctx context.Context, key string, r io.Reader) (persistence.BlobInfo, error) {
	name, err := b.objectName(key)
	if err != nil {
		return persistence.BlobInfo{}, fmt.Errorf("s3blobs: put %q: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return persistence.BlobInfo{}, fmt.Errorf("s3blobs: put %q: %w", key, err)
	}
	hr := &hashReader{ctx: ctx, r: r, h: sha256.New()}
	var head bytes.Buffer
	if _, err := io.CopyN(&head, hr, b.smallLimit+1); err != nil && err != io.EOF {
		return persistence.BlobInfo{}, fmt.Errorf("s3blobs: put %q: after %d bytes: %w", key, hr.n, ctxErr(ctx, err))
	}
	var info persistence.BlobInfo
	if hr.n <= b.smallLimit {
		info, err = b.putSmall(ctx, name, hr, &head)
	} else {
		info, err = b.putLarge(ctx, name, hr, &head)
	}
	if err != nil {
		return persistence.BlobInfo{}, fmt.Errorf("s3blobs: put %q: %w", key, err)
	}
	return info, nil
}

func (b *Blobs) putSmall(ctx context.Context, name string, hr *hashReader, head *bytes.Buffer) (persistence.BlobInfo, error) {
	info := hr.info()
	_, err := b.client.PutObject(ctx, b.bucket, name, bytes.NewReader(head.Bytes()), info.Size, minio.PutObjectOptions{
		ContentType:      contentType,
		UserMetadata:     map[string]string{metaSHA256: info.SHA256},
		DisableMultipart: true,
	})
	if err != nil {
		return persistence.BlobInfo{}, ctxErr(ctx, err)
	}
	return info, nil
}

func (b *Blobs) putLarge(ctx context.Context, name string, hr *hashReader, head *bytes.Buffer) (persistence.BlobInfo, error) {
	var rnd [16]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return persistence.BlobInfo{}, err
	}
	staging := b.prefix + stagingDir + "/" + hex.EncodeToString(rnd[:])
	// Removing the staging object must happen even when ctx has ended, or cancelled Puts would leak them.
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_ = b.client.RemoveObject(cctx, b.bucket, staging, minio.RemoveObjectOptions{})
	}()

	// On failure (cancellation included) the client aborts the multipart upload on a context of its own.
	up, err := b.client.PutObject(ctx, b.bucket, staging, io.MultiReader(head, hr), -1, minio.PutObjectOptions{
		ContentType: contentType,
		PartSize:    b.partSize,
	})
	if hr.err != nil {
		return persistence.BlobInfo{}, fmt.Errorf("after %d bytes: %w", hr.n, hr.err)
	}
	if err != nil {
		return persistence.BlobInfo{}, fmt.Errorf("upload to staging: %w", ctxErr(ctx, err))
	}
	info := hr.info()
	if up.Size != info.Size {
		return persistence.BlobInfo{}, fmt.Errorf("upload to staging stored %d bytes, read %d", up.Size, info.Size)
	}
	if err := ctx.Err(); err != nil {
		return persistence.BlobInfo{}, err
	}
	_, err = b.client.ComposeObject(ctx,
		minio.CopyDestOptions{
			Bucket: b.bucket, Object: name,
			ReplaceMetadata: true, UserMetadata: map[string]string{metaSHA256: info.SHA256},
			ContentType: contentType,
			PartSize:    uint64(max(b.partSize, 64<<20)), // server-side copy parts: no client memory, fewer requests
		},
		minio.CopySrcOptions{Bucket: b.bucket, Object: staging, MatchETag: up.ETag},
	)
	if err != nil {
		return persistence.BlobInfo{}, fmt.Errorf("publish from staging: %w", ctxErr(ctx, err))
	}
	return info, nil
}

// Get implements persistence.Blobs. Errors (a missing key included) are reported by Get itself, not by the
// first Read.
func (b *Blobs) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	name, err := b.objectName(key)
	if err != nil {
		return nil, fmt.Errorf("s3blobs: get %q: %w", key, err)
	}
	if offset < 0 {
		return nil, fmt.Errorf("s3blobs: get %q: negative offset %d", key, offset)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("s3blobs: get %q: %w", key, err)
	}
	if length == 0 {
		if _, err := b.stat(ctx, name); err != nil {
			return nil, fmt.Errorf("s3blobs: get %q: %w", key, err)
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	var opts minio.GetObjectOptions
	// A whole-object GET carries no Range header: ranges over an empty object are unsatisfiable.
	if offset > 0 || length > 0 {
		end := int64(0) // 0: to the end ("bytes=offset-")
		if length > 0 {
			end = offset + length - 1
		}
		if err := opts.SetRange(offset, end); err != nil {
			return nil, fmt.Errorf("s3blobs: get %q: %w", key, err)
		}
	}
	obj, err := b.client.GetObject(ctx, b.bucket, name, opts)
	if err == nil {
		// GetObject is lazy; Stat sends the request so that errors surface here.
		_, err = obj.Stat()
		if err != nil {
			_ = obj.Close()
		}
	}
	switch {
	case err == nil:
		return obj, nil
	case isNotFound(err):
		return nil, fmt.Errorf("s3blobs: get %q: %w", key, persistence.ErrNotFound)
	case isInvalidRange(err):
		// The offset is at or past the end; the contract says that reads as empty, if the blob exists.
		if _, err := b.stat(ctx, name); err != nil {
			return nil, fmt.Errorf("s3blobs: get %q: %w", key, err)
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	default:
		return nil, fmt.Errorf("s3blobs: get %q: %w", key, ctxErr(ctx, err))
	}
}

// Stat implements persistence.Blobs.
func (b *Blobs) Stat(ctx context.Context, key string) (persistence.BlobInfo, error) {
	name, err := b.objectName(key)
	if err != nil {
		return persistence.BlobInfo{}, fmt.Errorf("s3blobs: stat %q: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return persistence.BlobInfo{}, fmt.Errorf("s3blobs: stat %q: %w", key, err)
	}
	info, err := b.stat(ctx, name)
	if err != nil {
		return persistence.BlobInfo{}, fmt.Errorf("s3blobs: stat %q: %w", key, err)
	}
	return info, nil
}

func (b *Blobs) stat(ctx context.Context, name string) (persistence.BlobInfo, error) {
	oi, err := b.client.StatObject(ctx, b.bucket, name, minio.StatObjectOptions{})
	if isNotFound(err) {
		return persistence.BlobInfo{}, persistence.ErrNotFound
	}
	if err != nil {
		return persistence.BlobInfo{}, ctxErr(ctx, err)
	}
	for k, v := range oi.UserMetadata {
		if strings.EqualFold(k, metaSHA256) || strings.EqualFold(k, "X-Amz-Meta-"+metaSHA256) {
			return persistence.BlobInfo{Size: oi.Size, SHA256: strings.ToLower(v)}, nil
		}
	}
	return b.hashObject(ctx, name)
}

// hashObject computes the digest of an object that has none in its metadata.
func (b *Blobs) hashObject(ctx context.Context, name string) (persistence.BlobInfo, error) {
	obj, err := b.client.GetObject(ctx, b.bucket, name, minio.GetObjectOptions{})
	if err != nil {
		return persistence.BlobInfo{}, ctxErr(ctx, err)
	}
	defer obj.Close()
	h := sha256.New()
	n, err := io.Copy(h, obj)
	if isNotFound(err) {
		return persistence.BlobInfo{}, persistence.ErrNotFound
	}
	if err != nil {
		return persistence.BlobInfo{}, fmt.Errorf("hash object without digest metadata: %w", ctxErr(ctx, err))
	}
	return persistence.BlobInfo{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// Delete implements persistence.Blobs.
func (b *Blobs) Delete(ctx context.Context, key string) error {
	name, err := b.objectName(key)
	if err != nil {
		return fmt.Errorf("s3blobs: delete %q: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("s3blobs: delete %q: %w", key, err)
	}
	// S3 answers a DELETE of a missing object with success, which is the contract.
	if err := b.client.RemoveObject(ctx, b.bucket, name, minio.RemoveObjectOptions{}); err != nil && !isNotFound(err) {
		return fmt.Errorf("s3blobs: delete %q: %w", key, ctxErr(ctx, err))
	}
	return nil
}

// SweepStaging removes staging objects older than olderThan, left by processes that died mid-Put, and returns
// how many it removed. Staging objects of Puts in progress are younger than any sensible olderThan (an hour,
// say); run it at startup or now and then.
func (b *Blobs) SweepStaging(ctx context.Context, olderThan time.Duration) (int, error) {
	cutoff := time.Now().Add(-olderThan)
	removed := 0
	for obj := range b.client.ListObjectsIter(ctx, b.bucket, minio.ListObjectsOptions{Prefix: b.prefix + stagingDir + "/", Recursive: true}) {
		if obj.Err != nil {
			return removed, fmt.Errorf("s3blobs: sweep staging: %w", ctxErr(ctx, obj.Err))
		}
		if obj.LastModified.After(cutoff) {
			continue
		}
		if err := b.client.RemoveObject(ctx, b.bucket, obj.Key, minio.RemoveObjectOptions{}); err != nil && !isNotFound(err) {
			return removed, fmt.Errorf("s3blobs: sweep staging: remove %s: %w", obj.Key, ctxErr(ctx, err))
		}
		removed++
	}
	if err := ctx.Err(); err != nil {
		return removed, fmt.Errorf("s3blobs: sweep staging: %w", err)
	}
	return removed, nil
}
