package http

import (
	"bytes"
	"encoding/json"

	"github.com/valyala/fasthttp"
)

// Code is an error code of the API, sent in the `code` member of every problem body.
type Code string

// The error table: every code the API answers with, its status and its title. Keeping them in one place keeps
// statuses consistent across handlers (the NATS server keeps its errors the same way).
var problemTable = map[Code]struct {
	Status int
	Title  string
}{
	CodeBadRequest:          {400, "Bad request"},
	CodeMalformedJSON:       {400, "Malformed JSON"},
	CodeUnauthorized:        {401, "Missing or invalid API key"},
	CodeInsufficientCredits: {402, "Insufficient credits"},
	CodeForbiddenScope:      {403, "Missing scope"},
	CodeForbiddenMember:     {403, "Not a member of the organization"},
	CodeForbiddenPlan:       {403, "Not included in the plan"},
	CodeNotFound:            {404, "Not found"},
	CodeMethodNotAllowed:    {405, "Method not allowed"},
	CodeConflict:            {409, "Conflict"},
	CodeGone:                {410, "Gone"},
	CodeTooLarge:            {413, "Request too large"},
	CodeRequestTimeout:      {408, "Request timeout"},
	CodeHeadersTooLarge:     {431, "Request headers too large"},
	CodeUnsupportedMedia:    {415, "Unsupported media type"},
	CodeInvalidRequest:      {422, "Invalid request"},
	CodeRateLimited:         {429, "Too many requests"},
	CodeConcurrencyLimit:    {429, "Plan concurrency limit reached"},
	CodeInvalidData:         {422, "Invalid data object"},
	CodeInvalidImage:        {422, "Invalid image"},
	CodeImageTooLarge:       {413, "Image too large"},
	CodeImageTooComplex:     {422, "Image structure too complex"},
	CodeDecodeBusy:          {503, "Decode capacity busy"},
	CodeFileTooLarge:        {413, "File too large"},
	CodeInvalidIdempotency:  {422, "Invalid Idempotency-Key"},
	CodeInvalidAccelerator:  {422, "Invalid accelerator"},
	CodeWebhookNotFound:     {404, "Webhook not found"},
	CodeStorageDestination:  {422, "Storage destination not usable"},
	CodeIdempotencyConflict: {409, "Idempotency-Key reused with different inputs"},
	CodeGPUUnavailable:      {503, "GPU unavailable"},
	CodeResultGone:          {410, "Result no longer available"},
	CodeCancelled:           {409, "Cancelled"},
	CodeProcessingError:     {500, "Processing failed"},
	CodeDeadlineExceeded:    {503, "Processing deadline exceeded"},
	CodeWorkerLost:          {503, "Processing interrupted"},
	CodeInternal:            {500, "Internal error"},
	CodeUnavailable:         {503, "Service unavailable"},

	// The asset library (spec 4.7).
	CodeAssetNotFound:        {404, "Asset not found"},
	CodeAssetVersionConflict: {409, "Asset version conflict"},
	CodeAssetFileExpired:     {410, "Asset file expired"},
	CodeInvalidCursor:        {422, "Invalid cursor"},
	CodeRangeNotSatisfiable:  {416, "Range not satisfiable"},
	CodeForbiddenRole:        {403, "Owner or admin role required"},

	// Uploads (spec 4.3, 7).
	CodeUploadNotReceived:  {409, "Upload not received"},
	CodeUploadInUse:        {409, "Upload in use"},
	CodeUploadConsumed:     {409, "Upload already used"},
	CodeUploadRejected:     {409, "Upload rejected"},
	CodeUploadExpired:      {410, "Upload expired"},
	CodeUploadKind:         {422, "Upload created for another kind of request"},
	CodeUploadReceived:     {409, "Upload file already received"},
	CodeUploadSignature:    {403, "Invalid upload URL signature"},
	CodeUploadURLExpired:   {403, "Upload URL expired"},
	CodeUploadSizeMismatch: {400, "Body size differs from the declared size"},
	CodeUploadAPIKey:       {400, "API key not accepted on upload URLs"},
	CodeOriginNotAllowed:   {403, "Origin not allowed"},
}

// Error codes.
const (
	CodeBadRequest          Code = "bad_request"
	CodeMalformedJSON       Code = "malformed_json"
	CodeUnauthorized        Code = "unauthorized"
	CodeInsufficientCredits Code = "insufficient_credits"
	CodeForbiddenScope      Code = "insufficient_scope"
	CodeForbiddenMember     Code = "not_a_member"
	CodeForbiddenPlan       Code = "plan_forbidden"
	CodeNotFound            Code = "not_found"
	CodeMethodNotAllowed    Code = "method_not_allowed"
	CodeConflict            Code = "conflict"
	CodeGone                Code = "gone"
	CodeTooLarge            Code = "payload_too_large"
	CodeRequestTimeout      Code = "request_timeout"
	CodeHeadersTooLarge     Code = "headers_too_large"
	CodeUnsupportedMedia    Code = "unsupported_media_type"
	CodeInvalidRequest      Code = "invalid_request"
	CodeRateLimited         Code = "rate_limited"
	CodeConcurrencyLimit    Code = "concurrency_limit"
	CodeInvalidData         Code = "invalid_data"
	CodeInvalidImage        Code = "invalid_image"
	CodeImageTooLarge       Code = "image_too_large"
	CodeImageTooComplex     Code = "image_too_complex"
	CodeDecodeBusy          Code = "decode_busy"
	CodeFileTooLarge        Code = "file_too_large"
	CodeInvalidIdempotency  Code = "invalid_idempotency_key"
	CodeInvalidAccelerator  Code = "invalid_accelerator"
	CodeWebhookNotFound     Code = "webhook_not_found"
	CodeStorageDestination  Code = "storage_destination_unusable"
	CodeIdempotencyConflict Code = "idempotency_conflict"
	CodeGPUUnavailable      Code = "gpu_unavailable"
	CodeResultGone          Code = "result_gone"
	CodeCancelled           Code = "cancelled"
	CodeProcessingError     Code = "processing_error"
	CodeDeadlineExceeded    Code = "deadline_exceeded"
	CodeWorkerLost          Code = "worker_lost"
	CodeInternal            Code = "internal_error"
	CodeUnavailable         Code = "service_unavailable"

	// The asset library.
	CodeAssetNotFound        Code = "asset_not_found"
	CodeAssetVersionConflict Code = "asset_version_conflict"
	CodeAssetFileExpired     Code = "asset_file_expired"
	CodeInvalidCursor        Code = "invalid_cursor"
	CodeRangeNotSatisfiable  Code = "range_not_satisfiable"
	CodeForbiddenRole        Code = "role_forbidden"

	// Uploads.
	CodeUploadNotReceived  Code = "upload_not_received"
	CodeUploadInUse        Code = "upload_in_use"
	CodeUploadConsumed     Code = "upload_consumed"
	CodeUploadRejected     Code = "upload_rejected"
	CodeUploadExpired      Code = "upload_expired"
	CodeUploadKind         Code = "upload_kind_mismatch"
	CodeUploadReceived     Code = "upload_already_received"
	CodeUploadSignature    Code = "invalid_upload_signature"
	CodeUploadURLExpired   Code = "upload_url_expired"
	CodeUploadSizeMismatch Code = "upload_size_mismatch"
	CodeUploadAPIKey       Code = "api_key_not_accepted"
	CodeOriginNotAllowed   Code = "origin_not_allowed"
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
	entry, ok := problemTable[code]
	if !ok {
		code, entry = CodeInternal, problemTable[CodeInternal]
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
