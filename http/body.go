package http

import (
	"bytes"
	"io"

	"github.com/valyala/fasthttp"
)

// bodyReader returns the request body as a stream (bodies are streamed, see Server.srv).
func bodyReader(ctx *fasthttp.RequestCtx) io.Reader {
	if r := ctx.RequestBodyStream(); r != nil {
		return r
	}
	return bytes.NewReader(ctx.Request.Body())
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
