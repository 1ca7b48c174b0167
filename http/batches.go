package http

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"filigrane/actors"
	"filigrane/actors/batchinput"
	"filigrane/actors/batchstate"
	"filigrane/actors/jobstate"
	"filigrane/gpu"
	"filigrane/internal/problem"
	"filigrane/persistence"
)

// batchAPI serves the batch endpoints (spec 4.4). It signs the items' upload URLs, so NewUploadHost
// registers it beside the upload endpoints.
type batchAPI struct {
	s    *Server
	sign uploadSigner
}

func (s *Server) batchRoutes(sign uploadSigner) {
	b := &batchAPI{s: s, sign: sign}
	embed := []string{actors.ScopeEmbed}
	s.router.handle("POST", "/watermarks/batches", s.authed(embed, b.create))
	s.router.handle("POST", "/watermarks/batches/zip", s.authed(embed, b.createZip))
	s.router.handle("GET", "/watermarks/batches", s.authed(embed, b.list))
	s.router.handle("GET", "/watermarks/batches/{batch_id}", s.authed(embed, b.get))
	s.router.handle("POST", "/watermarks/batches/{batch_id}/start", s.authed(embed, b.start))
	s.router.handle("POST", "/watermarks/batches/{batch_id}/cancel", s.authed(embed, b.cancel))
	s.router.handle("GET", "/watermarks/batches/{batch_id}/archive", s.authed(embed, b.archive))
}

func (b *batchAPI) client() actors.BatchClient { return actors.BatchClient{Caller: b.s.cfg.Caller} }

// batchKey reads the required Idempotency-Key of a create request.
func batchKey(ctx *fasthttp.RequestCtx) (string, *apiError) {
	key := string(ctx.Request.Header.Peek("Idempotency-Key"))
	switch {
	case key == "":
		return "", newAPIError(CodeInvalidIdempotency, "batches need an Idempotency-Key header (8 to 128 letters, digits, hyphens or underscores)")
	case !jobstate.ValidIdempotencyKey(key):
		return "", newAPIError(CodeInvalidIdempotency, "Idempotency-Key must be 8 to 128 letters, digits, hyphens or underscores")
	}
	return key, nil
}

// checkOptions applies the plan and the deployment to a checked request: formats and GPU of the plan,
// the webhook endpoint (enabled, of the organization), the storage destination (verified, of the organization),
// and strict GPU mode (otherwise gpu items run on the CPU when no GPU is ready) unless the batch of this key
// exists.
func (b *batchAPI) checkOptions(c context.Context, ctx *fasthttp.RequestCtx, p *principal, batchID string, req *batchinput.Request) *apiError {
	for i, it := range req.Items {
		if !p.Plan.HasFormat(string(it.Kind.Media)) {
			return newAPIError(CodeForbiddenPlan, "items[%d]: the %s plan does not include %ss", i, p.Plan.Name, it.Kind.Noun)
		}
	}
	if req.Accelerator == jobstate.AcceleratorGPU && !p.Plan.GPU {
		return newAPIError(CodeForbiddenPlan, "the %s plan does not include GPU processing", p.Plan.Name)
	}
	if req.WebhookID != "" {
		// The batch's final event goes to this endpoint (docs/webhooks.md): it must exist and be enabled now.
		if aerr := b.s.usableWebhook(ctx, p, req.WebhookID); aerr != nil {
			return aerr
		}
	}
	if req.StorageDestinationID != "" {
		// Every item's result goes to this destination (each through its job's storage delivery): it must be
		// this organization's, enabled and verified now. Items use the default key scheme.
		if aerr := b.s.usableDestination(ctx, p.Key.OrgID, req.StorageDestinationID, ""); aerr != nil {
			return aerr
		}
	}
	if req.Accelerator == jobstate.AcceleratorGPU && b.s.cfg.GPUStrict &&
		b.s.gpuState().Snapshot(b.s.cfg.Clock.Now()).Status != gpu.StatusReady && !b.exists(c, p.Key.OrgID, batchID) {
		return b.s.gpuUnavailable(ctx)
	}
	return nil
}

