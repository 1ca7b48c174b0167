package actors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"filigrane/actors/jobstate"
	"filigrane/codec"
	"filigrane/codec/imageio"
	"filigrane/codec/markfile"
	"filigrane/persistence"
)

// Job error codes of image processing; the edge maps them to statuses (docs/errors.md).
const (
	CodeInvalidImage    = "invalid_image"
	CodeImageTooLarge   = "image_too_large"
	CodeProcessingError = "processing_error"
)

// MaxImagePixels is the pixel limit of every image request (spec 8: 40 megapixels).
const MaxImagePixels = 40_000_000

// maxDetectSnapIDs bounds how many issued ids a damaged detection is compared with.
const maxDetectSnapIDs = 100_000

// Media runs the codec on stored files: the image processor of the worker pool and the edge's synchronous
// detection share it.
type Media struct {
	Blobs   persistence.Blobs
	Store   persistence.Store
	Codec   *codec.Codec
	Catalog Catalog
	// PSNR is the embedding's PSNR floor; 0 means codec.DefaultPSNR.
	PSNR float64
}

// Process implements Processor for image jobs.
func (m Media) Process(ctx context.Context, rec *jobstate.Record) (jobstate.Output, *ProcessError) {
	if rec.Media != jobstate.MediaImage {
		return jobstate.Output{}, &ProcessError{Code: CodeProcessingError, Detail: "only images can be processed yet"}
	}
	pic, perr := m.decode(ctx, rec.Input.BlobKey)
	if perr != nil {
		return jobstate.Output{}, perr
	}
	switch rec.Operation {
	case jobstate.OperationEmbed:
		return m.embed(ctx, rec, pic)
	default:
		return m.detectJob(ctx, rec, pic)
	}
}

func (m Media) decode(ctx context.Context, key string) (*imageio.Picture, *ProcessError) {
	r, err := m.Blobs.Get(ctx, key, 0, -1)
	if err != nil {
		return nil, &ProcessError{Code: CodeProcessingError, Detail: "input unavailable", Retryable: true}
	}
	defer r.Close()
	pic, err := imageio.Decode(r, imageio.Limits{MaxPixels: MaxImagePixels})
	if err != nil {
		return nil, ImageError(err)
	}
	return pic, nil
}

// ImageError maps an imageio error to the job error a client sees.
func ImageError(err error) *ProcessError {
	switch {
	case errors.Is(err, imageio.ErrTooManyPixels), errors.Is(err, imageio.ErrTooLarge):
		return &ProcessError{Code: CodeImageTooLarge, Detail: err.Error()}
	case errors.Is(err, imageio.ErrUnsupportedFormat), errors.Is(err, imageio.ErrCorrupt):
		return &ProcessError{Code: CodeInvalidImage, Detail: err.Error()}
	}
	return &ProcessError{Code: CodeProcessingError, Detail: err.Error(), Retryable: true}
}

func (m Media) embed(ctx context.Context, rec *jobstate.Record, pic *imageio.Picture) (jobstate.Output, *ProcessError) {
	id, err := codec.ParseID(rec.WatermarkID)
	if err != nil {
		return jobstate.Output{}, &ProcessError{Code: CodeProcessingError, Detail: "bad watermark id on the job"}
	}
	// markfile verifies that the mark reads back from the encoded file (retrying stronger) before it is stored.
	res, err := markfile.Embed(ctx, m.Codec, pic, id, markfile.PNG, codec.EmbedOptions{PSNR: m.PSNR})
	switch {
	case errors.Is(err, markfile.ErrNotReadable):
		return jobstate.Output{}, &ProcessError{Code: CodeInvalidImage, Detail: "this image cannot carry a readable mark: " + err.Error()}
	case ctx.Err() != nil:
		return jobstate.Output{}, &ProcessError{Code: CodeProcessingError, Detail: ctx.Err().Error(), Retryable: true}
	case err != nil:
		// The codec refuses images it cannot carry a mark in (too small); retrying cannot help.
		return jobstate.Output{}, &ProcessError{Code: CodeInvalidImage, Detail: err.Error()}
	}
	buf := bytes.NewReader(res.Data)
	key := outputKey(rec, "watermarked.png")
	info, err := m.Blobs.Put(ctx, key, buf)
	if err != nil {
		return jobstate.Output{}, &ProcessError{Code: CodeProcessingError, Detail: "store output", Retryable: true}
	}
	return jobstate.Output{BlobKey: key, Size: info.Size, SHA256: info.SHA256, ContentType: "image/png",
		Filename: OutputFilename(rec.Input.Filename, "png"), AssetID: AssetIDFor(rec.RequestID, AssetWatermarked),
		SourceAssetID: AssetIDFor(rec.RequestID, AssetSource), WatermarkID: rec.WatermarkID,
		Charge: m.Catalog.Prices.ImageEmbed, Accelerator: jobstate.AcceleratorCPU}, nil
}

