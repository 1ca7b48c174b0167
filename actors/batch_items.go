package actors

import (
	"archive/zip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"filigrane/actors/assetid"
	"filigrane/actors/batchinput"
	"filigrane/actors/batchstate"
	"filigrane/actors/jobstate"
	"filigrane/actors/mediakind"
	"filigrane/codec/imageio"
	"filigrane/internal/problem"
	"filigrane/persistence"
	"filigrane/persistence/diskspace"
)

// pollItem reads item i's job and mirrors it onto the record; false when the record could not be written.
func (a *batchActor) pollItem(ctx actor.Context, c context.Context, i int) bool {
	it := a.rec.Items[i]
	rep, err := JobClient{Caller: a.deps.Caller}.Get(c, a.rec.OrgID, it.RequestID)
	if err != nil || rep.Code != ReplyOK || rep.Record == nil {
		a.deps.Logger.Warn().Err(err).Str("batch", a.id).Int("item", i).Interface("reply", rep).Msg("read item job")
		return true
	}
	job := rep.Record
	ok, err := a.update(ctx, func(r *batchstate.Record, now time.Time) error {
		switch {
		case job.Status.Active():
			return r.Observe(i, batchstate.ItemStatus(job.Status))
		case !job.Committed():
			return nil // its charge or refund is not settled yet; the next look sees it
		case job.Status == jobstate.StatusSucceeded:
			out := job.Output
			ext := resultExt(job)
			return r.Succeed(i, out.Charge, batchstate.Result{AssetID: out.AssetID, SourceAssetID: out.SourceAssetID,
				BlobKey: out.BlobKey, Size: out.Size, ContentType: out.ContentType, Ext: ext, ExpiresAt: job.ResultExpiresAt}, now)
		default:
			return r.Fail(i, job.ErrorCode, job.ErrorDetail, now)
		}
	})
	if err != nil {
		a.deps.Logger.Warn().Err(err).Str("batch", a.id).Int("item", i).Msg("item outcome refused")
	}
	return ok
}