// exists reports whether the batch of this key is there: strict GPU mode then lets its request go on, to be
// answered by the batch (a replay runs nothing; other items or options are 409), as gpuRefusal does for jobs.
func (b *batchAPI) exists(c context.Context, orgID, batchID string) bool {
	rep, err := b.client().Get(c, orgID, batchID)
	return err == nil && rep.Code == actors.ReplyOK && rep.Record != nil
}

func inputError(e *batchinput.Error) *apiError { return &apiError{code: e.Code, detail: e.Detail} }

func (b *batchAPI) create(ctx *fasthttp.RequestCtx, p *principal, _ map[string]string) {
	fail := func(aerr *apiError) {
		ctx.SetConnectionClose()
		writeProblem(ctx, aerr.code, aerr.detail)
	}
	if !jsonBodyType(string(ctx.Request.Header.ContentType())) {
		fail(newAPIError(CodeUnsupportedMedia, "send the body as application/json"))
		return
	}
	key, aerr := batchKey(ctx)
	if aerr != nil {
		fail(aerr)
		return
	}
	if cl := ctx.Request.Header.ContentLength(); cl > batchinput.MaxBody {
		fail(newAPIError(CodeTooLarge, "the body exceeds %d bytes", batchinput.MaxBody))
		return
	}
	body, ok, err := readSmallBody(ctx, batchinput.MaxBody)
	switch {
	case err != nil:
		fail(newAPIError(CodeBadRequest, "the body could not be read"))
		return
	case !ok:
		fail(newAPIError(CodeTooLarge, "the body exceeds %d bytes", batchinput.MaxBody))
		return
	}
	req, ierr := batchinput.ParseCreate(body)
	if ierr != nil {
		fail(inputError(ierr))
		return
	}
	c, cancel := b.s.requestContext(ctx, 2*time.Minute)
	defer cancel()
	batchID := batchstate.BatchIDFor(p.Key.OrgID, key)
	if aerr := b.checkOptions(c, ctx, p, batchID, req); aerr != nil {
		fail(aerr)
		return
	}
	spec := batchstate.Spec{
		BatchID: batchID, OrgID: p.Key.OrgID, Source: batchstate.SourceUploads,
		Archive: req.Archive, Accelerator: req.Accelerator, IdempotencyKey: key, Items: req.Specs(),
		WebhookID: req.WebhookID, StorageDestinationID: req.StorageDestinationID, OutputFormat: req.OutputFormat,
	}
	rep, err := b.client().Create(c, spec)
	if aerr := b.createReply(c, rep, err); aerr != nil {
		fail(aerr)
		return
	}
	status := 201
	if rep.Replayed {
		status = 200
	}
	b.write(c, ctx, p, rep.Record, status, true)
}

func (b *batchAPI) createReply(c context.Context, rep *actors.BatchReply, err error) *apiError {
	if err != nil {
		b.s.log(c).Error().Err(err).Msg("create batch")
		return newAPIError(CodeUnavailable, "the batch could not be created in time; retry with the same Idempotency-Key")
	}
	switch rep.Code {
	case actors.ReplyOK:
		return nil
	case actors.ReplyIdempotencyConflict:
		return newAPIError(CodeIdempotencyConflict, "this Idempotency-Key was used for a batch with other items or options, or for a batch whose records were removed")
	}
	b.s.log(c).Error().Str("code", rep.Code).Str("detail", rep.Detail).Msg("create batch")
	return newAPIError(CodeUnavailable, "the batch could not be created; retry with the same Idempotency-Key")
}

// createZip handles POST /watermarks/batches/zip: the `archive` part streams into the blob store (at most
// 55 MB), the `manifest` field is read with a small limit, then the zip's central directory is checked
// against the manifest before anything is unpacked.
func (b *batchAPI) createZip(ctx *fasthttp.RequestCtx, p *principal, _ map[string]string) {
	c, cancel := b.s.requestContext(ctx, 10*time.Minute)
	defer cancel()
	status, rec, aerr := b.createZipErr(c, ctx, p)
	if aerr != nil {
		ctx.SetConnectionClose()
		writeProblem(ctx, aerr.code, aerr.detail)
		return
	}
	b.write(c, ctx, p, rec, status, true)
}

