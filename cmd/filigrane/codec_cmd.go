package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image"
	"io"
	"os"
	"path/filepath"
	"strings"

	"filigrane/codec"
	"filigrane/codec/imageio"
	"filigrane/codec/markfile"
	"filigrane/codec/pdf"
	"filigrane/codec/video"
)

const codecUsage = `usage:
  filigrane codec embed --data '{"k":"v"}' [--strength 1] [--psnr 38] [--key-file F] IN OUT.png|OUT.jpg|OUT.webp
  filigrane codec embed --data '{"k":"v"}' [--psnr 42] [--crf 18] [--preset medium] IN.mp4|IN.mov OUT
  filigrane codec embed --data '{"k":"v"}' [--darkening 4] [--key-file F] IN.pdf OUT.pdf
  filigrane codec detect [--key-file F] [--rendered] IN

embed marks IN with the watermark id of the JSON object given by --data (SHA-256 of its RFC 8785 canonical
form; --data @FILE reads it from FILE) and writes OUT as PNG, as JPEG (quality 95, 4:4:4 chroma) when OUT
ends in .jpg or .jpeg, or as lossless WebP (8 bits per channel) when it ends in .webp. EXIF orientation is applied to the pixels; the ICC profile and the EXIF are kept (orientation 1, the output's
size, no thumbnail: an unmarked copy would ship beside the mark); PNG also keeps
alpha and 16-bit depth (JPEG refuses transparent images); of an animated GIF only the first frame is marked. --strength is perceptual (the mark's amplitude in units of the local visibility threshold: textured
areas carry the mark, flat ones almost nothing); --psnr is a floor. The mark is read back from the encoded
output before OUT is written; if it does not read back even at a higher strength, nothing is written and the
exit status is 1. It prints the watermark id, the measured PSNR and the strength applied.

Video (.mp4, .mov, .m4v by extension): every frame is marked and re-encoded with x264 (--crf, --preset);
OUT keeps the container, audio is copied, rotation and metadata are kept; ffmpeg and ffprobe must be installed
(scripts/setup.sh). Video detection reports one unit per second of video.

A PDF (chosen by the .pdf extension of IN) is written as a PDF: text, vectors, links, outlines, metadata and
the creation date are kept, page and XMP thumbnails and applications' private data (/PieceInfo; unmarked copies) removed; the id is stored with a MAC in the document structure and drawn over every page as a faint pattern
(--darkening: its peak darkening on white, in 8-bit levels, 1 to 8). It prints the watermark id, the page count
and the sizes, and what became of a PDF/A identification: a PDF/A-1 input (or PDF/A-2/-3 without a PDF/A
output intent) loses it, the pattern being transparency. PDFs that are encrypted, signed, XFA forms or carry
JavaScript are refused with the reason.

detect prints the detection result as JSON: watermarked, confidence, watermark_id (null when nothing was
recovered) and units (for a PDF one per page). A PDF is detected from its structure when that is intact, else
by rendering its pages with mutool (--rendered skips the structure).

The key is read from --key-file, else from the environment variable FILIGRANE_CODEC_KEY, else the public
development key is used (with a warning). Marks can only be detected with the key that embedded them.

Exit status: 0 on success, 1 when an input cannot be read or processed, 2 for usage errors.
`

// maxDataBytes is the service's limit on the data object (spec: "non-empty JSON object, up to 8 KB").
const maxDataBytes = 8 << 10

// runCodec is the offline codec: it works on local files with no server or data directory.
func runCodec(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, codecUsage)
		return 2
	}
	switch args[0] {
	case "embed":
		return codecEmbed(ctx, args[1:], stdout, stderr)
	case "detect":
		return codecDetect(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, codecUsage)
		return 0
	}
	fmt.Fprintf(stderr, "filigrane codec: unknown subcommand %q\n\n%s", args[0], codecUsage)
	return 2
}

// codecFlags are the flags both subcommands share.
type codecFlags struct {
	fs        *flag.FlagSet
	keyFile   string
	maxPixels int64
}

func newCodecFlags(name string, stderr io.Writer) *codecFlags {
	f := &codecFlags{fs: flag.NewFlagSet("filigrane codec "+name, flag.ContinueOnError)}
	f.fs.SetOutput(stderr)
	f.fs.Usage = func() { fmt.Fprint(stderr, codecUsage) }
	f.fs.StringVar(&f.keyFile, "key-file", "", "file holding the deployment key (default: $FILIGRANE_CODEC_KEY, else the development key)")
	f.fs.Int64Var(&f.maxPixels, "max-pixels", imageio.DefaultMaxPixels, "refuse images with more pixels than this")
	return f
}