// submitItem checks pending item i and submits its job. It returns false when submitting should stop for
// now (no free slot, storage unavailable, the record could not be written).
func (a *batchActor) submitItem(ctx actor.Context, c context.Context, i int) bool {
	rec := a.rec
	it := rec.Items[i]
	kind, _ := mediakind.ByMedia(it.Media)
	reject := func(code, detail string) bool {
		ok, err := a.update(ctx, func(r *batchstate.Record, now time.Time) error { return r.Reject(i, code, detail, now) })
		if err != nil {
			a.deps.Logger.Error().Err(err).Str("batch", a.id).Int("item", i).Msg("reject item")
			return false
		}
		return ok
	}
	var input jobstate.Input
	uploads := Uploads{Store: a.deps.Store, Clock: a.deps.Clock}
	settleUpload := func(fn func(u *Upload, now time.Time) error) {
		if rec.Source != batchstate.SourceUploads {
			return
		}
		if _, err := uploads.Update(c, it.UploadID, fn); err != nil {
			a.deps.Logger.Warn().Err(err).Str("batch", a.id).Int("item", i).Msg("settle item upload")
		}
	}
	switch rec.Source {
	case batchstate.SourceUploads:
		u, err := uploads.Update(c, it.UploadID, func(u *Upload, now time.Time) error {
			return u.Claim(it.RequestID, UploadKind(it.Media), UploadMedia(it.Media), now)
		})
		switch {
		case errors.Is(err, ErrUploadNotReceived), errors.Is(err, ErrUploadExpired), errors.Is(err, ErrUploadNotFound):
			return reject(batchstate.CodeUploadNotReceived, "the file was not uploaded to the item's URL before the batch started")
		case errors.Is(err, ErrUploadRejected):
			return reject(u.ErrorCode, u.Error)
		case err != nil:
			a.deps.Logger.Warn().Err(err).Str("batch", a.id).Int("item", i).Msg("claim item upload")
			return false
		}
		input = jobstate.Input{BlobKey: u.BlobKey, SHA256: u.SHA256, Size: u.Size}
	case batchstate.SourceZip:
		info, key, perr := a.unpackMember(c, i)
		if perr != nil {
			if perr.Retryable {
				a.deps.Logger.Warn().Err(perr.Cause).Str("batch", a.id).Int("item", i).Msg("unpack zip member")
				return false
			}
			return reject(perr.Code, perr.Detail)
		}
		input = jobstate.Input{BlobKey: key, SHA256: info.SHA256, Size: info.Size}
	}
	info, perr := a.probe(c, kind, input.BlobKey)
	if perr != nil {
		if perr.Retryable {
			settleUpload(func(u *Upload, _ time.Time) error { return u.Release(it.RequestID) })
			a.deps.Logger.Warn().Err(perr.Cause).Str("batch", a.id).Int("item", i).Msg("probe item")
			return false
		}
		settleUpload(func(u *Upload, _ time.Time) error { return u.Reject(it.RequestID, perr.Code, perr.Detail) })
		return reject(perr.Code, perr.Detail)
	}
	input.Filename = SafeInputName(it.Filename, string(kind.Media))
	input.ContentType = kind.ContentType(info.Format)
	price := a.deps.Catalog.PriceOf(kind, jobstate.OperationEmbed, info)
	hold := price
	if rec.Accelerator == jobstate.AcceleratorGPU && a.deps.Catalog.Prices.GPUHoldMultiplier > 0 {
		hold = price * a.deps.Catalog.Prices.GPUHoldMultiplier
	}
	spec := jobstate.Spec{
		RequestID: it.RequestID, OrgID: rec.OrgID, Operation: jobstate.OperationEmbed, Media: kind.Media,
		Format: info.Format, FrameCount: max(info.Frames, 1), MaxWork: info.MaxWork, AcceleratorRequested: rec.Accelerator, BatchID: rec.BatchID,
		StorageDestinationID: rec.StorageDestinationID, IdempotencyKey: batchstate.ItemIdempotencyKey(rec.BatchID, i),
		Input: input, WatermarkID: it.WatermarkID,
	}
	if kind.Media == jobstate.MediaImage {
		// The batch's output_format is for its images; documents and videos keep their own format.
		spec.OutputFormat = rec.OutputFormat
	}
	rep, err := JobClient{Caller: a.deps.Caller}.Submit(c, JobSubmit{Spec: spec, Hold: hold, Slot: true, Batch: true})
	if err != nil {
		settleUpload(func(u *Upload, _ time.Time) error { return u.Release(it.RequestID) })
		a.deps.Logger.Warn().Err(err).Str("batch", a.id).Int("item", i).Msg("submit item job")
		return false
	}
	switch rep.Code {
	case ReplyOK:
	case ReplyConcurrencyLimit:
		settleUpload(func(u *Upload, _ time.Time) error { return u.Release(it.RequestID) })
		return false // the item waits, pending, for a slot
	case ReplyInsufficientCredits:
		settleUpload(func(u *Upload, _ time.Time) error { return u.Release(it.RequestID) })
		ok, err := a.update(ctx, func(r *batchstate.Record, now time.Time) error {
			return r.RejectFrom(i, batchstate.CodeInsufficientCredits, "the organization ran out of credits before this file started", now)
		})
		if err != nil {
			a.deps.Logger.Error().Err(err).Str("batch", a.id).Msg("reject items without credits")
		}
		return ok
	default:
		settleUpload(func(u *Upload, _ time.Time) error { return u.Release(it.RequestID) })
		a.deps.Logger.Error().Str("batch", a.id).Int("item", i).Str("code", rep.Code).Str("detail", rep.Detail).Msg("submit item job")
		if rep.Code == ReplyIdempotencyConflict || rep.Code == ReplyInvalid {
			return reject(string(problem.Internal), "the file's job could not be created")
		}
		return false
	}
	settleUpload(func(u *Upload, now time.Time) error { return u.Consume(it.RequestID, now) })
	ok, err := a.update(ctx, func(r *batchstate.Record, now time.Time) error { return r.Accept(i, rep.Record.CreditsHeld, now) })
	if err != nil {
		a.deps.Logger.Error().Err(err).Str("batch", a.id).Int("item", i).Msg("accept item")
		return false
	}
	if !ok {
		a.undoOrphanedSubmit(c, i, it.RequestID)
	}
	return ok
}

// undoOrphanedSubmit runs after this activation submitted item i's job and could not save the acceptance:
// another activation may own the batch now (a node that is shutting down still runs its activations while
// the cluster hands their identities to others) and may have rejected the item meanwhile, as a cancel rejects
// pending items, seeing no job to cancel. Such a job must not run on and be charged for an item the batch
// reports rejected: when the batch's record now says so, the job is cancelled. A record still showing the
// item pending or active needs nothing: its owner submits it again (the same job) or follows it.
func (a *batchActor) undoOrphanedSubmit(c context.Context, i int, requestID string) {
	rec, _, err := Batches{Store: a.deps.Store}.Load(c, a.id)
	if err != nil {
		a.deps.Logger.Warn().Err(err).Str("batch", a.id).Int("item", i).Msg("after a refused acceptance: cannot read the batch")
		return
	}
	if i >= len(rec.Items) || rec.Items[i].Status != batchstate.ItemRejected {
		return
	}
	if _, err := (JobClient{Caller: a.deps.Caller}).call(c, requestID, &JobCancel{RequestID: requestID}); err != nil {
		a.deps.Logger.Warn().Err(err).Str("batch", a.id).Int("item", i).Msg("cancel the job of an item the batch rejected")
		return
	}
	a.deps.Logger.Warn().Str("batch", a.id).Int("item", i).Str("job", requestID).
		Msg("cancelled the job of an item another activation rejected meanwhile")
}

