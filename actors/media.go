package actors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"filigrane/internal/problem"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"filigrane/actors/jobstate"
	"filigrane/actors/mediakind"
	"filigrane/codec"
)

// Job error codes of media processing (docs/errors.md): CodeFileTooLarge, the stored input is larger than its
// kind's limit; CodeMediaUnavailable, a program the kind needs is not installed on the node.
const (
	CodeFileTooLarge     = string(problem.FileTooLarge)
	CodeMediaUnavailable = string(problem.MediaUnavailable)
)

// Process implements Processor: it runs a job of any kind through its kind's adapter. Images are decoded in
// memory (processImage); the kinds of Files run on local files (processFile).
func (m Media) Process(ctx context.Context, rec *jobstate.Record) (jobstate.Output, *ProcessError) {
	kind, ok := mediakind.ByMedia(rec.Media)
	if !ok {
		return jobstate.Output{}, &ProcessError{Code: CodeProcessingError, Detail: fmt.Sprintf("unknown media kind %q", rec.Media)}
	}
	if kind.Media == jobstate.MediaImage {
		return m.processImage(ctx, rec)
	}
	a, ok := m.Files[kind.Media]
	if !ok {
		return jobstate.Output{}, &ProcessError{Code: CodeProcessingError, Detail: fmt.Sprintf("this deployment cannot process %ss", kind.Noun)}
	}
	return m.processFile(ctx, rec, kind, a)
}

// Supports reports whether m processes media: the edge registers the routes of the kinds it supports only.
func (m Media) Supports(media jobstate.Media) bool {
	if media == jobstate.MediaImage {
		return true
	}
	_, ok := m.Files[media]
	return ok
}

// Available reports whether this node can run op on media now, before anything is stored or held: nil, or
// a ProcessError with CodeMediaUnavailable naming the missing program.
func (m Media) Available(media jobstate.Media, op jobstate.Operation) *ProcessError {
	c, ok := m.Files[media].(mediakind.Checker)
	if !ok {
		return nil
	}
	err := c.Available(op)
	var un *mediakind.Unavailable
	if errors.As(err, &un) {
		return &ProcessError{Code: CodeMediaUnavailable, Detail: un.Detail, Cause: err}
	}
	return nil // any other answer is no reason to refuse: the work itself will tell
}

// withInput copies the stored file key to a temporary file bounded by the kind's limit of op and calls fn
// with its path and the directory fn may write in. The directory is removed on every path.
func (m Media) withInput(ctx context.Context, kind mediakind.Kind, op jobstate.Operation, key string, fn func(src, dir string) *ProcessError) *ProcessError {
	dir, err := os.MkdirTemp(m.TempDir, "filigrane-job-")
	if err != nil {
		return retryable("no temporary space to process the file; the attempt is retried", err)
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "input"+kind.Extensions[0])
	if perr := m.copyInput(ctx, key, src, kind.MaxInput(op)); perr != nil {
		return perr
	}
	return fn(src, dir)
}

// prepared is the adapter to make one request's calls on the local file src with: a's (mediakind.Preparer),
// which makes the steps they share once, or a itself. release ends them.
func prepared(a mediakind.Adapter, src string) (_ mediakind.Adapter, release func()) {
	if p, ok := a.(mediakind.Preparer); ok {
		return p.Prepare(src)
	}
	return a, func() {}
}

// fileReservation is what reserveFile holds in the decode budget: release gives it back; pages, when set,
// reserves a detection's pages under it as they arrive (detectWith passes it to the adapter).
type fileReservation struct {
	release func()
	pages   mediakind.Reserve
}

