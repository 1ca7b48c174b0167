package http

import (
	"context"
	"io"
	"time"

	"github.com/valyala/fasthttp"
)

// streamTimeout bounds the whole life of a blob streamed as a response body. The connection's progress
// deadline (ConnLimits.BodyProgress) ends a stalled download long before; this bound only guarantees that the
// blob reader and its storage connection are eventually released.
const streamTimeout = 2 * time.Hour

// openBlobBody opens [offset, offset+length) of a blob as a response body (length < 0: to the end).
//
// fasthttp writes a body stream after the handler has returned, when every context the handler made is
// done: an S3 reader opened with one fails at its first read and the client gets headers and no body, or no
// reply at all. So the reader gets its own context, detached from the request and bounded by streamTimeout
// and the server's shutdown grace, and cancelled when fasthttp closes the body (response written or
// connection gone). Every response that
// streams a blob goes through here.
func (s *Server) openBlobBody(ctx *fasthttp.RequestCtx, key string, offset, length int64) (io.ReadCloser, error) {
	c, cancel := s.requestContext(ctx, streamTimeout)
	r, err := s.cfg.Blobs.Get(c, key, offset, length)
	if err != nil {
		cancel()
		return nil, err
	}
	return &blobBody{ReadCloser: r, cancel: cancel}, nil
}

// sendBlobBody answers with body as the response body of size bytes; fasthttp closes it once written.
func sendBlobBody(ctx *fasthttp.RequestCtx, body io.ReadCloser, size int64) {
	ctx.SetBodyStream(body, int(size))
}

// blobBody is a blob reader that releases its context when closed.
type blobBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *blobBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
