package http

import (
	"bytes"
	"encoding/json"
	"errors"

	"filigrane/internal/problem"
	"filigrane/persistence/diskspace"

	"github.com/valyala/fasthttp"
)

// Code is an error code of the API, sent in the `code` member of every problem body. The codes, their
// statuses, titles and documentation are one table in internal/problem; the names below keep the handlers'
// call sites short.
type Code = problem.Code

// Error codes (internal/problem has each one's status and title). Codes only a failed job carries (worker_lost,
// deadline_exceeded, cancelled) reach the HTTP layer through problem.ForJob and need no name here.
const (
	CodeBadRequest           = problem.BadRequest
	CodeMalformedJSON        = problem.MalformedJSON
	CodeUnauthorized         = problem.Unauthorized
	CodeInsufficientCredits  = problem.InsufficientCredits
	CodeForbiddenScope       = problem.ForbiddenScope
	CodeForbiddenMember      = problem.ForbiddenMember
	CodeForbiddenPlan        = problem.ForbiddenPlan
	CodeNotFound             = problem.NotFound
	CodeMethodNotAllowed     = problem.MethodNotAllowed
	CodeTooLarge             = problem.TooLarge
	CodeRequestTimeout       = problem.RequestTimeout
	CodeHeadersTooLarge      = problem.HeadersTooLarge
	CodeUnsupportedMedia     = problem.UnsupportedMedia
	CodeInvalidRequest       = problem.InvalidRequest
	CodeRateLimited          = problem.RateLimited
	CodeConcurrencyLimit     = problem.ConcurrencyLimit
	CodeInvalidData          = problem.InvalidData
	CodeInvalidImage         = problem.InvalidImage
	CodeImageTooLarge        = problem.ImageTooLarge
	CodeImageTooComplex      = problem.ImageTooComplex
	CodeDecodeBusy           = problem.DecodeBusy
	CodeFileTooLarge         = problem.FileTooLarge
	CodeInvalidIdempotency   = problem.InvalidIdempotency
	CodeInvalidAccelerator   = problem.InvalidAccelerator
	CodeWebhookNotFound      = problem.WebhookNotFound
	CodeStorageDestination   = problem.StorageDestination
	CodeStorageNotFound      = problem.StorageNotFound
	CodeStorageLimit         = problem.StorageLimit
	CodeStorageVerify        = problem.StorageVerify
	CodeStorageObjectGone    = problem.StorageObjectGone
	CodeStorageConflict      = problem.StorageConflict
	CodeIdempotencyConflict  = problem.IdempotencyConflict
	CodeGPUUnavailable       = problem.GPUUnavailable
	CodeMediaUnavailable     = problem.MediaUnavailable
	CodeResultGone           = problem.ResultGone
	CodeProcessingError      = problem.ProcessingError
	CodeInternal             = problem.Internal
	CodeUnavailable          = problem.Unavailable
	CodeAssetNotFound        = problem.AssetNotFound
	CodeAssetVersionConflict = problem.AssetVersionConflict
	CodeAssetFileExpired     = problem.AssetFileExpired
	CodeInvalidCursor        = problem.InvalidCursor
	CodeRangeNotSatisfiable  = problem.RangeNotSatisfiable
	CodeForbiddenRole        = problem.ForbiddenRole
	CodeUploadNotReceived    = problem.UploadNotReceived
	CodeUploadInUse          = problem.UploadInUse
	CodeUploadConsumed       = problem.UploadConsumed
	CodeUploadRejected       = problem.UploadRejected
	CodeUploadExpired        = problem.UploadExpired
	CodeUploadKind           = problem.UploadKind
	CodeUploadReceived       = problem.UploadReceived
	CodeUploadSignature      = problem.UploadSignature
	CodeUploadURLExpired     = problem.UploadURLExpired
	CodeUploadSizeMismatch   = problem.UploadSizeMismatch
	CodeUploadAPIKey         = problem.UploadAPIKey
	CodeOriginNotAllowed     = problem.OriginNotAllowed
)

