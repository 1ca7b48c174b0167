package http

import (
	"bytes"
	"encoding/json"

	"filigrane/internal/problem"

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
	CodeIdempotencyConflict  = problem.IdempotencyConflict
	CodeGPUUnavailable       = problem.GPUUnavailable
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

// Problem is an RFC 9457 problem body with the API's error code and the request id.
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail,omitempty"`
	Code      Code   `json:"code"`
	RequestID string `json:"request_id,omitempty"`
}

// problemTypeBase prefixes the problem type URIs (relative to the base URL, as RFC 9457 allows); docs/errors.md
// describes each code.
const problemTypeBase = "/problems/"

// writeProblem answers with the problem for code. Headers already set on ctx (Retry-After, rate limits) stay.
func writeProblem(ctx *fasthttp.RequestCtx, code Code, detail string) {
	entry, ok := problem.Lookup(code)
	if !ok {
		entry, _ = problem.Lookup(CodeInternal)
		code = CodeInternal
	}
	p := Problem{Type: problemTypeBase + string(code), Title: entry.Title, Status: entry.Status, Detail: detail,
		Code: code, RequestID: string(ctx.Response.Header.Peek(headerRequestID))}
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
