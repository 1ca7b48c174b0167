// Package problem owns the API's one error vocabulary: every error code a client can see, in a problem body
// or as a failed job's error_code, with its HTTP status, its title and when it happens. The HTTP layer
// answers with these codes, the actors set them on failed jobs, and docs/errors.md is generated from the
// table (errors.md.tmpl holds the prose around it; TestErrorsDocMatchesTable fails when the file drifts).
//
// It must not import fasthttp, the actors or any storage: both the actors and the HTTP layer import it, and
// it decides nothing about job state (which failures are retried is the worker's call, per failure).
// Reply codes that actors exchange among themselves (ok, retry, stale lease) are not API codes and are not
// here.
package problem

// Code is an error code of the API: the `code` member of a problem body, and a failed job's `error_code`.
// Codes are stable; clients branch on them.
type Code string

// Entry is one row of the error table.
type Entry struct {
	Code   Code
	Status int
	Title  string
	// When is the sentence docs/errors.md shows: what makes the API answer this code.
	When string
	// Job: the code can be a failed job's error_code (on its receipt, result and replays); the job's
	// result answers Status with it.
	Job bool
	// Retry: the same request may succeed when sent again later, unchanged (a transient condition, often
	// with Retry-After).
	Retry bool
	// Reserved names the feature the spec gives this code to when that feature is not built yet (no code
	// path produces it); empty for codes in use.
	Reserved string
}

// Error codes. The table below gives each its status, title and documentation.
const (
	BadRequest          Code = "bad_request"
	MalformedJSON       Code = "malformed_json"
	Unauthorized        Code = "unauthorized"
	InsufficientCredits Code = "insufficient_credits"
	ForbiddenScope      Code = "insufficient_scope"
	ForbiddenMember     Code = "not_a_member"
	ForbiddenPlan       Code = "plan_forbidden"
	NotFound            Code = "not_found"
	MethodNotAllowed    Code = "method_not_allowed"
	TooLarge            Code = "payload_too_large"
	RequestTimeout      Code = "request_timeout"
	HeadersTooLarge     Code = "headers_too_large"
	UnsupportedMedia    Code = "unsupported_media_type"
	InvalidRequest      Code = "invalid_request"
	RateLimited         Code = "rate_limited"
	ConcurrencyLimit    Code = "concurrency_limited" // the name Etchv's docs and SDKs use
	Internal            Code = "internal_error"
	Unavailable         Code = "service_unavailable"

	// Uploads (spec 4.3).
	FileTooLarge       Code = "file_too_large"
	UploadNotReceived  Code = "upload_not_received"
	UploadInUse        Code = "upload_in_use"
	UploadConsumed     Code = "upload_consumed"
	UploadRejected     Code = "upload_rejected"
	UploadExpired      Code = "upload_expired"
	UploadKind         Code = "upload_kind_mismatch"
	UploadReceived     Code = "upload_already_received"
	UploadSignature    Code = "invalid_upload_signature"
	UploadURLExpired   Code = "upload_url_expired"
	UploadSizeMismatch Code = "upload_size_mismatch"
	UploadAPIKey       Code = "api_key_not_accepted"
	OriginNotAllowed   Code = "origin_not_allowed"

	// The asset library (spec 4.7).
	AssetNotFound        Code = "asset_not_found"
	AssetVersionConflict Code = "asset_version_conflict"
	AssetFileExpired     Code = "asset_file_expired"
	InvalidCursor        Code = "invalid_cursor"
	RangeNotSatisfiable  Code = "range_not_satisfiable"
	ForbiddenRole        Code = "role_forbidden"

	// Watermark requests and their jobs.
	InvalidData         Code = "invalid_data"
	InvalidImage        Code = "invalid_image"
	ImageTooLarge       Code = "image_too_large"
	ImageTooComplex     Code = "image_too_complex"
	DecodeBusy          Code = "decode_busy"
	InvalidVideo        Code = "invalid_video"
	VideoTooLarge       Code = "video_too_large"
	InvalidDocument     Code = "invalid_document"
	DocumentTooLarge    Code = "document_too_large"
	MediaUnavailable    Code = "media_unavailable"
	InvalidIdempotency  Code = "invalid_idempotency_key"
	InvalidAccelerator  Code = "invalid_accelerator"
	WebhookNotFound     Code = "webhook_not_found"
	StorageDestination  Code = "storage_destination_unusable"
	StorageNotFound     Code = "storage_destination_not_found"
	StorageLimit        Code = "storage_destination_limit"
	StorageVerify       Code = "storage_verification_failed"
	StorageObjectGone   Code = "storage_object_unavailable"
	StorageConflict     Code = "storage_destination_conflict"
	IdempotencyConflict Code = "idempotency_conflict"
	GPUUnavailable      Code = "gpu_unavailable"
	ResultGone          Code = "result_gone"
	ProcessingError     Code = "processing_error"
	DeadlineExceeded    Code = "deadline_exceeded"
	WorkerLost          Code = "worker_lost"
	Cancelled           Code = "cancelled"

	// Batches (spec 4.4, 7, 8).
	UnsupportedFileType Code = "unsupported_file_type"
	InvalidZip          Code = "invalid_zip"
	ZipTooLarge         Code = "zip_too_large"
	BatchExpired        Code = "batch_expired"
	ArchiveExpired      Code = "archive_expired"
	BatchNotStarted     Code = "batch_not_started"
	ArchiveNotRequested Code = "archive_not_requested"
	ArchiveTooLarge     Code = "archive_too_large"
	ArchiveUnavailable  Code = "archive_unavailable"
	ResultUnavailable   Code = "result_unavailable"

	// The web console's signed-in sessions (docs/console.md).
	SessionRequired Code = "session_required"
	CSRFFailed      Code = "csrf_failed"
)