// reserveFile reserves in the decode budget the memory the adapter a (of kind) estimates op holds on the local
// file src (mediakind.Estimator), waiting until waitCtx ends; the caller calls release once the work is done. A
// probe reserves as an embed, which parses the same way and holds more. A detection by an adapter that
// reserves its pages as they arrive (mediakind.PageReserver: a PDF) reserves the file's part only, and its
// pages later, each at its own size (pageReserve). The adapters without an estimate (their work runs in other
// processes under their own limits: video) and a node without a budget reserve nothing.
func (m Media) reserveFile(ctx, waitCtx context.Context, kind mediakind.Kind, op jobstate.Operation, a mediakind.Adapter, src string) (fileReservation, *ProcessError) {
	e, ok := a.(mediakind.Estimator)
	if !ok || m.Budget == nil {
		return fileReservation{release: func() {}}, nil
	}
	est, err := e.EstimateMemory(ctx, src, op)
	if err != nil {
		return fileReservation{}, adapterError(ctx, kind, err)
	}
	tooLarge := func(capacity int64) *ProcessError {
		return &ProcessError{Code: tooLargeCode(kind), Detail: fmt.Sprintf(
			"processing this %s takes about %d MB of memory, more than this node's decode budget of %d MB",
			kind.Noun, mb(est.File), mb(capacity))}
	}
	if _, paged := e.(mediakind.PageReserver); paged && op == jobstate.OperationDetect {
		work, err := m.Budget.AcquireWork(waitCtx, est.File)
		if err != nil {
			return fileReservation{}, budgetError(err, m.Budget.Capacity(), tooLarge)
		}
		return fileReservation{release: work.Release, pages: m.pageReserve(kind, work)}, nil
	}
	need := est.Bytes
	if est.File <= m.Budget.Capacity() {
		need = min(need, m.Budget.Capacity()) // the fixed part of the work: run alone rather than never
	}
	release, perr := m.reserve(waitCtx, need, tooLarge)
	if perr != nil {
		return fileReservation{}, perr
	}
	return fileReservation{release: release}, nil
}

// pageReserve reserves a detection's pages under work, its file's part: a page that cannot fit beside that
// part even in an empty budget fails the detection at once (too large for this node); one that can waits while
// the adapter's context lives (the job's, or the synchronous request's), then fails it with CodeDecodeBusy, as
// it does when the budget breaks a deadlock by failing this detection (detections whose parses hold the
// budget, each waiting for room for a page).
func (m Media) pageReserve(kind mediakind.Kind, work *Work) mediakind.Reserve {
	return func(ctx context.Context, n int64) (func(), error) {
		release, err := work.Acquire(ctx, n)
		if err != nil {
			return nil, &pageReserveError{err: err, perr: budgetError(err, m.Budget.Capacity(), func(capacity int64) *ProcessError {
				return &ProcessError{Code: tooLargeCode(kind), Detail: fmt.Sprintf(
					"analysing a page of this %s takes about %d MB of memory beside the %d MB its parse holds, more than this node's decode budget of %d MB",
					kind.Noun, mb(n), mb(work.n), mb(capacity))}
			})}
		}
		return release, nil
	}
}

// pageReserveError is a page reservation's failure as the adapter returns it (wrapped): detectWith answers its
// ProcessError.
type pageReserveError struct {
	err  error
	perr *ProcessError
}

func (e *pageReserveError) Error() string { return e.err.Error() }
func (e *pageReserveError) Unwrap() error { return e.err }

// detectWith runs a's detection on src under res: reserving its pages through res.pages when a reserves them.
func (m Media) detectWith(ctx context.Context, kind mediakind.Kind, a mediakind.Adapter, src string, res fileReservation) (codec.Detection, *ProcessError) {
	var det codec.Detection
	var err error
	if pr, ok := a.(mediakind.PageReserver); ok && res.pages != nil {
		det, err = pr.DetectReserving(ctx, src, res.pages)
	} else {
		det, err = a.Detect(ctx, src)
	}
	var pre *pageReserveError
	switch {
	case errors.As(err, &pre):
		return codec.Detection{}, pre.perr
	case err != nil:
		return codec.Detection{}, adapterError(ctx, kind, err)
	}
	return det, nil
}

// reserve reserves need bytes of the decode budget, waiting until waitCtx ends: a need above the whole budget
// is refused with tooLarge's error, a wait that ends first with CodeDecodeBusy (retryable).
func (m Media) reserve(waitCtx context.Context, need int64, tooLarge func(capacity int64) *ProcessError) (func(), *ProcessError) {
	release, err := m.Budget.Acquire(waitCtx, need)
	if err != nil {
		return nil, budgetError(err, m.Budget.Capacity(), tooLarge)
	}
	return release, nil
}

