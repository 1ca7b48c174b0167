package http

import (
	"context"
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
	"filigrane/actors/mediakind"
	"filigrane/codec"
	"filigrane/codec/imageio"
	"filigrane/gpu"
	"filigrane/internal/problem"
	"filigrane/internal/reqlog"
	"filigrane/persistence"
	"filigrane/persistence/diskspace"
)

// probeBytes is how much of a stored file is read to learn its format and dimensions from the header.
const probeBytes = 2 << 20

// mediaRoutes registers the four endpoints of every kind of the media-kind table that this node's
// processor has an adapter for (a kind without one answers 404), and the job endpoints.
func (s *Server) mediaRoutes() {
	embed := []string{actors.ScopeEmbed}
	detect := []string{actors.ScopeDetect}
	either := []string{actors.ScopeEmbed, actors.ScopeDetect}
	for _, kind := range mediakind.Table() {
		if !s.cfg.Media.Supports(kind.Media) {
			continue
		}
		base := kind.RoutePrefix
		s.router.handle("POST", base, s.authed(embed, s.acceptMedia(kind, jobstate.OperationEmbed, false)))
		s.router.handle("POST", base+"/async", s.authed(embed, s.acceptMedia(kind, jobstate.OperationEmbed, true)))
		s.router.handle("POST", base+"/detect", s.authed(detect, s.acceptMedia(kind, jobstate.OperationDetect, false)))
		s.router.handle("POST", base+"/detect/async", s.authed(detect, s.acceptMedia(kind, jobstate.OperationDetect, true)))
	}
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

func randomSuffix() string { return actors.RandomToken() }

// jobOptions are the validated options of an embed or detect request.
type jobOptions struct {
	accelerator jobstate.Accelerator
	webhookID   string
	storageDest string
	storageKey  string
	// outputFormat is an image embed's output format; empty (PNG) for every other request.
	outputFormat jobstate.OutputFormat
	// container is the container a video embed's output_format names (mp4 or mov), checked against the one
	// the probed video is written in (checkContainer); empty when none was sent.
	container string
}

// jobOptionNames are the options an embed or detect request takes, as query parameters (spec 4.1) or as
// form fields: some clients send every field in the body. Either place is honoured, never ignored.
var jobOptionNames = []string{"accelerator", "webhook_id", "storage_destination_id", "storage_key", "output_format"}

// mergeJobOptions combines the query's options with the form's: an option may be sent in either place, and
// sending it in both with different values is refused rather than one of them being silently dropped.
func mergeJobOptions(query *fasthttp.Args, form map[string]string) (func(string) string, *apiError) {
	merged := make(map[string]string, len(jobOptionNames))
	for _, name := range jobOptionNames {
		q, f := string(query.Peek(name)), form[name]
		if q != "" && f != "" && q != f {
			return nil, newAPIError(CodeInvalidRequest, "%s is sent in the query and in the form with different values; send it once", name)
		}
		if q == "" {
			q = f
		}
		merged[name] = q
	}
	return func(name string) string { return merged[name] }, nil
}

// parseJobOptions validates the options that get returns. accelerator=gpu passes (after the plan check):
// whether a GPU runs it, the CPU does, or strict mode refuses it is decided later (gpuRefusal).
func (s *Server) parseJobOptions(ctx *fasthttp.RequestCtx, p *principal, kind mediakind.Kind, op jobstate.Operation, get func(string) string) (jobOptions, *apiError) {
	acc, err := jobstate.ParseAccelerator(get("accelerator"))
	if err != nil {
		return jobOptions{}, newAPIError(CodeInvalidAccelerator, "accelerator must be cpu or gpu")
	}
	if acc == jobstate.AcceleratorGPU && !p.Plan.GPU {
		return jobOptions{}, newAPIError(CodeForbiddenPlan, "the %s plan does not include GPU processing", p.Plan.Name)
	}
	opts := jobOptions{accelerator: acc}
	if wh := get("webhook_id"); wh != "" {
		if aerr := s.usableWebhook(ctx, p, wh); aerr != nil {
			return jobOptions{}, aerr
		}
		opts.webhookID = wh
	}
	dest, key := get("storage_destination_id"), get("storage_key")
	if (dest != "" || key != "") && op != jobstate.OperationEmbed {
		return jobOptions{}, newAPIError(CodeInvalidRequest, "storage_destination_id and storage_key apply to embedding only")
	}
	if key != "" && dest == "" {
		return jobOptions{}, newAPIError(CodeInvalidRequest, "storage_key needs storage_destination_id")
	}
	if dest != "" {
		if aerr := s.usableDestination(ctx, p.Key.OrgID, dest, key); aerr != nil {
			return jobOptions{}, aerr
		}
		opts.storageDest, opts.storageKey = dest, key
	}
	if aerr := parseOutputFormat(kind, op, get("output_format"), &opts); aerr != nil {
		return jobOptions{}, aerr
	}
	if !p.Plan.HasFormat(string(kind.Media)) {
		return jobOptions{}, newAPIError(CodeForbiddenPlan, "the %s plan does not include %ss", p.Plan.Name, kind.Noun)
	}
	return opts, nil
}

// parseOutputFormat validates output_format: on an image embed png (the default, also when empty), jpeg (or
// jpg) or webp, in any case. A document embed writes its one format, so only its name (pdf) is accepted
// there, as a no-op. A video embed keeps its source's container, so mp4 or mov is accepted and checked once the
// file is probed (checkContainer); a detection writes no file and takes none.
func parseOutputFormat(kind mediakind.Kind, op jobstate.Operation, v string, opts *jobOptions) *apiError {
	if v == "" {
		return nil
	}
	switch {
	case op != jobstate.OperationEmbed:
		return newAPIError(CodeInvalidRequest, "output_format applies to embedding only")
	case kind.Media == jobstate.MediaVideo:
		_, mov := kind.OutputType("MOV")
		for _, ext := range []string{kind.OutputExt, mov} {
			if strings.EqualFold(v, ext) {
				opts.container = ext
				return nil
			}
		}
		return newAPIError(CodeInvalidRequest, "output_format of a video embed can only be %s or %s, the container "+
			"of the source, which the output keeps; png, jpeg and webp apply to images", kind.OutputExt, mov)
	case kind.Media != jobstate.MediaImage:
		if strings.EqualFold(v, kind.OutputExt) {
			return nil
		}
		return newAPIError(CodeInvalidRequest, "output_format of a %s embed can only be %s; png, jpeg and webp apply to images",
			kind.Noun, kind.OutputExt)
	}
	f, err := jobstate.ParseOutputFormat(v)
	if err != nil {
		return newAPIError(CodeInvalidRequest, "output_format must be png, jpeg or webp")
	}
	opts.outputFormat = f
	return nil
}

// checkContainer refuses a video embed whose output_format (want, mp4 or mov) is not the container its output
// is written in: the source's (an MP4 whose audio only MOV stores comes back a MOV). Nothing is converted on
// request, and a MOV asked for and an MP4 answered (or the reverse) would surprise the caller who named it.
// The file is fine, so an upload stays usable.
func checkContainer(kind mediakind.Kind, want string, info mediakind.Info) *apiError {
	if want == "" {
		return nil
	}
	written := info.Output
	if written == "" {
		written = info.Format
	}
	if _, ext := kind.OutputType(written); ext != want {
		aerr := newAPIError(CodeInvalidRequest, "output_format %s: this video comes back as %s: a video embed keeps the "+
			"container of its source (an MP4 whose audio only MOV stores comes back a MOV); send output_format %s, or none",
			want, ext, ext)
		aerr.uploadUsable = true
		return aerr
	}
	return nil
}

// gpuRefusal decides a request for accelerator=gpu when no GPU is ready to run it. By default the work runs
// on the CPU (nil: the request goes on, 3x held and the normal price charged, X-Service-Accelerator: cpu),
// which is what Etchv's SDKs expect: they retry a 503 on embeds until their deadline. In strict mode
// (Config.GPUStrict) it is 503 gpu_unavailable with Retry-After. A reused Idempotency-Key goes on whatever the
// GPU's state, as in mediaRefusal: its job exists, so the submission answers it with the stored job (a replay
// needs no GPU) or 409 idempotency_conflict (spec 7: the fingerprint includes the accelerator and the output
// format, which the form may carry and this check, made before the body is read, cannot see), and a client that
// retries 503 does not retry a request that can never succeed. When the options this check can see already
// conflict, it answers 409 itself.
func (s *Server) gpuRefusal(c context.Context, ctx *fasthttp.RequestCtx, p *principal, kind mediakind.Kind, op jobstate.Operation, idem, reqID string) *apiError {
	if !s.cfg.GPUStrict || s.gpuState().Snapshot(s.cfg.Clock.Now()).Status == gpu.StatusReady {
		return nil
	}
	if idem != "" {
		rep, err := actors.JobClient{Caller: s.cfg.Caller}.Get(c, p.Key.OrgID, reqID)
		if err == nil && rep.Code == actors.ReplyOK && rep.Record != nil {
			if err := rep.Record.OptionsConflict(op, kind.Media, jobstate.AcceleratorGPU); err != nil {
				return newAPIError(CodeIdempotencyConflict, "this Idempotency-Key was used with different inputs or options")
			}
			return nil
		}
	}
	return s.gpuUnavailable(ctx)
}

// mediaRefusal answers 503 media_unavailable, before the body is read, when this node lacks a program the
// kind needs (ffmpeg, mutool): nothing is stored, held or charged, and an upload named in the body stays
// usable. A request whose Idempotency-Key names an existing job goes on: its replay needs no program.
func (s *Server) mediaRefusal(c context.Context, p *principal, kind mediakind.Kind, op jobstate.Operation, idem, reqID string) *apiError {
	perr := s.cfg.Media.Available(kind.Media, op)
	if perr == nil {
		return nil
	}
	if idem != "" {
		rep, err := actors.JobClient{Caller: s.cfg.Caller}.Get(c, p.Key.OrgID, reqID)
		if err == nil && rep.Code == actors.ReplyOK && rep.Record != nil {
			return nil
		}
	}
	return newAPIError(CodeMediaUnavailable, "%s", perr.Detail)
}

// earlyConcurrencyRefusal answers 429 concurrency_limited before the body is read when admission saw every
// slot of the organization's plan taken (principal.SlotsFull): a client with a large file learns it at once
// instead of after uploading it, and the node stores nothing it would delete. The hint is advisory: a slot
// freed since admission is found by the reservation later, which stays the check that counts, and a request
// let through by a race meets that check as before. A request whose Idempotency-Key names an existing job is
// let through, so that it replays (spec: a replay answers what the first request got, whatever the limits).
func (s *Server) earlyConcurrencyRefusal(c context.Context, ctx *fasthttp.RequestCtx, p *principal, idem, reqID string) *apiError {
	if !p.SlotsFull {
		return nil
	}
	if idem != "" {
		rep, err := actors.JobClient{Caller: s.cfg.Caller}.Get(c, p.Key.OrgID, reqID)
		if err != nil || rep.Code != actors.ReplyNotFound {
			return nil // a replay, or not known: the request goes on to the checks that decide
		}
	}
	return reserveRefusal(ctx, p, actors.ReplyConcurrencyLimit, 0)
}

// mediaRetryAfter is the Retry-After of media_unavailable, in seconds: installing a program takes minutes.
const mediaRetryAfter = "60"

// gpuUnavailable is strict mode's answer when no GPU is ready.
func (s *Server) gpuUnavailable(ctx *fasthttp.RequestCtx) *apiError {
	ctx.Response.Header.Set("Retry-After", gpuRetryAfter)
	return newAPIError(CodeGPUUnavailable, "no GPU is ready on this deployment (strict GPU mode); retry later or use accelerator=cpu")
}

// gpuRetryAfter is the Retry-After of a strict-mode refusal: a woken GPU is ready well within it.
const gpuRetryAfter = "30"

// holdFor is the credits held for a request of price: GPUHoldMultiplier times it for accelerator=gpu (spec
// 8), whatever then runs it; the charge is settled from what actually ran.
func (s *Server) holdFor(acc jobstate.Accelerator, price int64) int64 {
	if acc == jobstate.AcceleratorGPU && s.cfg.Catalog.Prices.GPUHoldMultiplier > 0 {
		return price * s.cfg.Catalog.Prices.GPUHoldMultiplier
	}
	return price
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
		// The canonicalizer's own message says where and why ("offset 12: duplicate member name ..."); its
		// package prefix means nothing to a client.
		return codec.ID{}, newAPIError(CodeInvalidData, "data is not I-JSON (RFC 7493) and cannot be canonicalized: %s",
			strings.TrimPrefix(err.Error(), "codec: canonical JSON: "))
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
		s.log(ctx).Debug().Err(err).Str("blob", key).Msg("probe image")
		detail := "the file is not an image we can read"
		if perr := actors.ImageError(err); perr.Code == actors.CodeInvalidImage {
			detail = perr.Detail
		}
		return "", newAPIError(CodeInvalidImage, "%s", detail)
	}
	if int64(cfg.Width)*int64(cfg.Height) > maxPixels {
		return "", newAPIError(CodeImageTooLarge, "the image has %dx%d pixels; the limit is %d megapixels", cfg.Width, cfg.Height, maxPixels/1_000_000)
	}
	if cfg.Width < 1 || cfg.Height < 1 {
		return "", newAPIError(CodeInvalidImage, "the image has no pixels")
	}
	return strings.ToUpper(format), nil
}