// parseInterleaved parses flags that may appear before, between or after the positional arguments.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// key returns the deployment key: from --key-file, else $FILIGRANE_CODEC_KEY, else the development key (with a
// warning on w).
func (f *codecFlags) key(w io.Writer) ([]byte, error) {
	switch env := os.Getenv("FILIGRANE_CODEC_KEY"); {
	case f.keyFile != "":
		b, err := os.ReadFile(f.keyFile)
		if err != nil {
			return nil, fmt.Errorf("reading key file: %w", err)
		}
		// A trailing newline from `echo key > file` is not part of the key.
		return bytes.TrimSpace(b), nil
	case env != "":
		return []byte(env), nil
	}
	fmt.Fprintln(w, "filigrane: warning: using the public development key; set FILIGRANE_CODEC_KEY or --key-file")
	return []byte(codec.DevelopmentKey), nil
}

// codec returns a codec keyed as described at key.
func (f *codecFlags) codec(stderr io.Writer) (*codec.Codec, error) {
	key, err := f.key(stderr)
	if err != nil {
		return nil, err
	}
	c, err := codec.New(key)
	if err != nil {
		return nil, fmt.Errorf("invalid key: %w", err)
	}
	return c, nil
}

func readPicture(path string, maxPixels int64) (*imageio.Picture, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	pic, err := imageio.Decode(file, imageio.Limits{MaxPixels: maxPixels})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return pic, nil
}

// readForDetection decodes an image file the way the service's detection does (imageio.DecodeForAnalysis: the
// decoder's own pixel layout, a JPEG's Y plane as it is, no EXIF rotation) and keeps the region the service
// analyses (codec.DetectRegion), so that the command and the API read the same luma and give the same verdict.
func readForDetection(ctx context.Context, path string, maxPixels int64) (image.Image, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	img, _, err := imageio.DecodeForAnalysis(ctx, data, imageio.Limits{MaxPixels: maxPixels})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r := codec.DetectRegion(img.Bounds()); r != img.Bounds() {
		if sub, ok := img.(interface {
			SubImage(image.Rectangle) image.Image
		}); ok {
			img = sub.SubImage(r)
		}
	}
	return img, nil
}

// parseData validates the --data argument like the service does and returns its watermark id.
func parseData(arg string) (codec.ID, error) {
	raw := []byte(arg)
	if strings.HasPrefix(arg, "@") {
		b, err := os.ReadFile(arg[1:])
		if err != nil {
			return codec.ID{}, fmt.Errorf("reading --data file: %w", err)
		}
		raw = b
	}
	if len(raw) > maxDataBytes {
		return codec.ID{}, fmt.Errorf("--data is %d bytes, more than %d", len(raw), maxDataBytes)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		if err == nil {
			err = errors.New("null")
		}
		return codec.ID{}, fmt.Errorf("--data must be a JSON object: %v", err)
	}
	if len(obj) == 0 {
		return codec.ID{}, errors.New("--data must be a non-empty JSON object")
	}
	id, err := codec.IDFromJSON(raw)
	if err != nil {
		return codec.ID{}, fmt.Errorf("--data: %w", err)
	}
	return id, nil
}