func (b *batchAPI) createZipErr(c context.Context, ctx *fasthttp.RequestCtx, p *principal) (int, *batchstate.Record, *apiError) {
	key, aerr := batchKey(ctx)
	if aerr != nil {
		return 0, nil, aerr
	}
	mt, params, err := mime.ParseMediaType(string(ctx.Request.Header.ContentType()))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return 0, nil, newAPIError(CodeUnsupportedMedia, "send the request as multipart/form-data with the parts archive and manifest")
	}
	batchID := batchstate.BatchIDFor(p.Key.OrgID, key)
	blobKey := "zips/" + p.Key.OrgID + "/" + batchID + "/" + randomSuffix() + ".zip"
	blobs := b.s.cfg.Blobs
	keep := false
	var stored *persistence.BlobInfo
	defer func() {
		if !keep && stored != nil {
			_ = blobs.Delete(context.WithoutCancel(c), blobKey)
		}
	}()
	var manifest []byte
	mr := multipart.NewReader(bodyReader(ctx), params["boundary"])
	for parts := 0; ; parts++ {
		if parts >= maxFormParts {
			return 0, nil, newAPIError(CodeInvalidRequest, "the form has more than %d parts", maxFormParts)
		}
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, nil, errMalformedForm()
		}
		switch part.FormName() {
		case "archive":
			if stored != nil {
				return 0, nil, newAPIError(CodeInvalidRequest, "send exactly one archive")
			}
			info, err := blobs.Put(c, blobKey, &limitedReader{r: part, left: batchinput.MaxZip})
			if errors.Is(err, errFileTooLarge) {
				return 0, nil, newAPIError(CodeTooLarge, "the archive exceeds %d bytes", batchinput.MaxZip)
			}
			if err != nil {
				if isMultipartErr(err) {
					return 0, nil, errMalformedForm()
				}
				b.s.log(ctx).Error().Err(err).Msg("store batch zip")
				if aerr := lowDisk(ctx, err); aerr != nil {
					return 0, nil, aerr
				}
				return 0, nil, newAPIError(CodeUnavailable, "could not store the archive; retry")
			}
			stored = &info
		case "manifest":
			if manifest != nil {
				return 0, nil, newAPIError(CodeInvalidRequest, "send exactly one manifest")
			}
			m, err := io.ReadAll(io.LimitReader(part, batchinput.MaxBody+1))
			if err != nil {
				return 0, nil, errMalformedForm()
			}
			if len(m) > batchinput.MaxBody {
				return 0, nil, newAPIError(CodeTooLarge, "the manifest exceeds %d bytes", batchinput.MaxBody)
			}
			manifest = m
		default:
			if _, err := io.Copy(io.Discard, io.LimitReader(part, maxSmallField+1)); err != nil {
				return 0, nil, errMalformedForm()
			}
		}
	}
	if stored == nil || manifest == nil {
		return 0, nil, newAPIError(CodeInvalidRequest, "send the zip in the archive part and the manifest JSON in the manifest field")
	}
	req, ierr := batchinput.ParseManifest(manifest)
	if ierr != nil {
		return 0, nil, inputError(ierr)
	}
	if aerr := b.checkOptions(c, ctx, p, batchID, req); aerr != nil {
		return 0, nil, aerr
	}
	if _, ierr := batchinput.CheckZip(actors.NewBlobWindowReader(c, blobs, blobKey), stored.Size, req.Items); ierr != nil {
		return 0, nil, inputError(ierr)
	}
	spec := batchstate.Spec{
		BatchID: batchID, OrgID: p.Key.OrgID, Source: batchstate.SourceZip, Archive: req.Archive,
		Accelerator: req.Accelerator, IdempotencyKey: key, Items: req.Specs(), ZipBlobKey: blobKey, ZipSHA256: stored.SHA256,
		WebhookID: req.WebhookID, StorageDestinationID: req.StorageDestinationID, OutputFormat: req.OutputFormat,
	}
	rep, err := b.client().Create(c, spec)
	if aerr := b.createReply(c, rep, err); aerr != nil {
		return 0, nil, aerr
	}
	if rep.Replayed {
		return 200, rep.Record, nil // the batch has its own copy of the zip; this one goes
	}
	keep = true
	return 202, rep.Record, nil
}