// probe reads what the limits, the deadline and the price need of a stored file of kind, before its content
// is decoded.
func (s *Server) probe(ctx context.Context, rctx *fasthttp.RequestCtx, kind mediakind.Kind, key string, op jobstate.Operation) (mediakind.Info, *apiError) {
	if kind.Media != jobstate.MediaImage {
		// A file kind's probe reads the whole file through its adapter: a video's price depends on its
		// duration, and a file the adapter refuses is refused before anything is charged.
		info, perr := s.cfg.Media.ProbeStored(ctx, kind, op, key, syncDecodeWait)
		switch {
		case perr == nil:
			info.Frames = max(info.Frames, 1)
			return info, nil
		case perr.Code == actors.CodeDecodeBusy:
			return mediakind.Info{}, &apiError{code: problem.ForJob(perr.Code).Code, detail: perr.Detail}
		case perr.Retryable:
			s.log(ctx).Warn().Err(perr.Cause).Str("blob", key).Msg("probe file")
			// The probe copies the file into the temporary directory for ffprobe or the parser: a full
			// one is the node's disk, not a missing file.
			if aerr := lowDisk(rctx, diskspace.MarkFull(perr.Cause)); aerr != nil {
				return mediakind.Info{}, aerr
			}
			return mediakind.Info{}, newAPIError(CodeUnavailable, "stored file unavailable")
		}
		return mediakind.Info{}, &apiError{code: problem.ForJob(perr.Code).Code, detail: perr.Detail}
	}
	format, aerr := s.probeImage(ctx, key, kind.MaxPixels(op))
	return mediakind.Info{Format: format, Frames: 1}, aerr
}