// table is the error table, in the order docs/errors.md lists it. It is never written after package
// initialisation; read it through Lookup and All.
var table = []Entry{
	{Code: BadRequest, Status: 400, Title: "Bad request", When: "the request could not be parsed (broken framing)"},
	{Code: MalformedJSON, Status: 400, Title: "Malformed JSON", When: "a JSON body is not valid JSON"},
	{Code: Unauthorized, Status: 401, Title: "Missing or invalid API key", When: "missing, malformed, unknown, expired or revoked key (one answer for all, so guessers learn nothing)"},
	{Code: InsufficientCredits, Status: 402, Title: "Insufficient credits", When: "too few credits for the work; nothing is held"},
	{Code: ForbiddenScope, Status: 403, Title: "Missing scope", When: "the key lacks the route's scope"},
	{Code: ForbiddenMember, Status: 403, Title: "Not a member of the organization", When: "the key's member was removed from the organization"},
	{Code: ForbiddenPlan, Status: 403, Title: "Not included in the plan", When: "the plan does not include the format or the GPU"},
	{Code: NotFound, Status: 404, Title: "Not found", When: "unknown route; unknown or other-organization resource"},
	{Code: MethodNotAllowed, Status: 405, Title: "Method not allowed", When: "known route, other method (`Allow` lists the methods)"},
	{Code: TooLarge, Status: 413, Title: "Request too large", When: "body above the limit"},
	{Code: RequestTimeout, Status: 408, Title: "Request timeout", When: "the request headers did not arrive within the header timeout (docs/operations.md, limits and timeouts)"},
	{Code: HeadersTooLarge, Status: 431, Title: "Request headers too large", When: "request line and headers above 16 KiB"},
	{Code: UnsupportedMedia, Status: 415, Title: "Unsupported media type", When: "wrong Content-Type for the route"},
	{Code: InvalidRequest, Status: 422, Title: "Invalid request", When: "a field is invalid; among them a name, description, URL, key or other text you chose that holds a hidden character (one that shows nothing or reorders the text around it, such as U+202E: docs/api.md, \"Hidden characters\"), the detail naming the field and the character"},
	{Code: RateLimited, Status: 429, Title: "Too many requests", When: "the plan's requests per minute are used up; see `Retry-After` and `X-RateLimit-*`. Also, before a key is accepted: too many requests from the client's address (an IPv6 /64) with API keys or console session cookies the node looked up and did not find (by default 20, then one more every 3 s: `--unknown-keys-per-ip`; `Retry-After`, no `X-RateLimit-*`); a key the node checked before, or a session it saw live, still works (docs/operations.md, Limits and timeouts)", Retry: true},
	{Code: ConcurrencyLimit, Status: 429, Title: "Plan concurrency limit reached", When: "the plan's concurrent jobs are all busy; see `Retry-After`. A media request is refused before its upload is read when admission already sees every slot taken (docs/api.md)", Retry: true},
	{Code: Internal, Status: 500, Title: "Internal error", When: "a bug; the request id finds it in the logs"},
	{Code: Unavailable, Status: 503, Title: "Service unavailable", When: "storage or an actor did not answer in time, or the node is already looking up as many unknown API keys and console sessions as it allows at once (by default 32, from all clients: `--unknown-key-lookups`; `Retry-After: 1`), or the node is low on disk space and stores no new file or record (`--min-free-disk`, docs/operations.md, Disk space; `Retry-After: 30`), or the node is stopping (SIGTERM) and takes no new work: any request but `GET`, `HEAD` and `OPTIONS`, `Retry-After: 1`, the connection closed, so the retry reaches another node (docs/operations.md, One node), or the listener already holds as many connections as it allows, in all or from the client's address (`--max-conns`, `--max-conns-per-ip`; `Retry-After: 1`, the connection closed); retry after `Retry-After`", Retry: true},

	{Code: FileTooLarge, Status: 413, Title: "File too large", When: "a file above its limit: a direct request's file, an upload declared above its kind's limit (`POST /uploads`), a PUT body longer than the declared size, an upload above 95 MB sent to a synchronous detection (the upload stays usable: send it to the async endpoint); for a job, a stored input larger than its kind's limit", Job: true},
	{Code: UploadNotReceived, Status: 409, Title: "Upload not received", When: "the upload has no file yet; finish the PUT, then retry", Retry: true},
	{Code: UploadInUse, Status: 409, Title: "Upload in use", When: "another request is using the upload right now: a job claimed it (the claim lapses after 6 minutes if it died), or another PUT is sending its file (that PUT's lease lapses 1 minute after its last progress)", Retry: true},
	{Code: UploadConsumed, Status: 409, Title: "Upload already used", When: "another request used the upload, or the Idempotency-Key of the request that used it came with other fields; create a new upload, or repeat the original request unchanged"},
	{Code: UploadRejected, Status: 409, Title: "Upload rejected", When: "the uploaded file cannot be used (the upload's `error` says why); create a new upload"},
	{Code: UploadExpired, Status: 410, Title: "Upload expired", When: "the upload is older than 24 hours"},
	{Code: UploadKind, Status: 422, Title: "Upload created for another kind of request", When: "the upload was created for another kind of request (an `image` upload on a detect endpoint, a `detect` upload of a PDF on an image endpoint, ...)"},
	{Code: UploadReceived, Status: 409, Title: "Upload file already received", When: "a PUT to an upload that already has its file"},
	{Code: UploadSignature, Status: 403, Title: "Invalid upload URL signature", When: "the signed upload URL was changed (id, expiry or signature) or is unknown"},
	{Code: UploadURLExpired, Status: 403, Title: "Upload URL expired", When: "the signed upload URL is older than 6 hours"},
	{Code: UploadSizeMismatch, Status: 400, Title: "Body size differs from the declared size", When: "the PUT body is shorter than the declared size; nothing was stored"},
	{Code: UploadAPIKey, Status: 400, Title: "API key not accepted on upload URLs", When: "a request to the upload host carried `X-API-Key`; signed URLs take no key"},
	{Code: OriginNotAllowed, Status: 403, Title: "Origin not allowed", When: "a browser origin other than the configured website origin (CORS preflight or PUT)"},

	{Code: AssetNotFound, Status: 404, Title: "Asset not found", When: "an asset id that is unknown, deleted or another organization's (bulk delete: nothing was deleted)"},
	{Code: AssetVersionConflict, Status: 409, Title: "Asset version conflict", When: "PATCH named a `version` that is not the asset's current one (another edit won); read the asset and retry"},
	{Code: AssetFileExpired, Status: 410, Title: "Asset file expired", When: "the asset's hosted file passed `file_expires_at`; the record stays until deleted"},
	{Code: InvalidCursor, Status: 422, Title: "Invalid cursor", When: "a list cursor that is malformed or was made for other filters or another organization"},
	{Code: RangeNotSatisfiable, Status: 416, Title: "Range not satisfiable", When: "a download `Range` that is malformed or lies outside the file (`Content-Range: bytes */<size>`)"},
	{Code: ForbiddenRole, Status: 403, Title: "Owner or admin role required", When: "deleting assets, and managing webhook endpoints, needs an owner or admin member's key, besides the `assets:delete` or `webhooks:write` scope"},

	{Code: InvalidData, Status: 422, Title: "Invalid data object", When: "`data` is missing, not a JSON object, empty, or above 8 KB (8192 bytes)"},
	{Code: InvalidImage, Status: 422, Title: "Invalid image", When: "the file is not an image we read (JPEG, PNG, GIF, BMP, TIFF, WebP, PPM/PGM), is corrupt, is too small to carry a mark (short side under 256 px), or has transparent pixels and `output_format=jpeg` was asked for", Job: true},
	{Code: ImageTooLarge, Status: 413, Title: "Image too large", When: "the image header announces more than 40 megapixels for embedding or 200 megapixels for detection (checked before decoding), or decoding it would take more memory than the node's whole decode budget (docs/operations.md, \"Decode budgets\")", Job: true},
	{Code: ImageTooComplex, Status: 422, Title: "Image structure too complex", When: "the file's structure exceeds a decode limit, checked before any pixel is decoded: more than 100 JPEG scans, 100,000 PNG chunks or 16 MB of PNG ancillary chunks, 1,024 TIFF IFDs, or 10,000 GIF frames", Job: true},
	{Code: DecodeBusy, Status: 503, Title: "Decode capacity busy", When: "a synchronous detection (or the probe of a PDF, which parses it) waited 2 s for decode memory that other decodes on the node held, or a PDF detection waited for memory for a page while other detections' parses held it (the node fails the newest of them rather than let them wait for each other); retry after `Retry-After` (5 s). Jobs wait for memory instead, and end with it only when every attempt found the memory in use", Job: true, Retry: true},
	{Code: InvalidVideo, Status: 422, Title: "Invalid video", When: "the file sent to `/watermarks/videos` is not an MP4 or MOV video we process: another format, no video stream, corrupt or truncated, frames too small to carry a mark (under half a tile: min(width, 256) × min(height, 256) below 32768 pixels, refused when the embed is sent, before anything is held, the detail naming the frame size and the minimum; or under one tile with a mark that did not read back from the output; not charged), an alpha channel to embed into (the output cannot keep it; not charged), or ffmpeg failed on it (`detail` gives the reason)", Job: true},
	{Code: VideoTooLarge, Status: 413, Title: "Video too large", When: "the video's duration, frame size or frame count (read by ffprobe before decoding) is above the video limits (the detail names the value, the limit and what to send: parts of at most 10 min, frames scaled down to a size it names), or its frames times their size are more work than one job finishes before its deadline (the detail says how many frames of its size fit: send it in shorter parts or with smaller frames); or, as a job's `error_code`, the embed decoded more frames than the file declared and its price covers (the credits held; a fragmented MP4 states no frame count), not charged", Job: true},
	{Code: InvalidDocument, Status: 422, Title: "Invalid PDF", When: "the file sent to `/watermarks/documents` is not a PDF we process: another format, broken beyond repair, with a page tree that names a page tree node more than once (or a page at two places with different inherited sizes), encrypted (with a password or only an owner password, whatever its layout), digitally signed (a re-save would break the signature), an XFA form, or carrying JavaScript (`detail` says which: \"the PDF cannot be watermarked: ...\"). A detection (`/watermarks/documents/detect`, \"cannot be checked for a watermark: ...\") refuses only what it cannot read (another format, broken, a page tree node named twice, encrypted with a user password): a signed document, an XFA form, one with JavaScript and one encrypted with an owner password only (which opens without a password) are read, so a document marked and then signed or protected is still found", Job: true},
	{Code: DocumentTooLarge, Status: 413, Title: "PDF too large", When: "the PDF is above the page limit or its parse budgets (object nesting, decompressed stream sizes, 200,000 objects, 16 million syntax tokens), or a detection would render more pixels, or take longer to render, than its size allows (2,000 megapixels plus 2,000 a byte of the file, at most 24,000; 60 s plus 10 s a megabyte plus 40 ms a megapixel rendered; docs/operations.md), or parsing it would take more memory than the node's whole decode budget (estimated before parsing: docs/operations.md, \"Decode budgets\"), or a detection finds a page that cannot be analysed beside the parse within that budget", Job: true},
	{Code: MediaUnavailable, Status: 503, Title: "Media processing unavailable", When: "the node that took the request cannot process its kind now: ffmpeg/ffprobe (videos) or mutool (PDFs) is not installed (`scripts/setup.sh` installs them). Answered with `Retry-After` before anything is stored, held or charged; a job that meets the same on its worker fails at once with this code, uncharged, without retries. A replay of an earlier request with its Idempotency-Key still answers that request", Job: true, Retry: true},
	{Code: InvalidIdempotency, Status: 422, Title: "Invalid Idempotency-Key", When: "`Idempotency-Key` is not 8 to 128 letters, digits, hyphens or underscores"},
	{Code: InvalidAccelerator, Status: 422, Title: "Invalid accelerator", When: "`accelerator` is not `cpu` or `gpu`"},
	{Code: WebhookNotFound, Status: 404, Title: "Webhook not found", When: "the `webhook_id` names no enabled webhook endpoint of the organization (unknown, deleted or disabled); nothing was created"},
	{Code: StorageDestination, Status: 422, Title: "Storage destination not usable", When: "the `storage_destination_id` is unknown, disabled, or not verified since its last change (`POST /storage/destinations/{id}/verify`)"},
	{Code: StorageNotFound, Status: 404, Title: "Storage destination not found", When: "a storage destination id that is unknown or another organization's"},
	{Code: StorageLimit, Status: 409, Title: "Too many storage destinations", When: "the organization already has 10 storage destinations; delete one first"},
	{Code: StorageVerify, Status: 422, Title: "Storage destination verification failed", When: "the probe round trip (conditional create, read back, delete) failed; `detail` names the step and the missing permission, and the destination's `last_error` keeps it"},
	{Code: StorageObjectGone, Status: 410, Title: "Stored object unavailable", When: "`GET /storage/deliveries/{id}/content`, and `GET /assets/{id}/content` or a job's result once the file is stored in the customer's bucket (staging deleted): the delivery is not stored, its destination was deleted, or the object in the bucket is gone or changed since it was delivered (its ETag differs)"},
	{Code: StorageConflict, Status: 409, Title: "Result already has a storage destination", When: "`POST /storage/destinations/{id}/deliveries`: the result already belongs to another delivery (its job's own, or a move to another destination or key); a result has one destination and key, so repeat the same move or retry that delivery"},
	{Code: IdempotencyConflict, Status: 409, Title: "Idempotency-Key reused with different inputs", When: "the `Idempotency-Key` was used before with another file, data or option"},
	{Code: GPUUnavailable, Status: 503, Title: "GPU unavailable", When: "`accelerator=gpu` on a deployment without a GPU codec path; retry later or use `cpu` (`Retry-After`); a key already used with another accelerator gets 409 `idempotency_conflict` instead", Retry: true},
	{Code: ResultGone, Status: 410, Title: "Result no longer available", When: "the job's result is older than 24 hours, or its watermarked asset was deleted; also a replay of that request, sync or async"},
	{Code: ProcessingError, Status: 500, Title: "Processing failed", When: "the job failed for good in processing (after its retries); also the status of a failed job whose error code this table does not list", Job: true},
	{Code: DeadlineExceeded, Status: 503, Title: "Processing deadline exceeded", When: "the job did not finish within its deadline (30 minutes for images)", Job: true},
	{Code: WorkerLost, Status: 503, Title: "Processing interrupted", When: "the job's last attempt lost its worker (node died) and no attempt was left", Job: true},

	{Code: UnsupportedFileType, Status: 422, Title: "Unsupported file type", When: "a batch item's filename (or zip member) has no extension of a media kind we process (an image type, `pdf`, `mp4`, `m4v` or `mov`); nothing was created"},
	{Code: InvalidZip, Status: 422, Title: "Invalid batch zip", When: "the batch zip or its manifest breaks a rule of spec 8: not a zip, a member path that is absolute or holds `..` or a backslash, an encrypted member, a compression method other than stored or deflate, the manifest and the zip not listing the same files once each, or a system entry (`__MACOSX/`, `.DS_Store`, `Thumbs.db`, `desktop.ini`) listed in the manifest; checked from the central directory before anything is unpacked"},
	{Code: ZipTooLarge, Status: 413, Title: "Batch zip too large", When: "the batch zip unpacks to more than 512 MB, holds a member compressed more than 100:1, or has a central directory above 1 MiB"},
	{Code: BatchExpired, Status: 410, Title: "Batch expired", When: "the batch is a draft that was not started within 24 hours (start and archive)"},
	{Code: ArchiveExpired, Status: 410, Title: "Batch archive expired", When: "the batch's results zip is older than 24 hours"},
	{Code: Cancelled, Status: 409, Title: "Cancelled", When: "the job was cancelled (a file of a cancelled batch)", Job: true},
	{Code: BatchNotStarted, Status: 409, Title: "Batch not started", When: "the batch archive of a batch that is still a draft"},
	{Code: ArchiveNotRequested, Status: 409, Title: "Archive not requested", When: "the batch archive of a batch created without `archive: true`"},
	{Code: ArchiveTooLarge, Status: 409, Title: "Archive too large", When: "the batch's results exceed 1 GB"},
	{Code: ArchiveUnavailable, Status: 409, Title: "Archive unavailable", When: "no file of the batch succeeded, the batch was cancelled, or its zip could not be built"},
	{Code: ResultUnavailable, Status: 410, Title: "Result unavailable", When: "in a batch archive's `manifest.json`, the `error_code` of a file whose result was deleted before the zip was made"},

	{Code: SessionRequired, Status: 401, Title: "Console session required", When: "a console call (`/console/...`) without a live signed-in session (missing, expired, signed out, or ended by a password change), or with an `X-API-Key` (the console never takes keys); an API route called with only a console session cookie answers 401 `unauthorized`"},
	{Code: CSRFFailed, Status: 403, Title: "CSRF check failed", When: "a state-changing console request whose CSRF token (form field `csrf` or header `X-CSRF-Token`) is missing or not the session's, or whose `Origin` is another site; nothing was changed"},
}

// byCode indexes table; built once at initialisation and only read afterwards.
var byCode = func() map[Code]int {
	m := make(map[Code]int, len(table))
	for i, e := range table {
		m[e.Code] = i
	}
	return m
}()

// Lookup returns the table's entry for code.
func Lookup(code Code) (Entry, bool) {
	i, ok := byCode[code]
	if !ok {
		return Entry{}, false
	}
	return table[i], true
}

// All returns a copy of the table, in documentation order.
func All() []Entry { return append([]Entry(nil), table...) }

// ForJob returns the entry a failed job with error code answers with: the code's own entry when it is a job
// error code, else processing_error (a worker reported a code the table does not know: the job still failed,
// and its error_code is shown as it is).
func ForJob(code string) Entry {
	if e, ok := Lookup(Code(code)); ok && e.Job {
		return e
	}
	e, _ := Lookup(ProcessingError)
	return e
}
