package actors

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"image"
	"io"
	"slices"
	"strings"
	"time"

	"filigrane/actors/jobstate"
	"filigrane/actors/mediakind"
	"filigrane/codec"
	"filigrane/codec/accel"
	"filigrane/codec/imageio"
	"filigrane/codec/markfile"
	"filigrane/internal/clock"
	"filigrane/internal/problem"
	"filigrane/persistence"
)

// Job error codes of image processing: the error table's (internal/problem), which gives each its status.
const (
	CodeInvalidImage    = string(problem.InvalidImage)
	CodeImageTooLarge   = string(problem.ImageTooLarge)
	CodeImageTooComplex = string(problem.ImageTooComplex)
	CodeProcessingError = string(problem.ProcessingError)
	// CodeDecodeBusy: the node's decode memory stayed in use for the whole wait (synchronous detection; a
	// job waits, and ends with it only when every attempt found the memory in use).
	CodeDecodeBusy = string(problem.DecodeBusy)
)

// MaxImagePixels is the pixel limit of image embedding (spec 8: 40 megapixels).
const MaxImagePixels = 40_000_000

// MaxDetectPixels is the pixel limit of image detection. The spec sets none besides the file size (192 MB
// through an upload); detection decodes into the decoder's own layout (a third of NRGBA for a JPEG), analyses
// a region of bounded aspect ratio reduced to 48 MP (codec.DetectRegion, codec.Detect), and reserves its
// memory in the decode budget, which refuses a file whose estimate exceeds the whole budget.
const MaxDetectPixels = 200_000_000

// headBytes is how much of a stored file is read to estimate the cost of decoding it.
const headBytes = 2 << 20

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
	// Budget is the node's decode memory; nil leaves decodes unbounded (tools and tests).
	Budget *DecodeBudget
	// Files are the adapters of the kinds processed as files on local disk (documents, videos), by media;
	// a kind without one is refused. Images are decoded in memory (processImage).
	Files map[jobstate.Media]mediakind.Adapter
	// TempDir holds the files of file adapters while they work; "" is the system's.
	TempDir string
	// GPUs runs image work of accelerator=gpu jobs on a ready GPU (media_gpu.go); nil runs it on the CPU.
	GPUs GPUs
	// Clock times GPU work (the GPU stays warm from the end of its last work); nil is the system clock.
	Clock clock.Clock
}

// processImage runs an image job: decoded in memory under the decode budget.
func (m Media) processImage(ctx context.Context, rec *jobstate.Record) (jobstate.Output, *ProcessError) {
	if rec.Operation == jobstate.OperationEmbed {
		// A job waits for decode memory as long as its context lives (the lease is renewed meanwhile).
		pic, release, perr := m.decodeFull(ctx, ctx, rec.Input.BlobKey)
		if perr != nil {
			return jobstate.Output{}, perr
		}
		defer release()
		return m.embed(ctx, rec, pic)
	}
	det, acc, perr := m.detectStored(ctx, ctx, rec.AcceleratorRequested, rec.OrgID, rec.Input.BlobKey)
	if perr != nil {
		return jobstate.Output{}, perr
	}
	out, perr := m.storeDetection(ctx, rec, det, m.chargeOn(acc, m.Catalog.Prices.Detect))
	out.Accelerator = acc
	return out, perr
}

// stored is a stored file read whole under a decode-memory reservation.
type stored struct {
	data    []byte
	release func()
}