// acceptMedia handles the four endpoints of a kind.
func (s *Server) acceptMedia(kind mediakind.Kind, op jobstate.Operation, async bool) func(*fasthttp.RequestCtx, *principal, map[string]string) {
	return func(ctx *fasthttp.RequestCtx, p *principal, _ map[string]string) {
		c, cancel := s.requestContext(ctx, 5*time.Minute)
		defer cancel()
		if aerr := s.acceptMediaErr(c, ctx, acceptRequest{p: p, kind: kind, op: op, async: async}); aerr != nil {
			switch aerr.code {
			case CodeMediaUnavailable:
				ctx.Response.Header.Set("Retry-After", mediaRetryAfter)
			case CodeDecodeBusy:
				ctx.Response.Header.Set("Retry-After", decodeBusyRetryAfter)
			}
			ctx.SetConnectionClose() // the body may be unread
			writeAPIError(ctx, aerr)
		}
	}
}

// acceptRequest is one request to an endpoint of a kind, as it is parsed.
type acceptRequest struct {
	p     *principal
	kind  mediakind.Kind
	op    jobstate.Operation
	async bool
	opts  jobOptions
	idem  string // the Idempotency-Key, if any
	reqID string
	form  *mediaForm
	// file is the stored media: the form's file, or the claimed upload's.
	file *storedFile
}