func (m Media) detectJob(ctx context.Context, rec *jobstate.Record, pic *imageio.Picture) (jobstate.Output, *ProcessError) {
	det, err := m.DetectImage(ctx, rec.OrgID, pic)
	if err != nil {
		return jobstate.Output{}, &ProcessError{Code: CodeProcessingError, Detail: err.Error(), Retryable: true}
	}
	body, err := json.Marshal(det)
	if err != nil {
		return jobstate.Output{}, &ProcessError{Code: CodeProcessingError, Detail: err.Error()}
	}
	key := outputKey(rec, "detection.json")
	info, err := m.Blobs.Put(ctx, key, bytes.NewReader(body))
	if err != nil {
		return jobstate.Output{}, &ProcessError{Code: CodeProcessingError, Detail: "store result", Retryable: true}
	}
	return jobstate.Output{BlobKey: key, Size: info.Size, SHA256: info.SHA256, ContentType: "application/json",
		Filename: "detection.json", Charge: m.Catalog.Prices.Detect, Accelerator: jobstate.AcceleratorCPU}, nil
}

// DetectImage runs detection and, when the blind decode failed but left a soft word, snaps it to an id the
// organization issued if one lies within the codec's safe distance (docs/codec.md). A snapped result is
// reported as watermarked with that id.
func (m Media) DetectImage(ctx context.Context, orgID string, pic *imageio.Picture) (codec.Detection, error) {
	det := m.Codec.Detect(pic.Image)
	if det.Watermarked || det.Soft == nil || m.Store == nil {
		return det, nil
	}
	issued, err := Assets{Store: m.Store}.IssuedWatermarks(ctx, orgID, maxDetectSnapIDs)
	if err != nil {
		return det, fmt.Errorf("read issued watermarks: %w", err)
	}
	known := make([]codec.ID, 0, len(issued))
	for _, s := range issued {
		if id, err := codec.ParseID(s); err == nil {
			known = append(known, id)
		}
	}
	if id, ok := m.Codec.Snap(det, known); ok {
		s := id.String()
		det.Watermarked, det.WatermarkID = true, &s
		for i := range det.Units {
			det.Units[i].Watermarked, det.Units[i].WatermarkID = true, &s
		}
	}
	return det, nil
}

// DetectStored decodes a stored image and detects; the edge's synchronous detection uses it.
func (m Media) DetectStored(ctx context.Context, orgID, key string) (codec.Detection, *ProcessError) {
	pic, perr := m.decode(ctx, key)
	if perr != nil {
		return codec.Detection{}, perr
	}
	det, err := m.DetectImage(ctx, orgID, pic)
	if err != nil {
		return codec.Detection{}, &ProcessError{Code: CodeProcessingError, Detail: err.Error(), Retryable: true}
	}
	return det, nil
}

func outputKey(rec *jobstate.Record, name string) string {
	return "outputs/" + rec.OrgID + "/" + rec.RequestID + "/" + name
}

// OutputFilename names a result after its input: the base name, "-watermarked", the new extension; only
// letters, digits, '.', '_' and '-' survive (DESIGN.md 5), so the name is safe in Content-Disposition.
func OutputFilename(input, ext string) string {
	base := input
	if i := strings.LastIndexAny(base, `/\`); i >= 0 {
		base = base[i+1:]
	}
	if i := strings.LastIndexByte(base, '.'); i > 0 {
		base = base[:i]
	}
	base = SafeFilename(base)
	if base == "" {
		base = "file"
	}
	return base + "-watermarked." + ext
}

// SafeFilename keeps letters, digits, '.', '_' and '-', replacing other runs with '_', at most 100 bytes.
func SafeFilename(s string) string {
	var b strings.Builder
	lastUnderscore := false
	for _, r := range s {
		ok := r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
		if ok {
			b.WriteRune(r)
			lastUnderscore = false
		} else if !lastUnderscore {
			b.WriteByte('_')
			lastUnderscore = true
		}
		if b.Len() >= 100 {
			break
		}
	}
	return strings.Trim(b.String(), "_.")
}