// load estimates the cost of decoding the stored file from its first bytes, refuses it when it has more than
// maxPixels, reserves need(cost) plus the file's size in the decode budget (waiting until waitCtx ends), and
// reads the file. The caller must call release once the decoded image is no longer used.
func (m Media) load(ctx, waitCtx context.Context, key string, maxPixels int64, need func(imageio.Cost) int64) (*stored, *ProcessError) {
	info, err := m.Blobs.Stat(ctx, key)
	if err != nil {
		return nil, &ProcessError{Code: CodeProcessingError, Detail: "the input file could not be read from storage; the attempt is retried",
			Retryable: true, Cause: err}
	}
	cost, err := imageio.EstimateCostAt(blobReaderAt{ctx: ctx, blobs: m.Blobs, key: key}, info.Size, headBytes)
	if err != nil {
		if errors.Is(err, errBlobRead) {
			return nil, &ProcessError{Code: CodeProcessingError, Detail: "input unavailable", Retryable: true}
		}
		return nil, ImageError(err)
	}
	if px := int64(cost.Width) * int64(cost.Height); px > maxPixels {
		return nil, &ProcessError{Code: CodeImageTooLarge, Detail: fmt.Sprintf(
			"the image has %dx%d pixels; the limit is %d megapixels", cost.Width, cost.Height, maxPixels/1_000_000)}
	}
	release := func() {}
	if m.Budget != nil {
		n := info.Size + need(cost)
		var perr *ProcessError
		release, perr = m.reserve(waitCtx, n, func(capacity int64) *ProcessError {
			return &ProcessError{Code: CodeImageTooLarge, Detail: fmt.Sprintf(
				"decoding this %dx%d %s takes about %d MB, more than this node's decode budget of %d MB",
				cost.Width, cost.Height, cost.Format, mb(n), mb(capacity))}
		})
		if perr != nil {
			return nil, perr
		}
	}
	data, err := m.read(ctx, key, -1)
	if err != nil {
		release()
		return nil, &ProcessError{Code: CodeProcessingError, Detail: "input unavailable", Retryable: true}
	}
	return &stored{data: data, release: release}, nil
}

// errBlobRead marks a failure to read the stored file (not the file's fault).
var errBlobRead = errors.New("read stored file")

// blobReaderAt reads a stored file by ranges, so that a header can be read where it lies without reading
// the whole file.
type blobReaderAt struct {
	ctx   context.Context
	blobs persistence.Blobs
	key   string
}

func (b blobReaderAt) ReadAt(p []byte, off int64) (int, error) {
	r, err := b.blobs.Get(b.ctx, b.key, off, int64(len(p)))
	if err != nil {
		return 0, fmt.Errorf("%w: %w", errBlobRead, err)
	}
	defer r.Close()
	n, err := io.ReadFull(r, p)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = io.EOF
	} else if err != nil && !errors.Is(err, io.EOF) {
		err = fmt.Errorf("%w: %w", errBlobRead, err)
	}
	return n, err
}