func (s *Server) acceptMediaErr(c context.Context, ctx *fasthttp.RequestCtx, r acceptRequest) *apiError {
	p, op := r.p, r.op
	query := ctx.QueryArgs()
	var aerr *apiError
	r.opts, aerr = s.parseJobOptions(ctx, p, r.kind, op, func(name string) string { return string(query.Peek(name)) })
	if aerr != nil {
		return aerr
	}
	r.idem = string(ctx.Request.Header.Peek("Idempotency-Key"))
	if r.idem != "" && !jobstate.ValidIdempotencyKey(r.idem) {
		return newAPIError(CodeInvalidIdempotency, "Idempotency-Key must be 8 to 128 letters, digits, hyphens or underscores")
	}
	r.reqID = requestIDFor(p.Key.OrgID, r.idem)
	if aerr := s.mediaRefusal(c, p, r.kind, op, r.idem, r.reqID); aerr != nil {
		return aerr
	}
	if r.opts.accelerator == jobstate.AcceleratorGPU {
		// In strict mode, refused before the body is read.
		if aerr := s.gpuRefusal(c, ctx, p, r.kind, op, r.idem, r.reqID); aerr != nil {
			return aerr
		}
	}
	if aerr := s.earlyConcurrencyRefusal(c, ctx, p, r.idem, r.reqID); aerr != nil {
		return aerr
	}
	key := actors.InputKey(p.Key.OrgID, r.reqID)
	form, err := readMediaFormWith(c, string(ctx.Request.Header.ContentType()), bodyReader(ctx), s.cfg.Blobs, key, s.fileRules(r.kind, op))
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			return ae
		}
		s.log(ctx).Error().Err(err).Msg("read form")
		if aerr := lowDisk(ctx, err); aerr != nil {
			return aerr
		}
		return newAPIError(CodeUnavailable, "could not store the file")
	}
	r.form = form
	keep := false
	defer func() {
		if !keep && form.File != nil {
			_ = s.cfg.Blobs.Delete(context.WithoutCancel(c), form.File.Key)
		}
	}()
	if len(form.Options) > 0 {
		get, aerr := mergeJobOptions(query, form.Options)
		if aerr != nil {
			return aerr
		}
		if r.opts, aerr = s.parseJobOptions(ctx, p, r.kind, op, get); aerr != nil {
			return aerr
		}
		if r.opts.accelerator == jobstate.AcceleratorGPU {
			if aerr := s.gpuRefusal(c, ctx, p, r.kind, op, r.idem, r.reqID); aerr != nil {
				return aerr
			}
		}
	}
	switch {
	case form.File != nil && form.UploadID != "":
		return newAPIError(CodeInvalidRequest, "send either a file or an upload_id, not both")
	case form.File == nil && form.UploadID == "":
		return newAPIError(CodeInvalidRequest, "send the media in the file field, or an upload_id")
	case form.UploadID != "":
		file, aerr := s.claimUploadFor(c, p, form.UploadID, r.reqID, op, actors.UploadMedia(r.kind.Media))
		if aerr != nil {
			return aerr
		}
		r.file = file
		// The upload owns its file: whatever happens here, it is not deleted with the request.
		return s.acceptFromUpload(c, ctx, r)
	}
	r.file = form.File
	keep, aerr = s.acceptFile(c, ctx, r)
	return aerr
}

// acceptFromUpload runs the request on a claimed upload and records the outcome on the upload.
func (s *Server) acceptFromUpload(c context.Context, ctx *fasthttp.RequestCtx, r acceptRequest) *apiError {
	p, form, reqID := r.p, r.form, r.reqID
	_, aerr := s.acceptFile(c, ctx, r)
	if aerr != nil && aerr.code == CodeIdempotencyConflict && r.file.ConsumedByRequest {
		// The key names the request that used this upload, but the fields differ: that is another use of a
		// used upload (spec 4.3: "any other reuse gives 409 upload_consumed"), sync or async alike.
		aerr = newAPIError(CodeUploadConsumed, "upload %s was used by a request with other fields; an upload is used once: "+
			"repeat that request unchanged, or create a new upload", form.UploadID)
	}
	outcome := uploadConsumed
	if aerr != nil {
		outcome = uploadRejected
		switch aerr.code {
		case CodeInsufficientCredits, CodeConcurrencyLimit, CodeRateLimited, CodeUnavailable,
			CodeIdempotencyConflict, CodeInvalidData, CodeInvalidAccelerator, CodeForbiddenPlan, CodeGPUUnavailable,
			CodeDecodeBusy, CodeMediaUnavailable:
			// Refusals about the request, not the file: the upload stays usable.
			outcome = uploadReleased
		}
		if aerr.uploadUsable {
			outcome = uploadReleased
		}
	}
	s.settleUpload(context.WithoutCancel(c), p, form.UploadID, reqID, outcome, aerr)
	return aerr
}

