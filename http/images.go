package http

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"filigrane/actors"
	"filigrane/actors/jobstate"
	"filigrane/codec"
	"filigrane/codec/imageio"
)

// Limits of direct image requests. Embedding takes 20 MB (spec 8); detection is not given a direct limit by
// the spec, we take 40 MB ("files over 40 MB are sent through an upload").
const (
	maxDirectEmbedImage  = 20_000_000
	maxDirectDetectImage = 40_000_000
	// maxSyncDetect is the largest file a synchronous detection answers in the request (spec 8: 95 MB).
	maxSyncDetect = 95_000_000
	// probeBytes is how much of a stored file is read to learn its format and dimensions from the header.
	probeBytes = 2 << 20
)

func (s *Server) imageRoutes() {
	embed := []string{actors.ScopeEmbed}
	detect := []string{actors.ScopeDetect}
	either := []string{actors.ScopeEmbed, actors.ScopeDetect}
	s.router.handle("POST", "/watermarks/images", s.authed(embed, s.acceptImage(jobstate.OperationEmbed, false)))
	s.router.handle("POST", "/watermarks/images/async", s.authed(embed, s.acceptImage(jobstate.OperationEmbed, true)))
	s.router.handle("POST", "/watermarks/images/detect", s.authed(detect, s.acceptImage(jobstate.OperationDetect, false)))
	s.router.handle("POST", "/watermarks/images/detect/async", s.authed(detect, s.acceptImage(jobstate.OperationDetect, true)))
	for _, base := range []string{"/watermarks/jobs/{request_id}", "/watermarks/detection-jobs/{request_id}"} {
		s.router.handle("GET", base, s.authed(either, s.jobStatus))
		s.router.handle("GET", base+"/result", s.authed(either, s.jobResult))
	}
}

// requestIDFor returns the request id of a new request. With an Idempotency-Key it is derived from the
// organization and the key, so that every replay (and every concurrent duplicate) addresses the same job
// actor, which decides once whether the inputs match.
func requestIDFor(orgID, idemKey string) string {
	if idemKey == "" {
		return newRequestID()
	}
	sum := sha256.Sum256([]byte("filigrane/idempotency\x00" + orgID + "\x00" + idemKey))
	return "req_" + hex.EncodeToString(sum[:])
}

func randomSuffix() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// jobOptions are the validated query options of an embed or detect request.
type jobOptions struct {
	accelerator jobstate.Accelerator
	webhookID   string
}