func codecEmbed(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newCodecFlags("embed", stderr)
	data := f.fs.String("data", "", "the JSON object whose id is embedded (required; @FILE reads a file)")
	psnr := f.fs.Float64("psnr", codec.DefaultPSNR, fmt.Sprintf("minimum PSNR in dB (%g to %g)", codec.MinPSNR, codec.MaxPSNR))
	strength := f.fs.Float64("strength", codec.DefaultStrength, fmt.Sprintf("perceptual strength: mark amplitude in visibility thresholds (%g to %g)", codec.MinStrength, codec.MaxStrength))
	darkening := f.fs.Float64("darkening", pdf.DefaultStrength, fmt.Sprintf("PDF only: peak darkening of the page pattern on white, in 8-bit levels (%g to %g)", pdf.MinStrength, pdf.MaxStrength))
	asJSON := f.fs.Bool("json", false, "print the result as JSON")
	crf := f.fs.Int("crf", video.DefaultCRF, "video only: x264 constant rate factor of the re-encode")
	preset := f.fs.String("preset", video.DefaultPreset, "video only: x264 preset of the re-encode")
	pos, err := parseInterleaved(f.fs, args)
	if err != nil {
		return 2
	}
	if len(pos) != 2 {
		fmt.Fprintf(stderr, "filigrane codec embed: want IN and OUT.png, got %d arguments\n\n%s", len(pos), codecUsage)
		return 2
	}
	in, out := pos[0], pos[1]
	if *data == "" {
		fmt.Fprintln(stderr, "filigrane codec embed: --data is required")
		return 2
	}
	id, err := parseData(*data)
	if err != nil {
		fmt.Fprintln(stderr, "filigrane codec embed:", err)
		return 2
	}
	if isPDF(in) {
		return codecEmbedPDF(ctx, f, in, out, id, *darkening, *asJSON, stdout, stderr)
	}

	if *psnr < codec.MinPSNR || *psnr > codec.MaxPSNR {
		fmt.Fprintf(stderr, "filigrane codec embed: --psnr %g outside %g..%g\n", *psnr, codec.MinPSNR, codec.MaxPSNR)
		return 2
	}
	if *strength < codec.MinStrength || *strength > codec.MaxStrength {
		fmt.Fprintf(stderr, "filigrane codec embed: --strength %g outside %g..%g\n", *strength, codec.MinStrength, codec.MaxStrength)
		return 2
	}
	if isVideoPath(in) {
		c, err := f.codec(stderr)
		if err != nil {
			fmt.Fprintln(stderr, "filigrane codec embed:", err)
			return 2
		}
		opt := video.Options{CRF: *crf, Preset: *preset}
		if flagSet(f.fs, "psnr") {
			opt.PSNR = *psnr // else the video default, not the image floor
		}
		return videoEmbed(ctx, c, in, out, id, opt, *asJSON, stdout, stderr)
	}
	format, err := markfile.ParseFormat(strings.TrimPrefix(strings.ToLower(filepath.Ext(out)), "."))
	if err != nil {
		fmt.Fprintf(stderr, "filigrane codec embed: name the output *.png, *.jpg or *.webp, not %q\n", out)
		return 2
	}
	c, err := f.codec(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "filigrane codec embed:", err)
		return 2
	}
	pic, err := readPicture(in, f.maxPixels)
	if err != nil {
		fmt.Fprintln(stderr, "filigrane codec embed:", err)
		return 1
	}
	if pic.Frames > 1 {
		fmt.Fprintf(stderr, "filigrane codec embed: warning: %s has %d frames; only the first is marked and the output is a still image\n", in, pic.Frames)
	}
	if err := ctx.Err(); err != nil {
		fmt.Fprintln(stderr, "filigrane codec embed:", err)
		return 1
	}
	// The mark is verified on the encoded file before it is written (retrying stronger if it does not read back).
	res, err := markfile.Embed(ctx, c, pic, id, format, codec.EmbedOptions{PSNR: *psnr, Strength: *strength})
	if err != nil {
		fmt.Fprintf(stderr, "filigrane codec embed: %s: %v\n", in, err)
		return 1
	}
	rep := res.Report
	if err := writeFileAtomic(out, res.Data); err != nil {
		fmt.Fprintln(stderr, "filigrane codec embed:", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false) // file paths may hold '&'
		enc.SetIndent("", "  ")
		_ = enc.Encode(map[string]any{"watermark_id": id.String(), "psnr": rep.PSNR, "strength": rep.Strength,
			"verified": true, "attempts": res.Attempts, "output": out,
			"width": pic.Width, "height": pic.Height, "input_format": pic.Format})
		return 0
	}
	fmt.Fprintf(stdout, "watermark_id: %s\npsnr: %.2f dB\nstrength: %.2f\nverified: yes\n", id, rep.PSNR, rep.Strength)
	return 0
}

// writeFileAtomic writes through a temporary file in the same directory and renames it, so a failed run never
// leaves a half-written OUT behind.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".filigrane-*"+filepath.Ext(path))
	if err != nil {
		return fmt.Errorf("creating output: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	// CreateTemp makes the file private; the output is an ordinary image file.
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func codecDetect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newCodecFlags("detect", stderr)
	rendered := f.fs.Bool("rendered", false, "PDF only: ignore the structural mark and detect on the rendered pages")
	pos, err := parseInterleaved(f.fs, args)
	if err != nil {
		return 2
	}
	if len(pos) != 1 {
		fmt.Fprintf(stderr, "filigrane codec detect: want one input file, got %d arguments\n\n%s", len(pos), codecUsage)
		return 2
	}
	c, err := f.codec(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "filigrane codec detect:", err)
		return 2
	}
	if isPDF(pos[0]) {
		return codecDetectPDF(ctx, c, pos[0], *rendered, stdout, stderr)
	}
	if isVideoPath(pos[0]) {
		return videoDetect(ctx, c, pos[0], stdout, stderr)
	}
	img, err := readForDetection(ctx, pos[0], f.maxPixels)
	if err != nil {
		fmt.Fprintln(stderr, "filigrane codec detect:", err)
		return 1
	}
	if err := ctx.Err(); err != nil {
		fmt.Fprintln(stderr, "filigrane codec detect:", err)
		return 1
	}
	d := c.Detect(img)
	if !d.Watermarked {
		d.WatermarkID = nil // the service's rule: no id unless the frame passed its checks
	}
	if d.Units == nil {
		d.Units = []codec.Unit{}
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		fmt.Fprintln(stderr, "filigrane codec detect:", err)
		return 1
	}
	return 0
}