// acceptFile validates the stored file and runs or queues the work. keep tells the caller whether the file
// must stay stored (a new job owns it).
func (s *Server) acceptFile(c context.Context, ctx *fasthttp.RequestCtx, r acceptRequest) (keep bool, _ *apiError) {
	p, op, async, opts, idem, reqID, file := r.p, r.op, r.async, r.opts, r.idem, r.reqID, r.file
	var aerr *apiError
	var wm codec.ID
	if op == jobstate.OperationEmbed {
		if wm, aerr = validateData(r.form.Data); aerr != nil {
			return false, aerr
		}
	}
	info, aerr := s.probe(c, ctx, r.kind, file.Key, op)
	if aerr != nil {
		return false, aerr
	}
	if aerr := checkContainer(r.kind, opts.container, info); aerr != nil {
		return false, aerr
	}
	price := s.cfg.Catalog.PriceOf(r.kind, op, info)
	// A kind without synchronous detection (video) runs a detection sent to /detect as a job, and answers
	// like a synchronous embed.
	syncDetect := op == jobstate.OperationDetect && !async && r.kind.SyncDetect()
	if syncDetect {
		if limit := r.kind.Limits.SyncDetect; file.Info.Size > limit {
			// spec 8: above that "sync returns 413 and the upload is kept for that request". The file is what is
			// too large (file_too_large, not the body's payload_too_large), and the upload stays usable.
			aerr := newAPIError(CodeFileTooLarge, "synchronous detection answers files up to %d bytes; send this upload to the async endpoint", limit)
			aerr.uploadUsable = true
			return false, aerr
		}
		if idem == "" {
			return false, s.detectNow(c, ctx, p, r.kind, reqID, file, opts.accelerator, price, s.holdFor(opts.accelerator, price))
		}
		// With an Idempotency-Key the detection is recorded, so that the key replays it and bills once: it
		// becomes a job that this node claims at once and runs in the request (docs/errors.md).
	}
	spec := jobstate.Spec{
		RequestID: reqID, OrgID: p.Key.OrgID, Operation: op, Media: r.kind.Media, Format: info.Format,
		FrameCount: info.Frames, MaxWork: info.MaxWork, AcceleratorRequested: opts.accelerator, WebhookID: opts.webhookID,
		IdempotencyKey: idem, Sync: !async,
		StorageDestinationID: opts.storageDest, StorageKey: opts.storageKey, OutputFormat: opts.outputFormat,
		Input: jobstate.Input{BlobKey: file.Key, SHA256: file.Info.SHA256, Size: file.Info.Size,
			Filename: inputName(file.Filename, r.kind, info.Format), ContentType: r.kind.ContentType(info.Format)},
	}
	if op == jobstate.OperationEmbed {
		spec.WatermarkID = wm.String()
	}
	jobs := actors.JobClient{Caller: s.cfg.Caller}
	hold := s.holdFor(opts.accelerator, price)
	submit := actors.JobSubmit{Spec: spec, Hold: hold, Slot: true}
	if syncDetect && s.cfg.Pool.Takes() {
		// A node that runs no cpu work (its roles) or is draining leaves the job to placement and waits.
		submit.ClaimAs, submit.Lease = s.cfg.Pool.EdgeWorkerID(), s.cfg.Pool.Lease()
	}
	// A claimed submission whose answer says it was not recorded (internal) or that got none may have been
	// written all the same (a store write that timed out and landed later): the job would then run under this
	// request's lease (its ClaimAs is unique to the request) with nobody working on it, and a retry by the
	// client, another claimant, would wait for that lease to expire. Submitting the same claim again finds the
	// job and hands the lease back (or creates it now), for up to one lease length within the request, as a
	// worker re-sends its claim.
	submitOnce := func() (*actors.JobReply, error) { return jobs.Submit(c, submit) }
	var rep *actors.JobReply
	var err error
	if submit.ClaimAs != "" {
		rep, err = actors.Resend(c, nil, submit.Lease, s.log(c).With().Str("job", reqID).Logger(), "claimed submission",
			submitOnce, func(rep *actors.JobReply, err error) bool { return err != nil || rep.Code == actors.ReplyInternal })
	} else {
		rep, err = submitOnce()
	}
	if err != nil {
		s.log(ctx).Error().Err(err).Str("job", reqID).Msg("submit job")
		return s.jobUsesInput(c, p.Key.OrgID, reqID, file.Key), newAPIError(CodeUnavailable, "the job could not be accepted in time; retry with the same Idempotency-Key")
	}
	if aerr := reserveRefusal(ctx, p, rep.Code, hold); aerr != nil {
		return false, aerr
	}
	switch rep.Code {
	case actors.ReplyOK:
	case actors.ReplyIdempotencyConflict:
		return false, newAPIError(CodeIdempotencyConflict, "this Idempotency-Key was used with different inputs or options")
	default:
		s.log(ctx).Error().Str("job", reqID).Str("code", rep.Code).Str("detail", rep.Detail).Msg("submit job")
		return s.jobUsesInput(c, p.Key.OrgID, reqID, file.Key), newAPIError(CodeUnavailable, "the job could not be accepted; retry with the same Idempotency-Key")
	}
	// A replay's job has its own input; a redelivered submission (jobstate.Record.IsRedelivery) is this very
	// request, whose job reads the file just stored.
	keep = !rep.Replayed || rep.Record != nil && rep.Record.Input.BlobKey == file.Key
	rec := rep.Record
	if rep.Replayed && !(syncDetect && rep.Lease != nil) {
		return keep, s.answerReplay(c, ctx, p, rec, async)
	}
	// A replay that hands back this request's own lease is its earlier submission, whose answer was lost
	// (nobody runs it): run it now, as a fresh claim.
	if syncDetect && rep.Lease != nil {
		// A retryable failure leaves the job to the pool; the wait below answers its outcome or the receipt.
		if done := s.cfg.Pool.RunClaimed(c, rec, *rep.Lease); done != nil && done.Record != nil {
			rec = done.Record
		}
	}
	if async {
		s.writeReceipt(ctx, p, rec, 202)
		return keep, nil
	}
	return keep, s.awaitAndAnswer(c, ctx, p, rec)
}

// answerReplay answers a request that named an existing job with the same Idempotency-Key and inputs, as
// jobstate.Record.ReplayAt decides: sync and async alike answer a final failure with its status and problem
// body, and a result that is gone with 410; otherwise async answers the receipt and sync the result.
func (s *Server) answerReplay(c context.Context, ctx *fasthttp.RequestCtx, p *principal, rec *jobstate.Record, async bool) *apiError {
	_, deleted, err := s.outputDeleted(c, rec)
	if err != nil {
		s.log(ctx).Error().Err(err).Str("job", rec.RequestID).Msg("read the output asset of a replayed job")
		return newAPIError(CodeUnavailable, "the job's result could not be checked in time; retry")
	}
	switch rec.ReplayAt(s.cfg.Clock.Now(), deleted) {
	case jobstate.ReplayFailed:
		writeFailedJob(ctx, rec)
		return nil
	case jobstate.ReplayGone:
		// The 410 is about the job, like a failure's answer: it names the job's request id, as its result
		// URL's 410 does.
		setJobRequestID(ctx, rec.RequestID)
		return resultGone(rec, deleted)
	case jobstate.ReplayPending:
		if !async {
			return s.awaitAndAnswer(c, ctx, p, rec)
		}
	case jobstate.ReplaySucceeded:
		if !async {
			return s.writeResult(c, ctx, p, rec)
		}
	}
	s.writeReceipt(ctx, p, rec, 202)
	return nil
}

// directLimit is the largest file a request of op for kind carries in its body: the media-kind table's,
// lowered by Config.MaxDirectEmbed for embeds.
func (s *Server) directLimit(kind mediakind.Kind, op jobstate.Operation) int64 {
	limit := kind.DirectLimit(op)
	if op == jobstate.OperationEmbed && s.cfg.MaxDirectEmbed > 0 {
		limit = min(limit, s.cfg.MaxDirectEmbed)
	}
	return limit
}