func (s *Server) parseJobOptions(ctx *fasthttp.RequestCtx, p *principal, op jobstate.Operation) (jobOptions, *apiError) {
	args := ctx.QueryArgs()
	acc, err := jobstate.ParseAccelerator(string(args.Peek("accelerator")))
	if err != nil {
		return jobOptions{}, newAPIError(CodeInvalidAccelerator, "accelerator must be cpu or gpu")
	}
	if acc == jobstate.AcceleratorGPU {
		if !p.Plan.GPU {
			return jobOptions{}, newAPIError(CodeForbiddenPlan, "the %s plan does not include GPU processing", p.Plan.Name)
		}
		ctx.Response.Header.Set("Retry-After", "30")
		return jobOptions{}, newAPIError(CodeGPUUnavailable, "no GPU is available on this deployment; retry later or use accelerator=cpu")
	}
	opts := jobOptions{accelerator: acc}
	if wh := string(args.Peek("webhook_id")); wh != "" {
		// Webhook endpoints cannot be created yet, so every id is unknown.
		return jobOptions{}, newAPIError(CodeWebhookNotFound, "webhook %q does not exist or is disabled", truncate(wh, 64))
	}
	dest, key := string(args.Peek("storage_destination_id")), string(args.Peek("storage_key"))
	if (dest != "" || key != "") && op != jobstate.OperationEmbed {
		return jobOptions{}, newAPIError(CodeInvalidRequest, "storage_destination_id and storage_key apply to embedding only")
	}
	if key != "" && dest == "" {
		return jobOptions{}, newAPIError(CodeInvalidRequest, "storage_key needs storage_destination_id")
	}
	if dest != "" {
		return jobOptions{}, newAPIError(CodeStorageDestination, "storage destination %q is unknown or not verified", truncate(dest, 64))
	}
	if !p.Plan.HasFormat("image") {
		return jobOptions{}, newAPIError(CodeForbiddenPlan, "the %s plan does not include images", p.Plan.Name)
	}
	return opts, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// validateData checks the data field: a non-empty JSON object of at most 8 KB. It returns the watermark id.
func validateData(data []byte) (codec.ID, *apiError) {
	if data == nil {
		return codec.ID{}, newAPIError(CodeInvalidData, "send a non-empty JSON object in the data field")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		return codec.ID{}, newAPIError(CodeInvalidData, "data must be a JSON object")
	}
	if len(obj) == 0 {
		return codec.ID{}, newAPIError(CodeInvalidData, "data must not be an empty object")
	}
	id, err := codec.IDFromJSON(data)
	if err != nil {
		return codec.ID{}, newAPIError(CodeInvalidData, "data cannot be canonicalized: %v", err)
	}
	return id, nil
}

// probeImage reads the stored file's header: format and pixel count, before any pixel is decoded. maxPixels is
// the operation's limit (embedding 40 MP, detection actors.MaxDetectPixels).
func (s *Server) probeImage(ctx context.Context, key string, maxPixels int64) (string, *apiError) {
	r, err := s.cfg.Blobs.Get(ctx, key, 0, probeBytes)
	if err != nil {
		return "", newAPIError(CodeUnavailable, "stored file unavailable")
	}
	head, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		return "", newAPIError(CodeUnavailable, "stored file unavailable")
	}
	format, cfg, err := imageio.DecodeConfigBytes(head)
	if err != nil {
		return "", newAPIError(CodeInvalidImage, "the file is not an image we can read: %v", err)
	}
	if int64(cfg.Width)*int64(cfg.Height) > maxPixels {
		return "", newAPIError(CodeImageTooLarge, "the image has %dx%d pixels; the limit is %d megapixels", cfg.Width, cfg.Height, maxPixels/1_000_000)
	}
	if cfg.Width < 1 || cfg.Height < 1 {
		return "", newAPIError(CodeInvalidImage, "the image has no pixels")
	}
	return strings.ToUpper(format), nil
}

// acceptImage handles the four image endpoints.
func (s *Server) acceptImage(op jobstate.Operation, async bool) func(*fasthttp.RequestCtx, *principal, map[string]string) {
	return func(ctx *fasthttp.RequestCtx, p *principal, _ map[string]string) {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if aerr := s.acceptImageErr(c, ctx, p, op, async); aerr != nil {
			ctx.SetConnectionClose() // the body may be unread
			writeProblem(ctx, aerr.code, aerr.detail)
		}
	}
}

func (s *Server) acceptImageErr(c context.Context, ctx *fasthttp.RequestCtx, p *principal, op jobstate.Operation, async bool) *apiError {
	opts, aerr := s.parseJobOptions(ctx, p, op)
	if aerr != nil {
		return aerr
	}
	idem := string(ctx.Request.Header.Peek("Idempotency-Key"))
	if idem != "" && !jobstate.ValidIdempotencyKey(idem) {
		return newAPIError(CodeInvalidIdempotency, "Idempotency-Key must be 8 to 128 letters, digits, hyphens or underscores")
	}
	reqID := requestIDFor(p.Key.OrgID, idem)
	limit := int64(maxDirectEmbedImage)
	if op == jobstate.OperationDetect {
		limit = maxDirectDetectImage
	}
	key := "inputs/" + p.Key.OrgID + "/" + reqID + "/" + randomSuffix()
	form, err := readMediaForm(c, string(ctx.Request.Header.ContentType()), bodyReader(ctx), s.cfg.Blobs, key, limit)
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			return ae
		}
		s.cfg.Logger.Error().Err(err).Msg("read form")
		return newAPIError(CodeUnavailable, "could not store the file")
	}
	keep := false
	defer func() {
		if !keep && form.File != nil {
			_ = s.cfg.Blobs.Delete(context.WithoutCancel(c), form.File.Key)
		}
	}()
	switch {
	case form.File != nil && form.UploadID != "":
		return newAPIError(CodeInvalidRequest, "send either a file or an upload_id, not both")
	case form.File == nil && form.UploadID == "":
		return newAPIError(CodeInvalidRequest, "send the media in the file field, or an upload_id")
	case form.UploadID != "":
		file, aerr := s.claimUpload(c, p, form.UploadID, reqID, op)
		if aerr != nil {
			return aerr
		}
		// The upload owns its file: whatever happens here, it is not deleted with the request.
		return s.acceptFromUpload(c, ctx, p, op, async, opts, idem, reqID, form, file)
	}
	return s.acceptFile(c, ctx, p, op, async, opts, idem, reqID, form, form.File, &keep)
}