// batchProbeBudgetWait is how long an item's probe waits for decode memory (a PDF's parse): the batch's actor
// waits meanwhile, and an item whose probe found the memory in use is submitted again later.
const batchProbeBudgetWait = 2 * time.Second

// probe reads what a job needs of an item's stored file (format, frames, duration for the price), refusing
// files the job would refuse, before anything is held.
func (a *batchActor) probe(c context.Context, kind mediakind.Kind, key string) (mediakind.Info, *ProcessError) {
	if kind.Media != jobstate.MediaImage {
		return a.env.Media.ProbeStored(c, kind, jobstate.OperationEmbed, key, batchProbeBudgetWait)
	}
	r, err := a.env.Blobs.Get(c, key, 0, 2<<20)
	if err != nil {
		return mediakind.Info{}, retryable("stored file unavailable", err)
	}
	head, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		return mediakind.Info{}, retryable("stored file unavailable", err)
	}
	format, cfg, err := imageio.DecodeConfigBytes(head)
	if err != nil {
		perr := ImageError(err)
		if perr.Code != CodeInvalidImage {
			perr = &ProcessError{Code: CodeInvalidImage, Detail: "the file is not an image we can read"}
		}
		return mediakind.Info{}, perr
	}
	if px := int64(cfg.Width) * int64(cfg.Height); px > kind.MaxPixels(jobstate.OperationEmbed) {
		return mediakind.Info{}, &ProcessError{Code: string(problem.ImageTooLarge),
			Detail: fmt.Sprintf("the image has %dx%d pixels; the limit is %d megapixels", cfg.Width, cfg.Height, kind.MaxPixels(jobstate.OperationEmbed)/1_000_000)}
	}
	return mediakind.Info{Format: strings.ToUpper(format), Width: cfg.Width, Height: cfg.Height, Frames: 1}, nil
}

// zipSource is a zip batch's request zip, opened once per activation.
type zipSource struct {
	members *batchinput.Members
}

// memberKey is the input blob of item reqID unpacked from a batch zip: derived, so that unpacking again
// after a crash writes the same bytes to the same key instead of leaving a copy behind.
func memberKey(orgID, reqID string) string { return "inputs/" + orgID + "/" + reqID + "/member" }

// unpackMember stores member i of the request zip as the item's input (once: a stored copy of the right
// size is reused). Members are unpacked one at a time, streamed from the stored zip into the blob store.
func (a *batchActor) unpackMember(c context.Context, i int) (persistence.BlobInfo, string, *ProcessError) {
	it := a.rec.Items[i]
	key := memberKey(a.rec.OrgID, it.RequestID)
	if info, err := a.env.Blobs.Stat(c, key); err == nil && info.Size == it.Size {
		return info, key, nil
	}
	if a.zip == nil {
		st, err := a.env.Blobs.Stat(c, a.rec.ZipBlobKey)
		if err != nil {
			return persistence.BlobInfo{}, "", retryable("stored zip unavailable", err)
		}
		items := make([]batchinput.Item, len(a.rec.Items))
		for j, x := range a.rec.Items {
			k, _ := mediakind.ByMedia(x.Media)
			items[j] = batchinput.Item{Filename: x.Filename, Kind: k}
		}
		m, aerr := batchinput.CheckZip(NewBlobWindowReader(context.WithoutCancel(c), a.env.Blobs, a.rec.ZipBlobKey), st.Size, items)
		if aerr != nil {
			// Checked when the request arrived; a stored zip that no longer passes is damaged.
			return persistence.BlobInfo{}, "", &ProcessError{Code: string(aerr.Code), Detail: aerr.Detail}
		}
		a.zip = &zipSource{members: m}
	}
	rc, err := a.zip.members.Open(i)
	if err != nil {
		return persistence.BlobInfo{}, "", &ProcessError{Code: string(problem.InvalidZip), Detail: "the zip member could not be unpacked", Cause: err}
	}
	defer rc.Close()
	info, err := a.env.Blobs.Put(c, key, rc)
	if err != nil {
		if errors.Is(err, batchinput.ErrMemberSize) || errors.Is(err, zip.ErrChecksum) || errors.Is(err, zip.ErrFormat) || errors.Is(err, zip.ErrAlgorithm) {
			return persistence.BlobInfo{}, "", &ProcessError{Code: string(problem.InvalidZip), Detail: "the zip member is damaged: it does not unpack to its declared size and checksum", Cause: err}
		}
		return persistence.BlobInfo{}, "", retryable("could not store the unpacked member", err)
	}
	return info, key, nil
}

