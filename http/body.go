package http

import (
	"bytes"
	"io"
	"mime"

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

// jsonBodyType reports whether a request's Content-Type may carry the JSON body of an endpoint that takes
// only JSON: a JSON type, none at all, or application/x-www-form-urlencoded, which is what `curl -d` sends
// when told nothing else. The body must still parse as JSON; any other type is 415.
func jsonBodyType(ct string) bool {
	if ct == "" || isJSONType(ct) {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/x-www-form-urlencoded"
}