// acceptFromUpload runs the request on a claimed upload and records the outcome on the upload.
func (s *Server) acceptFromUpload(c context.Context, ctx *fasthttp.RequestCtx, p *principal, op jobstate.Operation, async bool,
	opts jobOptions, idem, reqID string, form *mediaForm, file *storedFile) *apiError {
	kept := true
	aerr := s.acceptFile(c, ctx, p, op, async, opts, idem, reqID, form, file, &kept)
	outcome := uploadConsumed
	if aerr != nil {
		outcome = uploadRejected
		switch aerr.code {
		case CodeInsufficientCredits, CodeConcurrencyLimit, CodeRateLimited, CodeUnavailable, CodeTooLarge,
			CodeIdempotencyConflict, CodeInvalidData, CodeInvalidAccelerator, CodeForbiddenPlan, CodeGPUUnavailable,
			CodeDecodeBusy:
			// Refusals about the request, not the file: the upload stays usable.
			outcome = uploadReleased
		}
	}
	s.settleUpload(context.WithoutCancel(c), p, form.UploadID, reqID, outcome, aerr)
	return aerr
}

// acceptFile validates the stored file and runs or queues the work. *keep tells the caller whether the file
// must stay stored (a new job owns it).
func (s *Server) acceptFile(c context.Context, ctx *fasthttp.RequestCtx, p *principal, op jobstate.Operation, async bool,
	opts jobOptions, idem, reqID string, form *mediaForm, file *storedFile, keep *bool) *apiError {
	var aerr *apiError
	var wm codec.ID
	if op == jobstate.OperationEmbed {
		if wm, aerr = validateData(form.Data); aerr != nil {
			return aerr
		}
	}
	maxPixels := int64(actors.MaxImagePixels)
	if op == jobstate.OperationDetect {
		maxPixels = actors.MaxDetectPixels
	}
	format, aerr := s.probeImage(c, file.Key, maxPixels)
	if aerr != nil {
		return aerr
	}
	price := s.cfg.Catalog.Prices.ImageEmbed
	if op == jobstate.OperationDetect {
		price = s.cfg.Catalog.Prices.Detect
	}
	if op == jobstate.OperationDetect && !async {
		if file.Info.Size > maxSyncDetect {
			return newAPIError(CodeTooLarge, "synchronous detection answers files up to %d bytes; use the async endpoint", maxSyncDetect)
		}
		return s.detectNow(c, ctx, p, reqID, file, price)
	}
	spec := jobstate.Spec{
		RequestID: reqID, OrgID: p.Key.OrgID, Operation: op, Media: jobstate.MediaImage, Format: format,
		FrameCount: 1, AcceleratorRequested: opts.accelerator, WebhookID: opts.webhookID, IdempotencyKey: idem,
		Input: jobstate.Input{BlobKey: file.Key, SHA256: file.Info.SHA256, Size: file.Info.Size,
			Filename: safeOrDefault(file.Filename), ContentType: "image/" + strings.ToLower(format)},
	}
	if op == jobstate.OperationEmbed {
		spec.WatermarkID = wm.String()
	}
	jobs := actors.JobClient{Caller: s.cfg.Caller}
	rep, err := jobs.Submit(c, actors.JobSubmit{Spec: spec, Hold: price, Slot: true})
	if err != nil {
		s.cfg.Logger.Error().Err(err).Str("job", reqID).Msg("submit job")
		return newAPIError(CodeUnavailable, "the job could not be accepted in time; retry with the same Idempotency-Key")
	}
	if aerr := reserveRefusal(ctx, p, rep.Code, price); aerr != nil {
		return aerr
	}
	switch rep.Code {
	case actors.CodeOK:
	case actors.CodeIdempotencyConflict:
		return newAPIError(CodeIdempotencyConflict, "this Idempotency-Key was used with different inputs or options")
	default:
		s.cfg.Logger.Error().Str("job", reqID).Str("code", rep.Code).Str("detail", rep.Detail).Msg("submit job")
		return newAPIError(CodeUnavailable, "the job could not be accepted; retry with the same Idempotency-Key")
	}
	*keep = !rep.Replayed
	rec := rep.Record
	if async {
		s.writeReceipt(ctx, p, rec, 202)
		return nil
	}
	return s.awaitAndAnswer(c, ctx, p, rec)
}