// fileRules are what a request of op to kind's route allows of its file part. A file above the direct limit
// is pointed to an upload only where an upload takes a larger one: a PDF or video embed takes no more through
// an upload (20 MB either way), so telling its sender to upload it would only move the refusal.
func (s *Server) fileRules(kind mediakind.Kind, op jobstate.Operation) fileRules {
	r := fileRules{max: s.directLimit(kind, op), invalid: invalidFileCode(kind.Media),
		tooLargeHint: "send larger files through an upload"}
	if kind.UploadLimit(op) <= r.max {
		r.tooLargeHint = fmt.Sprintf("a %s %s takes no larger file, sent directly or through an upload", kind.Noun, op)
	}
	return r
}

// invalidFileCode is the code of a file of media that cannot be read at all, the one its probe answers.
func invalidFileCode(media jobstate.Media) Code {
	switch media {
	case jobstate.MediaDocument:
		return problem.InvalidDocument
	case jobstate.MediaVideo:
		return problem.InvalidVideo
	default:
		return CodeInvalidImage
	}
}

// jobUsesInput tells, after a submission whose outcome is unknown (no answer in time, or a storage failure
// whose write may still have landed), whether the job exists and reads the file just stored: then the file
// must stay, or every attempt of that job would fail on a missing input. When the job cannot be asked, the
// file is kept too (and checked again later through the outbox: checkInputLater): an orphaned input is a file
// nobody reads, a deleted one breaks a job the client was charged for.
func (s *Server) jobUsesInput(c context.Context, orgID, reqID, key string) bool {
	qctx, cancel := context.WithTimeout(context.WithoutCancel(c), 5*time.Second)
	defer cancel()
	rep, err := actors.JobClient{Caller: s.cfg.Caller}.Get(qctx, orgID, reqID)
	if err != nil {
		s.log(c).Warn().Err(err).Str("job", reqID).Msg("after a failed submission: cannot tell whether the job exists; keeping its input")
		s.checkInputLater(c, orgID, reqID, key)
		return true
	}
	if rep.Code == actors.ReplyNotFound {
		return false
	}
	return rep.Record == nil || rep.Record.Input.BlobKey == key
}

// checkInputLater hands the outbox a check of an input file kept because nobody could tell whether its job
// exists (actors.OutboxJobInput): without it, a file whose job was never created would stay stored for good.
func (s *Server) checkInputLater(c context.Context, orgID, reqID, key string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c), 5*time.Second)
	defer cancel()
	e, err := actors.InputCheck(orgID, reqID, key, s.cfg.Clock.Now())
	if err == nil {
		if s.cfg.Outbox.Store == nil {
			err = errors.New("no outbox on this node")
		} else {
			err = s.cfg.Outbox.Add(ctx, e)
		}
	}
	if err != nil {
		s.log(ctx).Error().Err(err).Str("job", reqID).Str("blob", key).Msg("input kept with no later check: delete it by hand if no job reads it")
	}
}

// outputDeleted reports whether a succeeded embed's watermarked asset was deleted, and when: its deletion
// time, or the job's completion where the asset's record is gone (the earliest its result can have ended).
func (s *Server) outputDeleted(c context.Context, rec *jobstate.Record) (deletedAt time.Time, deleted bool, err error) {
	if rec.Status != jobstate.StatusSucceeded || rec.Operation != jobstate.OperationEmbed || rec.Output == nil {
		return time.Time{}, false, nil
	}
	as, _, err := actors.Assets{Store: s.cfg.Store}.Get(c, rec.Output.AssetID)
	switch {
	case errors.Is(err, persistence.ErrNotFound):
		return rec.CompletedAt, true, nil
	case err != nil:
		return time.Time{}, false, err
	case as.DeletedAt != nil:
		return *as.DeletedAt, true, nil
	}
	return time.Time{}, false, nil
}

// resultGone is the 410 of a succeeded job whose result is no longer available.
func resultGone(rec *jobstate.Record, deleted bool) *apiError {
	if deleted {
		return newAPIError(CodeResultGone, "the watermarked asset was deleted")
	}
	return newAPIError(CodeResultGone, "the result expired at %s", rec.ResultExpiresAt.Format(time.RFC3339))
}

// inputName is the stored name of an input of kind whose detected format is format (actors.InputName).
func inputName(name string, kind mediakind.Kind, format string) string {
	return actors.InputName(name, string(kind.Media), kind.InputExt(format))
}

func retryAfterSeconds(p actors.Plan) int {
	if d := time.Duration(p.JobRetryAfter); d > 0 {
		return int(d / time.Second)
	}
	return 2
}