// budgetError is the ProcessError of a failed reservation: tooLarge's for ErrDecodeTooLarge, else
// CodeDecodeBusy (retryable).
func budgetError(err error, capacity int64, tooLarge func(capacity int64) *ProcessError) *ProcessError {
	if errors.Is(err, ErrDecodeTooLarge) {
		return tooLarge(capacity)
	}
	return &ProcessError{Code: CodeDecodeBusy, Detail: "the node's decode memory is in use; retry later", Retryable: true, Cause: err}
}

// tooLargeCode is the job error code of a file of kind that is too large for this node.
func tooLargeCode(kind mediakind.Kind) string {
	switch kind.Media {
	case jobstate.MediaDocument:
		return string(problem.DocumentTooLarge)
	case jobstate.MediaVideo:
		return string(problem.VideoTooLarge)
	}
	return CodeImageTooLarge
}

// ProbeStored probes a stored file of a file kind: the edge learns what limits, deadline and price need
// before it accepts the request. It waits at most budgetWait for decode memory (then fails with
// CodeDecodeBusy).
func (m Media) ProbeStored(ctx context.Context, kind mediakind.Kind, op jobstate.Operation, key string, budgetWait time.Duration) (mediakind.Info, *ProcessError) {
	a, ok := m.Files[kind.Media]
	if !ok {
		return mediakind.Info{}, &ProcessError{Code: CodeProcessingError, Detail: fmt.Sprintf("this deployment cannot process %ss", kind.Noun)}
	}
	wctx, cancel := context.WithTimeout(ctx, budgetWait)
	defer cancel()
	var info mediakind.Info
	perr := m.withInput(ctx, kind, op, key, func(src, _ string) *ProcessError {
		a, release := prepared(a, src)
		defer release()
		// Under op: a refusal of the estimate names what could not be done (watermarked, or checked); the
		// reservation is the file's part either way (a detection's pages are reserved only as they arrive).
		res, perr := m.reserveFile(ctx, wctx, kind, op, a, src)
		if perr != nil {
			return perr
		}
		defer res.release()
		probe := a.Probe
		if dp, ok := a.(mediakind.DetectProber); ok && op == jobstate.OperationDetect {
			// A detection is not refused for what only marking refuses: the documented way to mark a PDF
			// that is to be signed is to mark it and sign afterwards, and the signed copy must still be read.
			probe = dp.ProbeDetect
		}
		var err error
		if info, err = probe(ctx, src); err != nil {
			return adapterError(ctx, kind, err)
		}
		return nil
	})
	return info, perr
}

// DetectStoredFile detects on a stored file of a file kind, snapping to the organization's issued ids; the
// edge's synchronous detection of documents uses it. It waits at most budgetWait for decode memory (then
// fails with CodeDecodeBusy).
func (m Media) DetectStoredFile(ctx context.Context, kind mediakind.Kind, orgID, key string, budgetWait time.Duration) (codec.Detection, *ProcessError) {
	a, ok := m.Files[kind.Media]
	if !ok {
		return codec.Detection{}, &ProcessError{Code: CodeProcessingError, Detail: fmt.Sprintf("this deployment cannot process %ss", kind.Noun)}
	}
	wctx, cancel := context.WithTimeout(ctx, budgetWait)
	defer cancel()
	var det codec.Detection
	perr := m.withInput(ctx, kind, jobstate.OperationDetect, key, func(src, _ string) *ProcessError {
		a, release := prepared(a, src)
		defer release()
		res, perr := m.reserveFile(ctx, wctx, kind, jobstate.OperationDetect, a, src)
		if perr != nil {
			return perr
		}
		defer res.release()
		d, perr := m.detectWith(ctx, kind, a, src, res)
		if perr != nil {
			return perr
		}
		var err error
		if det, err = m.snapIssued(ctx, orgID, d); err != nil {
			return detectError(err)
		}
		return nil
	})
	return det, perr
}

// processFile runs the adapter on a temporary copy of the stored input and streams the output back to the
// blob store.
func (m Media) processFile(ctx context.Context, rec *jobstate.Record, kind mediakind.Kind, a mediakind.Adapter) (jobstate.Output, *ProcessError) {
	var out jobstate.Output
	if b, ok := a.(mediakind.WorkBounded); ok && rec.MaxWork > 0 {
		// The bound the accepting node checked, not this node's: what was accepted is not refused later.
		a = b.WithMaxWork(rec.MaxWork)
	}
	perr := m.withInput(ctx, kind, rec.Operation, rec.Input.BlobKey, func(src, dir string) *ProcessError {
		a, release := prepared(a, src)
		defer release()
		// A job waits for decode memory as long as its context lives (the lease is renewed meanwhile).
		res, perr := m.reserveFile(ctx, ctx, kind, rec.Operation, a, src)
		if perr != nil {
			return perr
		}
		defer res.release()
		if rec.Operation == jobstate.OperationDetect {
			out, perr = m.detectFile(ctx, rec, a, src, res)
		} else {
			out, perr = m.embedFile(ctx, rec, kind, a, src, filepath.Join(dir, "output."+kind.OutputExt))
		}
		return perr
	})
	return out, perr
}