func safeOrDefault(name string) string {
	if n := actors.SafeFilename(name); n != "" {
		return n
	}
	return "image"
}

func retryAfterSeconds(p actors.Plan) int {
	if d := time.Duration(p.JobRetryAfter); d > 0 {
		return int(d / time.Second)
	}
	return 2
}

// awaitAndAnswer waits up to the configured sync wait for the outcome; past that the caller gets the receipt and the job
// goes on.
func (s *Server) awaitAndAnswer(c context.Context, ctx *fasthttp.RequestCtx, p *principal, rec *jobstate.Record) *apiError {
	if !rec.Committed() {
		wctx, cancel := context.WithTimeout(c, s.cfg.SyncWait)
		rep, err := actors.JobClient{Caller: s.cfg.Caller}.Await(wctx, p.Key.OrgID, rec.RequestID)
		cancel()
		if err == nil && rep.Code == actors.CodeOK && rep.Record != nil {
			rec = rep.Record
		} else if rep2, err2 := (actors.JobClient{Caller: s.cfg.Caller}).Get(c, p.Key.OrgID, rec.RequestID); err2 == nil && rep2.Record != nil {
			rec = rep2.Record
		}
	}
	if !rec.Committed() {
		s.writeReceipt(ctx, p, rec, 202)
		return nil
	}
	return s.writeResult(c, ctx, p, rec)
}

func (s *Server) writeReceipt(ctx *fasthttp.RequestCtx, p *principal, rec *jobstate.Record, status int) {
	ctx.Response.Header.Set("Location", rec.StatusURL())
	ctx.Response.Header.Set("Retry-After", strconv.Itoa(retryAfterSeconds(p.Plan)))
	writeJSON(ctx, status, rec.Receipt())
}

// writeResult answers with a committed job's outcome: the file or detection JSON, or the failure.
func (s *Server) writeResult(c context.Context, ctx *fasthttp.RequestCtx, p *principal, rec *jobstate.Record) *apiError {
	now := s.cfg.Clock.Now()
	if rec.Status == jobstate.StatusFailed {
		writeFailedJob(ctx, rec)
		return nil
	}
	if !rec.ResultAvailable(now) {
		return newAPIError(CodeResultGone, "the result expired at %s", rec.ResultExpiresAt.Format(time.RFC3339))
	}
	out := rec.Output
	if rec.Operation == jobstate.OperationEmbed {
		as, _, err := actors.Assets{Store: s.cfg.Store}.Get(c, out.AssetID)
		if err != nil || as.DeletedAt != nil {
			return newAPIError(CodeResultGone, "the watermarked asset was deleted")
		}
	}
	body, err := s.openBlobBody(out.BlobKey, 0, -1)
	if err != nil {
		return newAPIError(CodeResultGone, "the result file is no longer stored")
	}
	h := &ctx.Response.Header
	h.Set("X-Service-Accelerator", string(out.Accelerator))
	if rec.Operation == jobstate.OperationEmbed {
		h.Set("X-Watermark-ID", out.WatermarkID)
		h.Set("X-Asset-ID", out.AssetID)
		h.Set("X-Source-Asset-ID", out.SourceAssetID)
		h.Set("Content-Disposition", `attachment; filename="`+out.Filename+`"`)
	}
	ctx.SetStatusCode(200)
	ctx.SetContentType(out.ContentType)
	sendBlobBody(ctx, body, out.Size)
	return nil
}