// awaitAndAnswer waits for the outcome, as long as syncWait allows; past that the caller gets the receipt
// and the job goes on.
func (s *Server) awaitAndAnswer(c context.Context, ctx *fasthttp.RequestCtx, p *principal, rec *jobstate.Record) *apiError {
	if rec.WaitingForDisk() && s.syncDetectJob(rec) {
		// Its attempt could not store the detection for want of disk space, and the job waits for space
		// (jobstate.Record.WaitForDisk): a synchronous detection has no 202, so it is answered at once as a low
		// disk's refusal rather than after the whole request budget; a retry with the same Idempotency-Key
		// replays the job, which the answer names.
		setJobRequestID(ctx, rec.RequestID)
		return lowDisk(ctx, diskspace.ErrLow)
	}
	if !rec.Committed() {
		wctx, cancel := context.WithTimeout(c, s.syncWait(c, rec))
		if !s.syncDetectJob(rec) {
			// A draining node answers the receipt at once rather than holding the request for the whole wait
			// (its job, queued, runs on another node or after the restart); a synchronous detection has no 202
			// and waits on, within the shutdown grace.
			var stop context.CancelFunc
			wctx, stop = s.endsAtDrain(wctx)
			defer stop()
		}
		rep, err := actors.JobClient{Caller: s.cfg.Caller}.Await(wctx, p.Key.OrgID, rec.RequestID)
		cancel()
		if err == nil && rep.Code == actors.ReplyOK && rep.Record != nil {
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

// syncWait is how long a synchronous request waits for its job. An embed, and a detection of a kind that
// always detects in a job (video), answers 202 with the receipt after the configured wait (spec: "over
// 20 s"); a synchronous detection of the other kinds has no 202 in the spec ("never becomes a job"), so a
// recorded one (sent with an Idempotency-Key) waits for its outcome until the request's own budget nearly
// ends: after its node died, a replay waits while another worker finishes it.
func (s *Server) syncWait(c context.Context, rec *jobstate.Record) time.Duration {
	if !s.syncDetectJob(rec) {
		return s.cfg.SyncWait
	}
	const answerMargin = 5 * time.Second // left to write the answer
	if deadline, ok := c.Deadline(); ok {
		if d := time.Until(deadline) - answerMargin; d > s.cfg.SyncWait {
			return d
		}
	}
	return s.cfg.SyncWait
}

// syncDetectJob reports whether rec is the job of a synchronous detection (sent with an Idempotency-Key), which
// has no 202 answer.
func (s *Server) syncDetectJob(rec *jobstate.Record) bool {
	kind, ok := mediakind.ByMedia(rec.Media)
	return rec.Operation == jobstate.OperationDetect && ok && kind.SyncDetect()
}

func (s *Server) writeReceipt(ctx *fasthttp.RequestCtx, p *principal, rec *jobstate.Record, status int) {
	setJobRequestID(ctx, rec.RequestID)
	s.setLocation(ctx, rec.StatusURL())
	ctx.Response.Header.Set("Retry-After", strconv.Itoa(retryAfterSeconds(p.Plan)))
	rc := rec.Receipt()
	if rec.ResultAvailable(s.cfg.Clock.Now()) {
		// A deleted output ends the result before its 24 h (the result URL answers 410): the receipt says so
		// with result_expires_at at the deletion, so that "now is past result_expires_at" is the one test of a
		// gone result (docs/api.md). Only a succeeded embed within its 24 h pays this read; a read that fails
		// leaves the receipt as recorded (the result URL, which must know, answers 503 then).
		c, cancel := s.storeCtx(ctx)
		at, deleted, err := s.outputDeleted(c, rec)
		cancel()
		if err != nil {
			s.log(ctx).Warn().Err(err).Str("job", rec.RequestID).Msg("read the output asset of a job's receipt")
		} else if deleted && at.Before(rec.ResultExpiresAt) {
			ts := at.UTC().Format(time.RFC3339)
			rc.ResultExpiresAt = &ts
		}
	}
	if rec.Status == jobstate.StatusSucceeded && rec.StorageDestinationID != "" {
		rc.StorageStatus = s.storageStatus(ctx, rec.StorageDeliveryID()).Status
	}
	writeJSON(ctx, status, rc)
}

// writeResult answers with a committed job's outcome: the file or detection JSON, or the failure.
func (s *Server) writeResult(c context.Context, ctx *fasthttp.RequestCtx, p *principal, rec *jobstate.Record) *apiError {
	now := s.cfg.Clock.Now()
	setJobRequestID(ctx, rec.RequestID)
	if rec.Status == jobstate.StatusFailed {
		writeFailedJob(ctx, rec)
		return nil
	}
	if !rec.ResultAvailable(now) {
		return resultGone(rec, false)
	}
	out := rec.Output
	_, deleted, err := s.outputDeleted(c, rec)
	if err != nil {
		// Not knowing is not gone: a 410 would tell the client to give up on a result it paid for (a node
		// stopping mid-request cancels this read).
		s.log(ctx).Error().Err(err).Str("job", rec.RequestID).Msg("read the output asset of a job's result")
		return newAPIError(CodeUnavailable, "the job's result could not be checked in time; retry")
	}
	if deleted {
		return resultGone(rec, true)
	}
	var body io.ReadCloser
	body, err = s.openBlobBody(ctx, out.BlobKey, 0, -1)
	if err != nil && !errors.Is(err, persistence.ErrNotFound) {
		// A read that failed is not a file that is gone (the store did not answer, or this node is stopping
		// and cancelled the read): 410 would tell the client to give up on a result it was charged for.
		s.log(ctx).Error().Err(err).Str("job", rec.RequestID).Msg("read a job's result file")
		return newAPIError(CodeUnavailable, "the job's result could not be read in time; retry")
	}
	if err != nil {
		// Once its delivery stored the result in the customer's bucket, the hosted copy is gone: the result
		// is read back from there, like GET /storage/deliveries/{id}/content.
		as, _, aerr := s.assets().Lookup(c, p.Key.OrgID, out.AssetID)
		switch {
		case aerr != nil && !errors.Is(aerr, actors.ErrAssetNotFound):
			s.log(ctx).Error().Err(aerr).Str("job", rec.RequestID).Msg("read the asset of a job's missing result file")
			return newAPIError(CodeUnavailable, "the job's result could not be checked in time; retry")
		case aerr != nil || !as.Stored():
			return newAPIError(CodeResultGone, "the result file is no longer stored")
		}
		b, _ := s.openStoredAsset(ctx, p.Key.OrgID, as)
		if b == nil {
			return nil // answered
		}
		body = b
	}
	h := &ctx.Response.Header
	setAccelerator(ctx, out.Accelerator)
	if rec.Operation == jobstate.OperationEmbed {
		h.Set("X-Watermark-ID", out.WatermarkID)
		marked, source := rec.OutputAssetIDs()
		h.Set("X-Asset-ID", marked)
		h.Set("X-Source-Asset-ID", source)
		if id := rec.StorageDeliveryID(); id != "" {
			h.Set("X-Storage-Delivery-ID", id)
		}
		h.Set("Content-Disposition", `attachment; filename="`+out.Filename+`"`)
	}
	ctx.SetStatusCode(200)
	ctx.SetContentType(out.ContentType)
	sendBlobBody(ctx, body, out.Size)
	return nil
}

// writeFailedJob answers a finally failed job. Clients of this API poll the result and look for
// "status": "failed" (DESIGN.md 5), so this problem body carries the job status in `status` and the HTTP
// status only in the status line; it is the one problem body that departs from RFC 9457's numeric status.
func writeFailedJob(ctx *fasthttp.RequestCtx, rec *jobstate.Record) {
	setJobRequestID(ctx, rec.RequestID)
	entry := problem.ForJob(rec.ErrorCode) // the error table maps a job's error code to its status
	body, _ := encodeJSON(map[string]any{
		"type": problemTypeBase + string(entry.Code), "title": entry.Title, "status": "failed",
		"detail": problemDetail(ctx, entry.Code, rec.ErrorDetail, 0), "code": entry.Code, "error_code": rec.ErrorCode,
		"request_id": rec.RequestID,
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
	c, cancel := s.requestContext(ctx, s.cfg.ActorTimeout)
	defer cancel()
	rep, err := actors.JobClient{Caller: s.cfg.Caller}.Get(c, p.Key.OrgID, id)
	if err != nil {
		s.unavailable(ctx, err)
		return nil, false
	}
	if rep.Code != actors.ReplyOK || rep.Record == nil {
		if rep.Code == actors.ReplyNotFound || rep.Code == actors.ReplyOK {
			writeProblem(ctx, CodeNotFound, "no such job")
		} else {
			// The job's state could not be read (the object storage down or frozen): the job may well exist,
			// and a 404 would tell its client that it is gone.
			s.unavailable(ctx, fmt.Errorf("job: %s (%s)", rep.Code, rep.Detail))
		}
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
	c, cancel := s.requestContext(ctx, s.cfg.ActorTimeout)
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

// detectNow runs a synchronous detection that never becomes a job; actors.SyncDetector decides the credit
// flow (held, then charged or released), this encodes its answer. When the client closes the connection
// before the answer, the work is cancelled and the hold released: nothing is charged.
func (s *Server) detectNow(c context.Context, ctx *fasthttp.RequestCtx, p *principal, kind mediakind.Kind, reqID string, f *storedFile, acc jobstate.Accelerator, price, hold int64) *apiError {
	d := actors.SyncDetector{Orgs: s.cfg.Orgs, Pool: s.cfg.Pool, Media: s.cfg.Media, Logger: *s.log(ctx)}
	det, ran, serr := d.Detect(c, actors.SyncDetectRequest{
		OrgID: p.Key.OrgID, RequestID: reqID, BlobKey: f.Key, Kind: kind, Credits: price, Hold: hold, BudgetWait: syncDecodeWait,
		Accelerator: acc,
		Watch:       func(c context.Context) (context.Context, func()) { return watchDisconnect(c, ctx) },
		Gone:        clientGone,
		// The actor timeout outlasts failure detection: a charge whose organization actor's node died
		// reaches its next activation.
		SettleWithin: s.cfg.ActorTimeout,
	})
	switch {
	case serr == nil:
	case serr.Reserve != "":
		if aerr := reserveRefusal(ctx, p, serr.Reserve, hold); aerr != nil {
			return aerr
		}
		return newAPIError(CodeUnavailable, "could not reserve credits: %s", serr.Reserve)
	case serr.Gone:
		return newAPIError(CodeUnavailable, "the client closed the connection")
	case serr.Process != nil:
		if serr.Process.Code == actors.CodeDecodeBusy {
			ctx.Response.Header.Set("Retry-After", decodeBusyRetryAfter)
		}
		if serr.Process.Cause != nil {
			s.log(ctx).Warn().Err(serr.Process.Cause).Str("request", reqID).Str("code", serr.Process.Code).Msg("synchronous detection failed")
		}
		return &apiError{code: problem.ForJob(serr.Process.Code).Code, detail: serr.Process.Detail}
	default:
		return newAPIError(CodeUnavailable, "%s", serr.Unavailable)
	}
	setJobRequestID(ctx, reqID)
	setAccelerator(ctx, ran)
	writeJSON(ctx, 200, det)
	return nil
}

// reserveRefusal answers the org actor's refusals to hold credits or a slot: 402, or 429 with the plan's
// Retry-After. Other codes are the caller's to handle.
func reserveRefusal(ctx *fasthttp.RequestCtx, p *principal, code string, price int64) *apiError {
	switch code {
	case actors.ReplyInsufficientCredits:
		return newAPIError(CodeInsufficientCredits, "the organization has too few credits for this request (%d needed)", price)
	case actors.ReplyConcurrencyLimit:
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(retryAfterSeconds(p.Plan)))
		jobs := "jobs"
		if p.Plan.Concurrency == 1 {
			jobs = "job"
		}
		aerr := newAPIError(CodeConcurrencyLimit, "the %s plan runs %d %s at once", p.Plan.Name, p.Plan.Concurrency, jobs)
		aerr.limit = p.Plan.Concurrency
		return aerr
	}
	return nil
}

// setJobRequestID makes a response about a job carry the job's request id in X-Request-ID, in place of the
// id of the HTTP request: clients of this API (Etchv's SDKs among them) take the job's id from that header
// on a synchronous result, and resume the job with it. The log lines of the request then name the job too.
func setJobRequestID(ctx *fasthttp.RequestCtx, requestID string) {
	ctx.Response.Header.Set(headerRequestID, requestID)
	if r := reqlog.From(ctx); r != nil {
		r.SetID(requestID) // and so do the lines written from here on
	}
}

// setAccelerator reports the processor that ran a job, under the spec's neutral header name and under the
// name Etchv's SDKs read (they ignore the neutral one).
func setAccelerator(ctx *fasthttp.RequestCtx, acc jobstate.Accelerator) {
	ctx.Response.Header.Set("X-Service-Accelerator", string(acc))
	ctx.Response.Header.Set("X-Etchv-Accelerator", string(acc))
}

// String renders an apiError for logs.
func (e *apiError) String() string { return fmt.Sprintf("%s (%s)", e.code, e.detail) }