// load reads a batch of the caller's organization, answering 404 itself.
func (b *batchAPI) load(c context.Context, ctx *fasthttp.RequestCtx, p *principal, id string) (*batchstate.Record, bool) {
	if !batchstate.ValidBatchID(id) {
		writeProblem(ctx, CodeNotFound, "no such batch")
		return nil, false
	}
	rep, err := b.client().Get(c, p.Key.OrgID, id)
	if err != nil {
		b.s.unavailable(ctx, err)
		return nil, false
	}
	if rep.Code != actors.ReplyOK || rep.Record == nil {
		b.noRecord(ctx, rep)
		return nil, false
	}
	return rep.Record, true
}

// noRecord answers a batch actor's reply without a record: 404 only when there is no such batch. A batch
// whose state could not be read or saved (the object storage down or frozen: internal; another activation
// writing it: retry) may well exist and go on, so it is 503 with Retry-After: a 404 there made a client give
// up a batch whose start had landed, and whose items then ran and were charged (bench chaos, storage frozen
// while a node shut down).
func (b *batchAPI) noRecord(ctx *fasthttp.RequestCtx, rep *actors.BatchReply) {
	if rep.Code == actors.ReplyNotFound || rep.Code == actors.ReplyOK {
		writeProblem(ctx, CodeNotFound, "no such batch")
		return
	}
	b.s.unavailable(ctx, fmt.Errorf("batch: %s (%s)", rep.Code, rep.Detail))
}

func (b *batchAPI) get(ctx *fasthttp.RequestCtx, p *principal, params map[string]string) {
	c, cancel := b.s.requestContext(ctx, b.s.cfg.ActorTimeout)
	defer cancel()
	rec, ok := b.load(c, ctx, p, params["batch_id"])
	if !ok {
		return
	}
	b.write(c, ctx, p, rec, 200, true)
}

func (b *batchAPI) start(ctx *fasthttp.RequestCtx, p *principal, params map[string]string) {
	c, cancel := b.s.requestContext(ctx, b.s.cfg.ActorTimeout)
	defer cancel()
	id := params["batch_id"]
	if !batchstate.ValidBatchID(id) {
		writeProblem(ctx, CodeNotFound, "no such batch")
		return
	}
	rep, err := b.client().Start(c, p.Key.OrgID, id)
	switch {
	case err != nil:
		b.s.unavailable(ctx, err)
	case rep.Code == actors.ReplyExpired:
		writeProblem(ctx, problemBatchExpired, "the draft was not started within 24 hours of its creation; create a new batch")
	case rep.Code != actors.ReplyOK || rep.Record == nil:
		b.noRecord(ctx, rep)
	case rep.Started:
		b.write(c, ctx, p, rep.Record, 202, true)
	default:
		b.write(c, ctx, p, rep.Record, 200, true)
	}
}

func (b *batchAPI) cancel(ctx *fasthttp.RequestCtx, p *principal, params map[string]string) {
	c, cancel := b.s.requestContext(ctx, b.s.cfg.ActorTimeout)
	defer cancel()
	id := params["batch_id"]
	if !batchstate.ValidBatchID(id) {
		writeProblem(ctx, CodeNotFound, "no such batch")
		return
	}
	rep, err := b.client().Cancel(c, p.Key.OrgID, id)
	switch {
	case err != nil:
		b.s.unavailable(ctx, err)
	case rep.Code != actors.ReplyOK || rep.Record == nil:
		b.noRecord(ctx, rep)
	default:
		b.write(c, ctx, p, rep.Record, 200, true)
	}
}