// windowReader reads a blob by 1 MiB windows, so that zip parsing (many small reads) costs one blob read
// per window. It is not safe for concurrent use.
type windowReader struct {
	ctx   context.Context
	blobs persistence.Blobs
	key   string
	off   int64
	buf   []byte
}

// NewBlobWindowReader reads the blob key through 1 MiB windows (zip central directories and members).
func NewBlobWindowReader(ctx context.Context, blobs persistence.Blobs, key string) io.ReaderAt {
	return &windowReader{ctx: ctx, blobs: blobs, key: key, off: -1}
}

const readWindow = 1 << 20

func (w *windowReader) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		pos := off + int64(n)
		if w.off < 0 || pos < w.off || pos >= w.off+int64(len(w.buf)) {
			r, err := w.blobs.Get(w.ctx, w.key, pos, readWindow)
			if err != nil {
				return n, err
			}
			b, err := io.ReadAll(r)
			r.Close()
			if err != nil {
				return n, err
			}
			if len(b) == 0 {
				return n, io.EOF
			}
			w.off, w.buf = pos, b
		}
		n += copy(p[n:], w.buf[pos-w.off:])
	}
	return n, nil
}

// manifestEntry is one line of the archive's manifest.json.
type manifestEntry struct {
	Index       int     `json:"index"`
	Filename    string  `json:"filename"`
	Source      string  `json:"source_filename"`
	RequestID   *string `json:"request_id"`
	WatermarkID string  `json:"watermark_id,omitempty"`
	AssetID     string  `json:"asset_id,omitempty"`
	Status      string  `json:"status"`
	ErrorCode   *string `json:"error_code"`
}

// startAssembly builds the archive in a goroutine once it holds one of the node's assembly slots and reports
// to the actor (the slot taken, then the outcome); the actor keeps answering reads meanwhile. A crash leaves
// the batch assembling, and the next activation builds it again; a node that stops while the goroutine waits
// for a slot leaves it so too. The build lasts no longer than its activation (a.stopAssembly, called when the
// actor stops): an archive finished for a stopped activation would reach no one, the next activation builds
// its own under another key, and nothing would ever delete the first.
func (a *batchActor) startAssembly(ctx actor.Context) {
	rec := a.rec.Clone()
	root, self := ctx.ActorSystem().Root, ctx.Self()
	env, deps := a.env, a.deps
	c, cancel := context.WithCancel(deps.lifetime())
	a.stopAssembly = cancel
	go func() {
		select {
		case env.Assemblies <- struct{}{}:
		case <-c.Done():
			return
		}
		root.Send(self, &batchAssemblyStarted{})
		out := assembleArchive(c, env, deps, rec)
		<-env.Assemblies // before the outcome: whoever reads the batch ended finds the slot free
		root.Send(self, out)
	}()
}

// archiveBuildLimit bounds one archive build.
const archiveBuildLimit = 30 * time.Minute

// archiveEntryOverhead bounds what the zip format adds per entry (local header, directory entry, name).
const archiveEntryOverhead = 512

