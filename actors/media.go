package actors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"filigrane/actors/jobstate"
	"filigrane/actors/mediakind"
	"filigrane/codec"
)

// CodeFileTooLarge: the stored input is larger than its kind's limit (a job error code, docs/errors.md).
const CodeFileTooLarge = "file_too_large"

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

// processFile copies the stored input to a temporary file bounded by the kind's limit, runs the adapter, and
// streams the output back to the blob store. The temporary files are removed on every path.
func (m Media) processFile(ctx context.Context, rec *jobstate.Record, kind mediakind.Kind, a mediakind.Adapter) (jobstate.Output, *ProcessError) {
	dir, err := os.MkdirTemp(m.TempDir, "filigrane-job-")
	if err != nil {
		return jobstate.Output{}, retryable("no temporary space to process the file; the attempt is retried", err)
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "input"+kind.Extensions[0])
	if perr := m.copyInput(ctx, rec.Input.BlobKey, src, kind.MaxInput(rec.Operation)); perr != nil {
		return jobstate.Output{}, perr
	}
	if rec.Operation == jobstate.OperationDetect {
		return m.detectFile(ctx, rec, a, src)
	}
	id, err := codec.ParseID(rec.WatermarkID)
	if err != nil {
		return jobstate.Output{}, &ProcessError{Code: CodeProcessingError, Detail: "bad watermark id on the job"}
	}
	dst := filepath.Join(dir, "output."+kind.OutputExt)
	rep, err := a.Embed(ctx, src, dst, id)
	if err != nil {
		return jobstate.Output{}, adapterError(ctx, kind, err)
	}
	f, err := os.Open(dst)
	if err != nil {
		return jobstate.Output{}, retryable("the watermarked file could not be read back; the attempt is retried", err)
	}
	defer f.Close()
	key := OutputKey(rec, "watermarked."+kind.OutputExt)
	info, err := m.Blobs.Put(ctx, key, f)
	if err != nil {
		return jobstate.Output{}, retryable("the result could not be stored; the attempt is retried", err)
	}
	return jobstate.Output{BlobKey: key, Size: info.Size, SHA256: info.SHA256, ContentType: kind.OutputMIME,
		Filename: OutputFilename(rec.Input.Filename, kind.OutputExt), AssetID: AssetIDFor(rec.RequestID, AssetWatermarked),
		SourceAssetID: AssetIDFor(rec.RequestID, AssetSource), WatermarkID: rec.WatermarkID,
		Charge: kind.Price(rec.Operation, m.Catalog.Prices, rep.Info), Accelerator: jobstate.AcceleratorCPU}, nil
}

func (m Media) detectFile(ctx context.Context, rec *jobstate.Record, a mediakind.Adapter, src string) (jobstate.Output, *ProcessError) {
	kind, _ := mediakind.ByMedia(rec.Media)
	det, err := a.Detect(ctx, src)
	if err != nil {
		return jobstate.Output{}, adapterError(ctx, kind, err)
	}
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
	return jobstate.Output{BlobKey: key, Size: info.Size, SHA256: info.SHA256, ContentType: "application/json",
		Filename: "detection.json", Charge: charge, Accelerator: jobstate.AcceleratorCPU}, nil
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
// adapter's code, anything else is retried.
func adapterError(ctx context.Context, kind mediakind.Kind, err error) *ProcessError {
	var ref *mediakind.Refusal
	if errors.As(err, &ref) {
		return &ProcessError{Code: ref.Code, Detail: ref.Detail, Cause: err}
	}
	if ctx.Err() != nil {
		return retryable("the attempt was interrupted; it is retried", err)
	}
	return retryable(fmt.Sprintf("the %s could not be processed; the attempt is retried", kind.Noun), err)
}

func retryable(detail string, cause error) *ProcessError {
	return &ProcessError{Code: CodeProcessingError, Detail: detail, Retryable: true, Cause: cause}
}