func (m Media) embedFile(ctx context.Context, rec *jobstate.Record, kind mediakind.Kind, a mediakind.Adapter, src, dst string) (jobstate.Output, *ProcessError) {
	id, err := codec.ParseID(rec.WatermarkID)
	if err != nil {
		return jobstate.Output{}, &ProcessError{Code: CodeProcessingError, Detail: "bad watermark id on the job"}
	}
	rep, err := a.Embed(ctx, src, dst, id)
	if err != nil {
		return jobstate.Output{}, adapterError(ctx, kind, err)
	}
	f, err := os.Open(dst)
	if err != nil {
		return jobstate.Output{}, retryable("the watermarked file could not be read back; the attempt is retried", err)
	}
	defer f.Close()
	// More units than a video of the longest duration has means timestamps that jump about (a crafted or
	// broken file whose frames were still all marked): the receipt then goes without units rather than the
	// embed failing.
	units, _ := jobstate.EncodeEmbedUnits(rep.Segments)
	mime, ext := kind.OutputType(rep.Info.Format)
	key := OutputKey(rec, "watermarked."+ext)
	info, err := m.Blobs.Put(ctx, key, f)
	if err != nil {
		return jobstate.Output{}, retryable("the result could not be stored; the attempt is retried", err)
	}
	return jobstate.Output{BlobKey: key, Size: info.Size, SHA256: info.SHA256, ContentType: mime,
		Filename: OutputFilename(rec.Input.Filename, ext), AssetID: AssetIDFor(rec.RequestID, AssetWatermarked),
		SourceAssetID: AssetIDFor(rec.RequestID, AssetSource), WatermarkID: rec.WatermarkID,
		Charge: embedCharge(kind, rec, m.Catalog.Prices, rep.Info), Accelerator: jobstate.AcceleratorCPU,
		Media: rep.Info.MediaInfo(), SourceMedia: sourceInfo(rep).MediaInfo(), Units: units}, nil
}

// embedCharge is the charge of rec's embed that produced done: the price of the frames it processed, at most
// the price of the frames its probe declared at acceptance (rec.FrameCount), which the hold was priced on, and
// never more than the hold itself. The client pays for no frame that was not processed (an edit list shows
// fewer than the track holds). The video adapter stops an embed at the frames the declared price pays for, so
// the caps bind only on a record accepted before frames were priced, or where this node's prices differ from
// those of the node that took the hold (a catalog changed in between): the client was promised the hold, and a
// charge above it would be refused by the record, leaving the finished work to be retried until its attempts
// ran out. Both prices take the duration of the embed's own probe of the same file, as the hold's did.
func embedCharge(kind mediakind.Kind, rec *jobstate.Record, prices mediakind.Rates, done mediakind.Info) int64 {
	declared := done
	declared.Frames = rec.FrameCount
	return min(kind.Price(jobstate.OperationEmbed, prices, done), kind.Price(jobstate.OperationEmbed, prices, declared),
		rec.CreditsHeld)
}

// sourceInfo is the Info of an embed's input.
func sourceInfo(rep mediakind.Report) mediakind.Info {
	if rep.Source == (mediakind.Info{}) {
		return rep.Info
	}
	return rep.Source
}

func (m Media) detectFile(ctx context.Context, rec *jobstate.Record, a mediakind.Adapter, src string, res fileReservation) (jobstate.Output, *ProcessError) {
	kind, _ := mediakind.ByMedia(rec.Media)
	det, perr := m.detectWith(ctx, kind, a, src, res)
	if perr != nil {
		return jobstate.Output{}, perr
	}
	var err error
	if det, err = m.snapIssued(ctx, rec.OrgID, det); err != nil {
		return jobstate.Output{}, detectError(err)
	}
	return m.storeDetection(ctx, rec, det, kind.Price(rec.Operation, m.Catalog.Prices, mediakind.Info{}))
}