// Problem is an RFC 9457 problem body with the API's error code and the request id. Detail is the string
// RFC 9457 defines, or for Etchv's SDKs the object they read (problemDetail).
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    any    `json:"detail,omitempty"`
	Code      Code   `json:"code"`
	RequestID string `json:"request_id,omitempty"`
}

// sdkDetail is the `detail` object Etchv's SDKs parse into their error types: Go's Error.Code, Message and
// Limit, Python's EtchvError.code, message and limit.
type sdkDetail struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	Limit   int    `json:"limit,omitempty"`
}

// etchvClient reports whether the request comes from one of Etchv's SDKs. They name themselves in
// User-Agent (etchv-go/1.2.0, etchv-python/1.2.0, ...) and read an error's code only from a `detail` object.
func etchvClient(ctx *fasthttp.RequestCtx) bool {
	ua := ctx.Request.Header.UserAgent()
	return len(ua) >= 6 && bytes.EqualFold(ua[:6], []byte("etchv-"))
}

// problemDetail is the `detail` member of a problem body. Every client gets RFC 9457's human-readable
// string, except Etchv's SDKs, which get {code, message, limit}: that is the only place they look for a
// machine code (the top-level `code` they ignore). Such a body is still a valid problem document (RFC 9457
// section 3.1: a member of an unexpected type is ignored; type, title, status and code stay). limit is the
// limit that applied (the plan's requests per minute or concurrent jobs), 0 when none. docs/errors.md
// documents the two shapes.
func problemDetail(ctx *fasthttp.RequestCtx, code Code, detail string, limit int) any {
	if etchvClient(ctx) {
		return sdkDetail{Code: code, Message: detail, Limit: limit}
	}
	if detail == "" {
		return nil
	}
	return detail
}

// problemTypeBase prefixes the problem type URIs (relative to the base URL, as RFC 9457 allows); docs/errors.md
// describes each code.
const problemTypeBase = "/problems/"

// writeProblem answers with the problem for code. Headers already set on ctx (Retry-After, rate limits) stay.
func writeProblem(ctx *fasthttp.RequestCtx, code Code, detail string) {
	writeProblemLimit(ctx, code, detail, 0)
}

// writeAPIError answers with the problem of aerr.
func writeAPIError(ctx *fasthttp.RequestCtx, aerr *apiError) {
	writeProblemLimit(ctx, aerr.code, aerr.detail, aerr.limit)
}

// writeProblemLimit is writeProblem for a refusal by a limit (429): limit is the number that applied.
func writeProblemLimit(ctx *fasthttp.RequestCtx, code Code, detail string, limit int) {
	entry, ok := problem.Lookup(code)
	if !ok {
		entry, _ = problem.Lookup(CodeInternal)
		code = CodeInternal
	}
	p := Problem{Type: problemTypeBase + string(code), Title: entry.Title, Status: entry.Status,
		Detail: problemDetail(ctx, code, detail, limit), Code: code,
		RequestID: string(ctx.Response.Header.Peek(headerRequestID))}
	body, _ := encodeJSON(p)
	ctx.Response.ResetBody()
	ctx.SetStatusCode(entry.Status)
	ctx.SetContentType("application/problem+json")
	ctx.SetBody(body)
}

// encodeJSON encodes v as compact JSON without HTML escaping: upload URLs carry '&' in their query, and
// clients copy them from responses (json.Marshal would write \u0026). Responses are never HTML.
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// writeJSON answers status with v encoded as JSON.
func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	body, err := encodeJSON(v)
	if err != nil {
		writeProblem(ctx, CodeInternal, "could not encode the response")
		return
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

// lowDisk is the answer to a write the node's disk guard refused, or its filesystem refused for want of space
// (persistence/diskspace.ErrLow): 503 with a Retry-After that leaves an operator time to free space, and a
// detail that says what is short without naming paths; nil for any other error. A request's file is the first
// thing it writes, so a refused file leaves nothing stored, held or charged.
func lowDisk(ctx *fasthttp.RequestCtx, err error) *apiError {
	if !errors.Is(err, diskspace.ErrLow) {
		return nil
	}
	ctx.Response.Header.Set("Retry-After", "30")
	return newAPIError(CodeUnavailable, "the node is low on disk space and stores nothing new now; retry later")
}