// failureStatus maps a failed job's error code to the HTTP status of its result and replays.
func failureStatus(code string) Code {
	switch code {
	case actors.CodeInvalidImage:
		return CodeInvalidImage
	case actors.CodeImageTooLarge:
		return CodeImageTooLarge
	case actors.CodeImageTooComplex:
		return CodeImageTooComplex
	case actors.CodeDecodeBusy:
		return CodeDecodeBusy
	case jobstate.CodeDeadlineExceeded:
		return CodeDeadlineExceeded
	case jobstate.CodeWorkerLost:
		return CodeWorkerLost
	case jobstate.CodeCancelled:
		return CodeCancelled
	}
	return CodeProcessingError
}

// writeFailedJob answers a finally failed job. Clients of this API poll the result and look for
// "status": "failed" (DESIGN.md 5), so this problem body carries the job status in `status` and the HTTP
// status only in the status line; it is the one problem body that departs from RFC 9457's numeric status.
func writeFailedJob(ctx *fasthttp.RequestCtx, rec *jobstate.Record) {
	code := failureStatus(rec.ErrorCode)
	entry := problemTable[code]
	body, _ := encodeJSON(map[string]any{
		"type": problemTypeBase + string(code), "title": entry.Title, "status": "failed",
		"detail": rec.ErrorDetail, "code": code, "error_code": rec.ErrorCode, "request_id": rec.RequestID,
	})
	ctx.SetStatusCode(entry.Status)
	ctx.SetContentType("application/problem+json")
	ctx.SetBody(body)
}

// loadJob reads a job of the caller's organization; a job of another organization is not found.
func (s *Server) loadJob(ctx *fasthttp.RequestCtx, p *principal, id string) (*jobstate.Record, bool) {
	if !jobstate.ValidRequestID(id) {
		writeProblem(ctx, CodeNotFound, "no such job")
		return nil, false
	}
	c, cancel := context.WithTimeout(context.Background(), s.cfg.ActorTimeout)
	defer cancel()
	rep, err := actors.JobClient{Caller: s.cfg.Caller}.Get(c, p.Key.OrgID, id)
	if err != nil {
		s.unavailable(ctx, err)
		return nil, false
	}
	if rep.Code != actors.CodeOK || rep.Record == nil {
		writeProblem(ctx, CodeNotFound, "no such job")
		return nil, false
	}
	rec := rep.Record
	scope := actors.ScopeEmbed
	if rec.Operation == jobstate.OperationDetect {
		scope = actors.ScopeDetect
	}
	if !p.Key.HasScope(scope) {
		writeProblem(ctx, CodeForbiddenScope, "the key lacks the scope "+scope)
		return nil, false
	}
	return rec, true
}

func (s *Server) jobStatus(ctx *fasthttp.RequestCtx, p *principal, params map[string]string) {
	rec, ok := s.loadJob(ctx, p, params["request_id"])
	if !ok {
		return
	}
	s.writeReceipt(ctx, p, rec, 200)
}

func (s *Server) jobResult(ctx *fasthttp.RequestCtx, p *principal, params map[string]string) {
	rec, ok := s.loadJob(ctx, p, params["request_id"])
	if !ok {
		return
	}
	if !rec.Committed() {
		s.writeReceipt(ctx, p, rec, 202)
		return
	}
	c, cancel := context.WithTimeout(context.Background(), s.cfg.ActorTimeout)
	defer cancel()
	if aerr := s.writeResult(c, ctx, p, rec); aerr != nil {
		writeProblem(ctx, aerr.code, aerr.detail)
	}
}