// list handles GET /watermarks/batches: newest first, `limit` 1 to 50 (default 20), the position in
// `cursor` (spec) or `before` (what Etchv's SDKs send); next_cursor is the last batch's id, valid for both.
func (b *batchAPI) list(ctx *fasthttp.RequestCtx, p *principal, _ map[string]string) {
	q := newListQuery(ctx)
	limit, aerr := q.limit(20, 50)
	if aerr != nil {
		writeAPIError(ctx, aerr)
		return
	}
	cursor, _ := q.value("cursor")
	before, _ := q.value("before")
	if cursor != "" && before != "" && cursor != before {
		writeProblem(ctx, CodeInvalidRequest, "send the position in cursor or before, not both")
		return
	}
	if cursor == "" {
		cursor = before
	}
	if cursor != "" && !batchstate.ValidBatchID(cursor) {
		writeProblem(ctx, CodeInvalidCursor, "the cursor is not a batch id from a previous page")
		return
	}
	c, cancel := b.s.requestContext(ctx, b.s.cfg.ActorTimeout)
	defer cancel()
	recs, more, err := actors.Batches{Store: b.s.cfg.Store}.List(c, p.Key.OrgID, cursor, limit)
	if errors.Is(err, actors.ErrBatchCursor) {
		writeProblem(ctx, CodeInvalidCursor, "the cursor names no batch of this organization")
		return
	}
	if err != nil {
		b.s.unavailable(ctx, err)
		return
	}
	data := make([]map[string]any, 0, len(recs))
	now := b.s.cfg.Clock.Now()
	for _, r := range recs {
		data = append(data, b.view(c, r, now, false))
	}
	var next *string
	if more && len(recs) > 0 {
		id := recs[len(recs)-1].BatchID
		next = &id
	}
	writeJSON(ctx, 200, map[string]any{"data": data, "next_cursor": next})
}

// archive handles GET .../archive (spec 3.5 and the archive table of spec 7).
func (b *batchAPI) archive(ctx *fasthttp.RequestCtx, p *principal, params map[string]string) {
	c, cancel := b.s.requestContext(ctx, b.s.cfg.ActorTimeout)
	defer cancel()
	rec, ok := b.load(c, ctx, p, params["batch_id"])
	if !ok {
		return
	}
	now := b.s.cfg.Clock.Now()
	switch st := rec.StatusAt(now); {
	case st == batchstate.StatusExpired:
		writeProblem(ctx, problemBatchExpired, "the batch is a draft that was not started within 24 hours")
	case st == batchstate.StatusDraft:
		writeProblem(ctx, problemBatchNotStarted, "the batch is still a draft; start it first")
	case !rec.Archive:
		writeProblem(ctx, problemArchiveNotRequested, "the batch was created without archive: true")
	case st.Started():
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(retryAfterSeconds(p.Plan)))
		writeJSON(ctx, 202, b.view(c, rec, now, false))
	case rec.ArchiveStatus == batchstate.ArchiveTooLarge:
		writeProblem(ctx, problemArchiveTooLarge, fmt.Sprintf("the batch's results exceed %d bytes", batchstate.MaxArchive))
	case rec.ArchiveStatus != batchstate.ArchiveReady:
		writeProblem(ctx, problemArchiveUnavailable, "no file of the batch succeeded, the batch was cancelled, or its zip could not be built")
	case !rec.ArchiveAvailable(now):
		writeProblem(ctx, problemArchiveExpired, "the archive expired at "+rec.ArchiveExpiresAt.UTC().Format(time.RFC3339)+"; archives are kept 24 hours")
	default:
		body, err := b.s.openBlobBody(ctx, rec.ArchiveBlobKey, 0, -1)
		if errors.Is(err, persistence.ErrNotFound) {
			writeProblem(ctx, problemArchiveExpired, "the archive is no longer stored")
			return
		}
		if err != nil { // not read is not gone: the client retries
			b.s.unavailable(ctx, err)
			return
		}
		ctx.Response.Header.Set("Content-Disposition", `attachment; filename="`+rec.BatchID+`.zip"`)
		ctx.SetStatusCode(200)
		ctx.SetContentType("application/zip")
		sendBlobBody(ctx, body, rec.ArchiveSize)
	}
}