// storeDetection stores a detection's JSON as the job's result.
func (m Media) storeDetection(ctx context.Context, rec *jobstate.Record, det codec.Detection, charge int64) (jobstate.Output, *ProcessError) {
	body, err := json.Marshal(det)
	if err != nil {
		return jobstate.Output{}, &ProcessError{Code: CodeProcessingError, Detail: "the detection result could not be encoded", Cause: err}
	}
	key := OutputKey(rec, "detection.json")
	info, err := m.Blobs.Put(ctx, key, bytes.NewReader(body))
	if err != nil {
		return jobstate.Output{}, retryable("the result could not be stored; the attempt is retried", err)
	}
	summary, err := detectionSummary(det)
	if err != nil {
		return jobstate.Output{}, &ProcessError{Code: CodeProcessingError, Detail: "the detection result could not be encoded", Cause: err}
	}
	return jobstate.Output{BlobKey: key, Size: info.Size, SHA256: info.SHA256, ContentType: "application/json",
		Filename: "detection.json", Detection: summary, Charge: charge, Accelerator: jobstate.AcceleratorCPU}, nil
}

// detectionSummary is the job record's copy of a detection's findings for its webhook event
// (jobstate.Output.Detection): the result's fields with at most jobstate.MaxSummaryUnits units, and
// units_total, the number of units in the whole result.
func detectionSummary(det codec.Detection) (string, error) {
	units := det.Units
	if len(units) > jobstate.MaxSummaryUnits {
		units = units[:jobstate.MaxSummaryUnits]
	}
	if units == nil {
		units = []codec.Unit{}
	}
	b, err := json.Marshal(struct {
		Watermarked bool         `json:"watermarked"`
		Confidence  float64      `json:"confidence"`
		WatermarkID *string      `json:"watermark_id"`
		Units       []codec.Unit `json:"units"`
		UnitsTotal  int          `json:"units_total"`
	}{det.Watermarked, det.Confidence, det.WatermarkID, units, len(det.Units)})
	if err != nil {
		return "", err
	}
	if len(b) > jobstate.MaxDetectionSummary {
		return "", fmt.Errorf("detection summary of %d bytes exceeds %d", len(b), jobstate.MaxDetectionSummary)
	}
	return string(b), nil
}

// copyInput copies the stored file key to the local file dst, refusing it past limit bytes.
func (m Media) copyInput(ctx context.Context, key, dst string, limit int64) *ProcessError {
	r, err := m.Blobs.Get(ctx, key, 0, -1)
	if err != nil {
		return retryable("the input file could not be read from storage; the attempt is retried", err)
	}
	defer r.Close()
	f, err := os.Create(dst)
	if err != nil {
		return retryable("no temporary space to process the file; the attempt is retried", err)
	}
	n, err := io.Copy(f, io.LimitReader(r, limit+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return retryable("the input file could not be copied for processing; the attempt is retried", err)
	case n > limit:
		return &ProcessError{Code: CodeFileTooLarge, Detail: fmt.Sprintf("the file is larger than this request allows (%d bytes)", limit)}
	}
	return nil
}

// adapterError is the client's view of an adapter's error: a refusal of the input fails the job with the
// adapter's code, a missing program fails it with media_unavailable (another attempt on this node would meet
// the same), anything else is retried.
func adapterError(ctx context.Context, kind mediakind.Kind, err error) *ProcessError {
	var ref *mediakind.Refusal
	if errors.As(err, &ref) {
		return &ProcessError{Code: ref.Code, Detail: ref.Detail, Cause: err}
	}
	var un *mediakind.Unavailable
	if errors.As(err, &un) {
		return &ProcessError{Code: CodeMediaUnavailable, Detail: un.Detail, Cause: err}
	}
	if ctx.Err() != nil {
		return retryable("the attempt was interrupted; it is retried", err)
	}
	return retryable(fmt.Sprintf("the %s could not be processed; the attempt is retried", kind.Noun), err)
}

func retryable(detail string, cause error) *ProcessError {
	return &ProcessError{Code: CodeProcessingError, Detail: detail, Retryable: true, Cause: cause}
}