// syncDecodeWait is how long a synchronous detection waits for decode memory before answering 503
// decode_busy; decodeBusyRetryAfter is the Retry-After of that answer, in seconds.
const (
	syncDecodeWait       = 2 * time.Second
	decodeBusyRetryAfter = "5"
)

// detectNow runs a synchronous image detection: it never becomes a job. The credit is held and a
// concurrency slot taken for the duration, then charged (or released when detection failed). When the client
// closes the connection before the answer, the work is cancelled and the hold released: nothing is charged.
func (s *Server) detectNow(c context.Context, ctx *fasthttp.RequestCtx, p *principal, reqID string, f *storedFile, price int64) *apiError {
	orgs := s.cfg.Orgs
	rep, err := orgs.Reserve(c, actors.OrgReserve{OrgID: p.Key.OrgID, Op: reqID, Credits: price, Slot: true})
	if err != nil {
		return newAPIError(CodeUnavailable, "could not reserve credits in time")
	}
	if aerr := reserveRefusal(ctx, p, rep.Code, price); aerr != nil {
		return aerr
	}
	if rep.Code != actors.CodeOK {
		return newAPIError(CodeUnavailable, "could not reserve credits: %s", rep.Code)
	}
	settle := func(charge bool) {
		sctx := context.WithoutCancel(c)
		var r *actors.OrgReply
		var err error
		if charge {
			r, err = orgs.Charge(sctx, actors.OrgCharge{OrgID: p.Key.OrgID, Op: reqID, Credits: price})
		} else {
			r, err = orgs.Release(sctx, actors.OrgRelease{OrgID: p.Key.OrgID, Op: reqID})
		}
		if err != nil || r.Code != actors.CodeOK {
			s.cfg.Logger.Error().Err(err).Interface("reply", r).Str("request", reqID).Msg("settle synchronous detection")
		}
	}
	// Watch the connection only once the hold exists: a reservation cut short by the cancel could be placed
	// and never released.
	c, stopWatch := watchDisconnect(c, ctx)
	defer stopWatch()
	gone := func() *apiError {
		settle(false)
		s.cfg.Logger.Info().Str("request", reqID).Msg("client closed the connection during synchronous detection; not charged")
		return newAPIError(CodeUnavailable, "the client closed the connection")
	}
	release, err := s.cfg.Pool.Acquire(c)
	if err != nil {
		if clientGone(c) {
			return gone()
		}
		settle(false)
		return newAPIError(CodeUnavailable, "no worker became free in time")
	}
	det, perr := s.cfg.Media.DetectStored(c, p.Key.OrgID, f.Key, syncDecodeWait)
	release()
	if clientGone(c) {
		return gone() // even when detection finished: the client never gets the answer
	}
	if perr != nil {
		settle(false)
		if perr.Code == actors.CodeDecodeBusy {
			ctx.Response.Header.Set("Retry-After", decodeBusyRetryAfter)
		}
		return &apiError{code: failureStatus(perr.Code), detail: perr.Detail}
	}
	settle(true)
	ctx.Response.Header.Set("X-Service-Accelerator", string(jobstate.AcceleratorCPU))
	writeJSON(ctx, 200, det)
	return nil
}

// reserveRefusal answers the org actor's refusals to hold credits or a slot: 402, or 429 with the plan's
// Retry-After. Other codes are the caller's to handle.
func reserveRefusal(ctx *fasthttp.RequestCtx, p *principal, code string, price int64) *apiError {
	switch code {
	case actors.CodeInsufficientCredits:
		return newAPIError(CodeInsufficientCredits, "the organization has too few credits for this request (%d needed)", price)
	case actors.CodeConcurrencyLimit:
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(retryAfterSeconds(p.Plan)))
		return newAPIError(CodeConcurrencyLimit, "the %s plan runs %d jobs at once", p.Plan.Name, p.Plan.Concurrency)
	}
	return nil
}

// String renders an apiError for logs.
func (e *apiError) String() string { return fmt.Sprintf("%s (%s)", e.code, e.detail) }