func assembleArchive(life context.Context, env *BatchEnv, deps *Deps, rec *batchstate.Record) *batchArchived {
	// Bounded by the activation's life (within the node's): a stopping node or activation abandons the build
	// as a crash would (its store is closing, or its outcome would reach no one), and the batch's next
	// activation builds it again.
	c, cancel := context.WithTimeout(life, archiveBuildLimit)
	defer cancel()
	total := int64(64 << 10) // the manifest
	for _, it := range rec.Items {
		if it.Status == batchstate.ItemSucceeded {
			total += it.Result.Size + archiveEntryOverhead
		}
	}
	if total > batchstate.MaxArchive {
		return &batchArchived{outcome: batchstate.ArchiveTooLarge}
	}
	token := RandomToken()
	key := "archives/" + rec.OrgID + "/" + rec.BatchID + "/" + token + ".zip"
	// Before the first byte: the zip is listed for the sweeper's purge pass at the latest time its archive
	// could expire (built within the 30 minutes above, kept ArchiveRetention after). A zip whose outcome no
	// activation records (the node crashed after the upload, or the activation stopped between the upload and
	// reading its outcome) is then deleted with the archive it would have been, instead of staying for ever
	// (no record names it, and blob stores are not listed). Not indexed, not built: the next activation tries.
	purgeAt := deps.Clock.Now().Add(archiveBuildLimit + batchstate.ArchiveRetention + time.Hour)
	if _, err := deps.Store.CompareAndSet(c, purgeKey(purgeAt, rec.BatchID+".build-"+token), persistence.NoVersion, []byte(key)); err != nil {
		deps.Logger.Error().Err(err).Str("batch", rec.BatchID).Msg("index archive for purging")
		return &batchArchived{outcome: batchstate.ArchiveFailed, lowDisk: errors.Is(err, diskspace.ErrLow)}
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeArchive(c, env, deps, rec, pw)) }()
	info, err := env.Blobs.Put(c, key, pr)
	pr.CloseWithError(err)
	if err != nil {
		deps.Logger.Error().Err(err).Str("batch", rec.BatchID).Msg("assemble archive")
		_ = env.Blobs.Delete(context.WithoutCancel(c), key)
		return &batchArchived{outcome: batchstate.ArchiveFailed, lowDisk: errors.Is(diskspace.MarkFull(err), diskspace.ErrLow)}
	}
	return &batchArchived{outcome: batchstate.ArchiveReady, key: key, size: info.Size}
}

// writeArchive streams the zip: each result stored as it is (PNG, JPEG, WebP, PDF and MP4 are compressed already), in
// item order, then manifest.json. A result whose asset was deleted is listed as failed with
// `result_unavailable`.
func writeArchive(c context.Context, env *BatchEnv, deps *Deps, rec *batchstate.Record, w io.Writer) error {
	zw := zip.NewWriter(w)
	files, failed := []manifestEntry{}, []manifestEntry{}
	assets := Assets{Store: deps.Store}
	for i := range rec.Items {
		it := &rec.Items[i]
		e := manifestEntry{Index: it.Index, Source: it.Filename, Status: string(it.Status)}
		if it.Accepted() {
			id := it.RequestID
			e.RequestID = &id
		}
		if it.Status != batchstate.ItemSucceeded {
			code := it.ErrorCode
			e.Filename, e.ErrorCode = it.Filename, &code
			failed = append(failed, e)
			continue
		}
		e.Filename, e.WatermarkID = batchstate.ArchiveName(it), it.WatermarkID
		e.AssetID = assetid.Canonical(it.Result.AssetID, it.RequestID, AssetWatermarked)
		as, _, err := assets.Get(c, it.Result.AssetID)
		var body io.ReadCloser
		if err == nil && as.DeletedAt == nil {
			body, err = env.Blobs.Get(c, it.Result.BlobKey, 0, -1)
		}
		if err != nil || as.DeletedAt != nil {
			if body != nil {
				body.Close()
			}
			if err != nil && !errors.Is(err, persistence.ErrNotFound) {
				return fmt.Errorf("read result of item %d: %w", i, err)
			}
			code := string(problem.ResultUnavailable)
			e.Status, e.ErrorCode = "failed", &code
			failed = append(failed, e)
			continue
		}
		f, err := zw.CreateHeader(&zip.FileHeader{Name: e.Filename, Method: zip.Store, Modified: rec.CreatedAt})
		if err == nil {
			_, err = io.Copy(f, body)
		}
		body.Close()
		if err != nil {
			return fmt.Errorf("write result of item %d: %w", i, err)
		}
		files = append(files, e)
	}
	m, err := json.MarshalIndent(map[string]any{"batch_id": rec.BatchID, "files": files, "failed": failed}, "", "  ")
	if err != nil {
		return err
	}
	f, err := zw.CreateHeader(&zip.FileHeader{Name: "manifest.json", Method: zip.Deflate, Modified: rec.CreatedAt})
	if err != nil {
		return err
	}
	if _, err := f.Write(m); err != nil {
		return err
	}
	return zw.Close()
}

// resultExt is the extension of a succeeded item job's output (the archive member's): an image's is that of
// the format the job wrote (output_format: png, jpg or webp), a video's that of its container (the output's
// file name: mp4 or mov), other kinds' their one output format's.
func resultExt(job *jobstate.Record) string {
	if job.Media == jobstate.MediaImage {
		if f, err := imageOutputFormat(job); err == nil {
			return f.Ext()
		}
	}
	if job.Output != nil {
		if ext := strings.TrimPrefix(path.Ext(job.Output.Filename), "."); ext != "" {
			return ext
		}
	}
	if k, ok := mediakind.ByMedia(job.Media); ok {
		return k.OutputExt
	}
	return "png"
}