func (m Media) read(ctx context.Context, key string, n int64) ([]byte, error) {
	r, err := m.Blobs.Get(ctx, key, 0, n)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// decodeFull decodes a stored image for embedding: upright, NRGBA or NRGBA64, under the 40 MP limit, with
// the embed's own memory reserved too.
func (m Media) decodeFull(ctx, waitCtx context.Context, key string) (*imageio.Picture, func(), *ProcessError) {
	st, perr := m.load(ctx, waitCtx, key, MaxImagePixels, func(c imageio.Cost) int64 {
		return c.Decode + codec.EmbedMemory(c.Width, c.Height, c.Deep)
	})
	if perr != nil {
		return nil, nil, perr
	}
	pic, err := imageio.DecodeBytesContext(ctx, st.data, imageio.Limits{MaxPixels: MaxImagePixels})
	if err != nil {
		st.release()
		return nil, nil, ImageError(err)
	}
	return pic, st.release, nil
}

// detectStored decodes a stored image for detection (MaxDetectPixels, the decoder's own layout, with the
// detector's memory reserved too: waiting for it until waitCtx ends) and detects, on a ready GPU when acc asks
// for one (else, or when the device fails, on the CPU); it says where the detection ran. The GPU is taken before
// the decode, so that the decoder writes the pixels into the device's page-locked memory (devicePixels) and the
// device loads them without copying them first.
func (m Media) detectStored(ctx, waitCtx context.Context, acc jobstate.Accelerator, orgID, key string) (codec.Detection, jobstate.Accelerator, *ProcessError) {
	st, perr := m.load(ctx, waitCtx, key, MaxDetectPixels, func(c imageio.Cost) int64 {
		r := codec.DetectRegion(image.Rect(0, 0, c.Width, c.Height))
		return c.Analysis + codec.DetectMemory(r.Dx(), r.Dy())
	})
	if perr != nil {
		return codec.Detection{}, jobstate.AcceleratorCPU, perr
	}
	defer st.release()
	dev, done := m.gpuFor(acc)
	alloc, releasePixels := devicePixels(dev)
	defer releasePixels() // before st.release: the pixels are part of the reserved decode memory
	img, _, err := imageio.DecodeForAnalysisInto(ctx, st.data,
		imageio.Limits{MaxPixels: MaxDetectPixels, MaxBytes: imageio.DefaultMaxBytes}, alloc)
	if err != nil {
		done()
		return codec.Detection{}, jobstate.AcceleratorCPU, ImageError(err)
	}
	var det codec.Detection
	ran, err := runOn(dev, done, func(dev accel.Device) (err error) {
		det, err = m.detectImageOn(ctx, dev, orgID, img)
		return err
	})
	if err != nil {
		return codec.Detection{}, ran, detectError(err)
	}
	return det, ran, nil
}

// ImageError maps an imageio error to the job error a client sees. The detail is a sentence of ours: the
// decoder's error reads as a Go error chain, and a read error can carry the blob store's keys and paths;
// it stays in Cause, for the logs.
func ImageError(err error) *ProcessError {
	switch {
	case errors.Is(err, imageio.ErrTooManyPixels):
		return &ProcessError{Code: CodeImageTooLarge, Cause: err,
			Detail: "the image has more pixels than this request allows (40 megapixels to embed, 200 to detect)"}
	case errors.Is(err, imageio.ErrTooComplex):
		return &ProcessError{Code: CodeImageTooComplex, Cause: err,
			Detail: fmt.Sprintf("the image file has more structure than we decode (limits: %d JPEG scans, %d PNG chunks, %d TIFF directories, %d GIF frames)",
				imageio.MaxJPEGScans, imageio.MaxPNGChunks, imageio.MaxTIFFIFDs, imageio.MaxGIFFrames)}
	case errors.Is(err, imageio.ErrTooLarge):
		return &ProcessError{Code: CodeImageTooLarge, Detail: "the image file is larger than this request allows", Cause: err}
	case errors.Is(err, imageio.ErrUnsupportedFormat):
		return &ProcessError{Code: CodeInvalidImage, Cause: err,
			Detail: "the file is not an image in a supported format (JPEG, PNG, GIF, BMP, TIFF, WebP, PPM/PGM; no animation)"}
	case errors.Is(err, imageio.ErrCorrupt):
		return &ProcessError{Code: CodeInvalidImage, Detail: "the image is corrupt or truncated", Cause: err}
	}
	return &ProcessError{Code: CodeProcessingError, Detail: "the image could not be read; the attempt is retried", Retryable: true, Cause: err}
}

func (m Media) embed(ctx context.Context, rec *jobstate.Record, pic *imageio.Picture) (jobstate.Output, *ProcessError) {
	id, err := codec.ParseID(rec.WatermarkID)
	if err != nil {
		return jobstate.Output{}, &ProcessError{Code: CodeProcessingError, Detail: "bad watermark id on the job"}
	}
	format, err := imageOutputFormat(rec)
	if err != nil {
		return jobstate.Output{}, &ProcessError{Code: CodeProcessingError, Detail: "bad output format on the job", Cause: err}
	}
	// markfile verifies that the mark reads back from the encoded file (retrying stronger) before it is stored.
	// On a GPU the embedding and the read-back run on the device and JPEG and WebP are encoded on the CPU.
	var res markfile.Result
	acc, err := m.onGPU(rec, func(dev accel.Device) (err error) {
		res, err = markfile.EmbedOn(ctx, m.Codec, dev, pic, id, format, codec.EmbedOptions{PSNR: m.PSNR})
		return err
	})
	switch {
	case errors.Is(err, markfile.ErrAlpha):
		// Flattening would change the picture the client sent; the client picks png or webp instead.
		return jobstate.Output{}, &ProcessError{Code: CodeInvalidImage, Cause: err,
			Detail: "the image has transparent pixels, which JPEG cannot keep; ask for output_format png or webp"}
	case errors.Is(err, markfile.ErrNotReadable):
		return jobstate.Output{}, &ProcessError{Code: CodeInvalidImage, Detail: "this image cannot carry a readable mark: " + err.Error()}
	case ctx.Err() != nil:
		return jobstate.Output{}, &ProcessError{Code: CodeProcessingError, Detail: ctx.Err().Error(), Retryable: true}
	case err != nil:
		// The codec refuses images it cannot carry a mark in (too small); retrying cannot help.
		detail := "the image cannot carry a watermark"
		if errors.Is(err, codec.ErrTooSmall) {
			detail = "the image is too small to carry a watermark (the short side needs at least 256 pixels)"
		}
		return jobstate.Output{}, &ProcessError{Code: CodeInvalidImage, Detail: detail, Cause: err}
	}
	b := pic.Image.Bounds()
	size := jobstate.MediaInfo{Width: b.Dx(), Height: b.Dy()}
	buf := bytes.NewReader(res.Data)
	key := OutputKey(rec, "watermarked."+format.Ext())
	info, err := m.Blobs.Put(ctx, key, buf)
	if err != nil {
		return jobstate.Output{}, &ProcessError{Code: CodeProcessingError, Detail: "the result could not be stored; the attempt is retried",
			Retryable: true, Cause: err}
	}
	return jobstate.Output{BlobKey: key, Size: info.Size, SHA256: info.SHA256, ContentType: format.ContentType(),
		Filename: OutputFilename(rec.Input.Filename, format.Ext()), AssetID: AssetIDFor(rec.RequestID, AssetWatermarked),
		SourceAssetID: AssetIDFor(rec.RequestID, AssetSource), WatermarkID: rec.WatermarkID,
		Charge: m.chargeOn(acc, m.Catalog.Prices.ImageEmbed), Accelerator: acc,
		Media: size, SourceMedia: size}, nil
}

// DetectImage runs detection and, when the blind decode failed but left a soft word, snaps it to an id the
// organization issued if one lies within the codec's safe distance (docs/codec.md). A snapped result is
// reported as watermarked with that id. An image longer than codec.MaxDetectAspect times its short side is
// analysed on its top-left region of that aspect (codec.DetectRegion), which bounds the detector's memory.
func (m Media) DetectImage(ctx context.Context, orgID string, img image.Image) (codec.Detection, error) {
	return m.detectImageOn(ctx, nil, orgID, img)
}

// detectImageOn is DetectImage with the codec's passes on dev (nil: the CPU); a device failure wraps
// codec.ErrDevice.
func (m Media) detectImageOn(ctx context.Context, dev accel.Device, orgID string, img image.Image) (codec.Detection, error) {
	if r := codec.DetectRegion(img.Bounds()); r != img.Bounds() {
		if sub, ok := img.(interface {
			SubImage(image.Rectangle) image.Image
		}); ok {
			img = sub.SubImage(r)
		}
	}
	if err := ctx.Err(); err != nil {
		return codec.Detection{}, fmt.Errorf("detection not started: %w", err)
	}
	if dev == nil {
		return m.snapIssued(ctx, orgID, m.Codec.Detect(img))
	}
	det, err := m.Codec.DetectOn(ctx, dev, img)
	if err != nil {
		return codec.Detection{}, err
	}
	return m.snapIssued(ctx, orgID, det)
}

// snapIssued reports a detection whose blind decode failed but left a soft word as the organization's issued
// id within the codec's safe distance, if there is one (docs/codec.md).
func (m Media) snapIssued(ctx context.Context, orgID string, det codec.Detection) (codec.Detection, error) {
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

// DetectStored decodes a stored image and detects; the edge's synchronous detection uses it. It waits at most
// budgetWait for decode memory (then fails with CodeDecodeBusy); ctx cancels the work (a client that hung up).
func (m Media) DetectStored(ctx context.Context, orgID, key string, budgetWait time.Duration) (codec.Detection, *ProcessError) {
	det, _, perr := m.detectStoredOn(ctx, jobstate.AcceleratorCPU, orgID, key, budgetWait)
	return det, perr
}

// detectStoredOn is DetectStored on a ready GPU when acc asks for one, and says where it ran.
func (m Media) detectStoredOn(ctx context.Context, acc jobstate.Accelerator, orgID, key string, budgetWait time.Duration) (codec.Detection, jobstate.Accelerator, *ProcessError) {
	wctx, cancel := context.WithTimeout(ctx, budgetWait)
	defer cancel()
	return m.detectStored(ctx, wctx, acc, orgID, key)
}

// detectError is the client's view of a detection that could not finish (the store did not answer).
func detectError(err error) *ProcessError {
	return &ProcessError{Code: CodeProcessingError, Detail: "detection could not read the organization's issued watermarks; retry",
		Retryable: true, Cause: err}
}

// OutputKey is the blob key of a job's result file name.
func OutputKey(rec *jobstate.Record, name string) string {
	return "outputs/" + rec.OrgID + "/" + rec.RequestID + "/" + name
}

// OutputKeys lists every key an attempt of rec can have stored its result under, whether or not a record
// names it: an attempt that stored its result and then lost its lease, or whose success report was refused or
// never sent (its node died between the two writes), leaves a file no record points to, and blob stores are
// not listed. The key depends only on the request (its operation, media and output_format) and, for a video,
// on the input's container (MP4 or MOV), so both of those are listed. A key that holds nothing costs one
// delete that finds nothing.
func OutputKeys(rec *jobstate.Record) []string {
	if rec.Operation == jobstate.OperationDetect {
		return []string{OutputKey(rec, "detection.json")}
	}
	if rec.Media == jobstate.MediaImage {
		format, err := imageOutputFormat(rec)
		if err != nil {
			return nil // no attempt can run, so none stored anything
		}
		return []string{OutputKey(rec, "watermarked."+format.Ext())}
	}
	kind, ok := mediakind.ByMedia(rec.Media)
	if !ok {
		return nil
	}
	var keys []string
	// OutputType returns the kind's one extension, but for a MOV video "mov": these two cover all it returns.
	for _, container := range []string{"", "MOV"} {
		_, ext := kind.OutputType(container)
		if key := OutputKey(rec, "watermarked."+ext); !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	return keys
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

// SafeInputName is SafeFilename for the name of an input file, keeping its extension: a base name that keeps
// nothing (a name in another script, "фото.jpg") becomes fallback ("image.jpg"), where SafeFilename alone
// leaves the bare extension ("jpg") as the source asset's name and the download's filename.
func SafeInputName(name, fallback string) string {
	i := strings.LastIndexByte(name, '.')
	if i <= 0 {
		return cmp.Or(SafeFilename(name), fallback)
	}
	ext := SafeFilename(name[i+1:])
	if ext == "" || len(ext) > 16 {
		return cmp.Or(SafeFilename(name), fallback)
	}
	base := SafeFilename(name[:i])
	if len(base) > 100-1-len(ext) {
		base = strings.Trim(base[:100-1-len(ext)], "_.")
	}
	return cmp.Or(base, fallback) + "." + ext
}

// InputName is the stored name of an input file (the source asset's name, its download's filename):
// SafeInputName, with "."+ext added when the name has no extension, so that a file sent as "file" (an SDK's
// default) downloads as "file.jpg", which an OS can open. ext is the extension of the format the service
// detected (mediakind.Kind.InputExt). A name with an extension keeps it, even one that does not match the
// content: the client chose it, the content type says what the file is, and the result's name takes the
// output's extension anyway (OutputFilename). An extension is 1 to 16 letters and digits after the last '.',
// at least one a letter: "scan.2024" has none and becomes "scan.2024.jpg".
func InputName(name, fallback, ext string) string {
	safe := SafeInputName(name, fallback)
	if ext == "" || hasExtension(safe) {
		return safe
	}
	if len(safe) > 100-1-len(ext) {
		safe = strings.Trim(safe[:100-1-len(ext)], "_.")
	}
	return cmp.Or(safe, fallback) + "." + ext
}

// hasExtension reports whether a SafeFilename-clean name ends in an extension as InputName counts them.
func hasExtension(name string) bool {
	i := strings.LastIndexByte(name, '.')
	if i <= 0 || i == len(name)-1 || len(name)-i-1 > 16 {
		return false
	}
	letter := false
	for _, r := range name[i+1:] {
		switch {
		case r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
			letter = true
		case r < '0' || r > '9':
			return false
		}
	}
	return letter
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

// imageOutputFormat is the file format an image embed job writes: its output_format, PNG when unset.
func imageOutputFormat(rec *jobstate.Record) (markfile.Format, error) {
	return markfile.ParseFormat(string(rec.OutputFormat.OrPNG()))
}