// write answers with the batch, setting Retry-After while it runs.
func (b *batchAPI) write(c context.Context, ctx *fasthttp.RequestCtx, p *principal, rec *batchstate.Record, status int, items bool) {
	now := b.s.cfg.Clock.Now()
	if rec.StatusAt(now).Started() {
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(retryAfterSeconds(p.Plan)))
	}
	b.s.setLocation(ctx, "/watermarks/batches/"+rec.BatchID)
	writeJSON(ctx, status, b.view(c, rec, now, items))
}

func timeOrNil(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(time.RFC3339)
	return &s
}

func strOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// view renders the batch resource (spec 2.4); items are left out of list entries. A draft's items carry a
// fresh signed URL (6 hours, never past the draft's 24 hours) unless their file arrived.
func (b *batchAPI) view(c context.Context, rec *batchstate.Record, now time.Time, items bool) map[string]any {
	st := rec.StatusAt(now)
	v := rec.Summary(now)
	if !items {
		return v
	}
	list := make([]map[string]any, len(rec.Items))
	uploads := b.s.uploads()
	for i := range rec.Items {
		it := &rec.Items[i]
		iv := map[string]any{
			"index": it.Index, "filename": it.Filename, "size": it.Size, "status": it.Status,
			"error_code": strOrNil(it.ErrorCode), "error_detail": strOrNil(it.ErrorDetail), "credits": it.Credits(),
			"request_id": nil,
		}
		if it.Size == 0 {
			iv["size"] = nil // a zip item before its member was read
		}
		if it.UploadID != "" {
			iv["upload_id"] = it.UploadID
		}
		if it.Accepted() {
			iv["request_id"] = it.RequestID
			iv["status_url"] = "/watermarks/jobs/" + it.RequestID
			iv["result_url"] = "/watermarks/jobs/" + it.RequestID + "/result"
			if rec.StorageDestinationID != "" {
				iv["storage_delivery_id"] = jobstate.StorageDeliveryIDFor(it.RequestID)
			}
			iv["result_expires_at"] = nil
			if it.Result != nil {
				iv["result_expires_at"] = timeOrNil(it.Result.ExpiresAt)
			}
		}
		if it.Status == batchstate.ItemPending && it.UploadID != "" && (st == batchstate.StatusDraft || st.Started()) {
			u, _, err := uploads.Load(c, it.UploadID)
			received := err == nil && u.Status != actors.UploadPending
			iv["upload_received"] = received
			if err == nil && !received && st == batchstate.StatusDraft {
				exp := now.Add(actors.UploadURLValidity)
				if d := rec.DraftExpiresAt(); exp.After(d) {
					exp = d
				}
				signed := *u
				signed.URLExpiresAt = exp
				iv["upload"] = uploadTarget{Method: "PUT", URL: b.sign.url(&signed), ExpiresAt: exp.UTC().Format(time.RFC3339)}
			}
		} else if it.UploadID != "" {
			received := it.Accepted()
			if !received && it.Status == batchstate.ItemRejected && it.ErrorCode != batchstate.CodeUploadNotReceived {
				// Rejected for another reason (cancelled, credits, an unusable file): whether its file had
				// arrived is the upload's to say (spec 2.4: true on an item whose file already arrived).
				u, _, err := uploads.Load(c, it.UploadID)
				received = err == nil && u.Status != actors.UploadPending
			}
			iv["upload_received"] = received
		} else if rec.Source == batchstate.SourceZip {
			// A zip item's file came with the request (spec 2.4: upload_received is true on an item whose
			// file already arrived; it has no upload of its own).
			iv["upload_received"] = true
		}
		list[i] = iv
	}
	v["items"] = list
	return v
}

// Batch problem codes (internal/problem).
const (
	problemBatchExpired        = problem.BatchExpired
	problemBatchNotStarted     = problem.BatchNotStarted
	problemArchiveNotRequested = problem.ArchiveNotRequested
	problemArchiveTooLarge     = problem.ArchiveTooLarge
	problemArchiveUnavailable  = problem.ArchiveUnavailable
	problemArchiveExpired      = problem.ArchiveExpired
)
