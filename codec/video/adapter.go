// Package video is the codec's media adapter for MP4 and MOV files: it probes a file with ffprobe, embeds a
// watermark id into every frame's luma through an ffmpeg decode → Go → ffmpeg encode and mux pipeline (with a
// separate stream-copy remux for rotated videos), and detects it by combining the soft output of many frames.
// Files go in and out on disk because ffmpeg needs seekable files (the moov atom, +faststart).
//
// It owns the ffmpeg command lines, the resource limits put on them (the samples a file declares counted before
// any ffmpeg opens it, limits checked from the probe before any decoding, a time limit through the context, an
// address-space limit, no network, a process-group kill), and the mapping of their failures to typed errors
// (errors.go). It must not know about HTTP, jobs, credits or storage:
// callers map the errors to responses and keep the files.
package video

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"filigrane/codec"
)

// inputFormats is the only demuxer ffmpeg and ffprobe may open a user's file with: the ISO base media family
// (MP4, M4V, MOV, 3GP), the formats the service takes (spec: mp4 or mov). Without it ffmpeg picks the demuxer
// from the bytes, and a "video" that is an HLS playlist or an ffconcat list opens the files it names, through
// the file protocol the source needs: a few bytes of text made the service decode and mark any media file on
// the node's disk (another organization's staged input, by its path), and detection report its mark. The mov
// demuxer's external data references stay off (its enable_drefs defaults to false).
const inputFormats = "mov"

// Adapter runs the video pipeline with one codec. The zero values of its other fields are usable: tools from
// PATH, DefaultLimits. It holds no state between calls and is safe for concurrent use.
type Adapter struct {
	Codec   *codec.Codec
	FFmpeg  string // path or name of ffmpeg; "" means "ffmpeg" from PATH
	FFprobe string // path or name of ffprobe; "" means "ffprobe" from PATH
	Limits  Limits
	// NoPrlimit runs the tools without the address-space limit even where prlimit exists.
	NoPrlimit bool
	// FrameBudget, when set, is the most frames an Embed decodes of a file its probe describes as info, when
	// below Limits.MaxFrames: the frames the caller's price of that probe pays for. A probe can understate the
	// frames (a fragmented MP4 states no count: it is estimated from the duration and the average rate); an
	// embed that decodes more fails with ErrFrameBudget as the frame past the budget arrives, so the work
	// stays within what was priced.
	FrameBudget func(info Info) int64
}

// Options tune one embedding.
type Options struct {
	PSNR   float64 // mark strength per frame in dB; 0 means codec.DefaultVideoPSNRFor the frame size
	CRF    int     // x264 constant rate factor; 0 means DefaultCRF
	Preset string  // x264 preset; "" means DefaultPreset
}

// DefaultCRF and DefaultPreset make the re-encode visually transparent: CRF 18 is x264's customary "visually
// lossless" point, and medium is ffmpeg's default preset.
const (
	DefaultCRF    = 18
	DefaultPreset = "medium"
)

// EmbedReport describes a finished embedding.
type EmbedReport struct {
	FrameCount int64   `json:"frame_count"`
	Duration   float64 `json:"duration"` // seconds, from the source's probe
	Width      int     `json:"width"`    // of the output frames (odd sizes are padded to even)
	Height     int     `json:"height"`
	// SourceWidth and SourceHeight are the input's frame size.
	SourceWidth  int    `json:"source_width"`
	SourceHeight int    `json:"source_height"`
	BitDepth     int    `json:"bit_depth"`
	Container    string `json:"container"` // "mp4" or "mov": the source's, or mov for audio only MOV holds (Info.OutputContainer)
	VideoCodec   string `json:"video_codec"`
	CRF          int    `json:"crf"`
	Preset       string `json:"preset"`
	// Segments are the output's units: one per second of frames from the first, cut as Detect cuts them.
	Segments []Segment `json:"units"`
}

// tools are the resolved programs of one call.
type tools struct {
	ffmpeg, ffprobe, prlimit string
	limits                   Limits
}

func (a *Adapter) tools() (tools, error) {
	t := tools{limits: a.Limits.withDefaults()}
	var err error
	if t.ffmpeg, err = lookTool(a.FFmpeg, "ffmpeg"); err != nil {
		return t, err
	}
	if t.ffprobe, err = lookTool(a.FFprobe, "ffprobe"); err != nil {
		return t, err
	}
	if !a.NoPrlimit {
		t.prlimit, _ = exec.LookPath("prlimit") // optional: without it the tools run unlimited in memory
	}
	return t, nil
}

// CheckTools reports whether ffmpeg and ffprobe can be found, without running them: nil, or an error wrapping
// ErrToolMissing. Every call of Probe, Embed and Detect needs both.
func (a *Adapter) CheckTools() error {
	_, err := a.tools()
	return err
}

// Probe runs ffprobe on src and checks the limits of an embed (its work: EmbedCost) and that its frames can
// carry a mark (codec.CheckVideoSize: a *SizeError, ErrTooSmall). Bad input comes back as ErrNotVideo,
// ErrNoVideoStream, ErrTruncated, ErrTooSmall or a limit error (a *LimitError or a *WorkError).
func (a *Adapter) Probe(ctx context.Context, src string) (Info, error) {
	return a.probeFor(ctx, src, embedding)
}

// ProbeDetect is Probe with the limits of a detection (its work: DetectCost, less per frame than an embed's),
// for frames of any size: a video too small to carry a mark is read, and found unmarked.
func (a *Adapter) ProbeDetect(ctx context.Context, src string) (Info, error) {
	return a.probeFor(ctx, src, detecting)
}

func (a *Adapter) probeFor(ctx context.Context, src string, op operation) (Info, error) {
	t, err := a.tools()
	if err != nil {
		return Info{}, err
	}
	return t.probe(ctx, src, op)
}

func (t tools) probe(ctx context.Context, src string, op operation) (Info, error) {
	ctx, cancel := context.WithTimeout(ctx, t.limits.Timeout)
	defer cancel()
	if !fileExists(src) {
		return Info{}, fmt.Errorf("video: %s is not a regular file", src)
	}
	// Before any ffmpeg opens it: each one would index every sample the file declares (MaxIndexedSamples).
	if err := checkSampleTables(src, MaxIndexedSamples); err != nil {
		return Info{}, err
	}
	p := t.newProc(ctx, "probe", t.ffprobe, "-v", "error", "-protocol_whitelist", "file", "-format_whitelist", inputFormats,
		"-print_format", "json", "-show_format", "-show_streams", "-i", "file:"+src)
	p.redact = []string{src}
	var out bytes.Buffer
	p.cmd.Stdout = &limitWriter{w: &out, n: maxProbeJSON + 1}
	if err := p.cmd.Start(); err != nil {
		return Info{}, &ToolError{Stage: "probe", Kind: ErrFFmpeg, Err: err}
	}
	if err := p.wait(ctx); err != nil {
		var te *ToolError
		if errors.As(err, &te) && te.Kind == ErrTruncated && !looksLikeISO(src) {
			te.Kind = ErrNotVideo // "moov atom not found" in a file that never was an MP4
		}
		return Info{}, err
	}
	info, err := ParseProbe(out.Bytes())
	if err != nil {
		return info, err
	}
	if op.marks && codec.CheckVideoSize(info.Video.Width, info.Video.Height) != nil {
		// Before the other limits: no part of such a video can carry a mark, whatever its length. A caller that
		// probes before it charges refuses it then, not after the job has run (it was found only by Embed).
		return info, &SizeError{Width: info.Video.Width, Height: info.Video.Height}
	}
	if op.marks && info.Video.Alpha {
		// Likewise: the marked output could not keep the alpha plane (Embed says why), so the request is refused
		// before it is charged rather than its job failing after.
		return info, fmt.Errorf("%w: pixel format %s", ErrAlpha, info.Video.PixFmt)
	}
	if err := t.limits.Check(info); err != nil {
		return info, err
	}
	if err := t.limits.CheckWork(op.name, op.cost, info); err != nil {
		return info, err
	}
	if info.Video.BitDepth > 8 && (info.Video.MasteringDisplay == "" || info.Video.ContentLight == "") {
		// HDR static metadata usually travels in the first frame's SEI, not in the container.
		if err := t.probeFrameSideData(ctx, src, &info.Video); err != nil {
			return info, err
		}
	}
	return info, nil
}

// probeFrameSideData reads the side data of the video stream's first frame into v (parseFrameSideData).
func (t tools) probeFrameSideData(ctx context.Context, src string, v *Stream) error {
	p := t.newProc(ctx, "probe", t.ffprobe, "-v", "error", "-protocol_whitelist", "file", "-print_format", "json",
		"-select_streams", strconv.Itoa(v.Index), "-read_intervals", "%+#1", "-show_frames",
		"-show_entries", "frame=side_data_list", "-format_whitelist", inputFormats, "-i", "file:"+src)
	p.redact = []string{src}
	var out bytes.Buffer
	p.cmd.Stdout = &limitWriter{w: &out, n: maxProbeJSON + 1}
	if err := p.cmd.Start(); err != nil {
		return &ToolError{Stage: "probe", Kind: ErrFFmpeg, Err: err}
	}
	if err := p.wait(ctx); err != nil {
		return err
	}
	return parseFrameSideData(out.Bytes(), v)
}

// Embed marks every frame of src (MP4 or MOV) with id and writes dst in the same container: H.264 video, the
// other streams copied, metadata and rotation kept. dst appears only when everything succeeded.
func (a *Adapter) Embed(ctx context.Context, src, dst string, id codec.ID, opt Options) (EmbedReport, error) {
	if a.Codec == nil {
		return EmbedReport{}, errors.New("video: adapter without a codec")
	}
	t, err := a.tools()
	if err != nil {
		return EmbedReport{}, err
	}
	info, err := t.probe(ctx, src, embedding)
	if err != nil {
		return EmbedReport{}, err
	}
	if info.Container == "" {
		return EmbedReport{}, fmt.Errorf("%w: container %s, embedding takes MP4 or MOV", ErrUnsupported,
			info.FormatName)
	}
	info.Container = info.OutputContainer()
	v := info.Video
	if v.Alpha {
		// Dropped, the alpha plane would leave the transparent parts of an overlay or a cut-out opaque (whatever
		// colour lies under them), a file no longer fit for its use; refused like a JPEG of a transparent image.
		return EmbedReport{}, fmt.Errorf("%w: pixel format %s", ErrAlpha, v.PixFmt)
	}
	marker, err := a.Codec.NewVideoMarker(id, v.Width, v.Height, codec.EmbedOptions{PSNR: opt.PSNR})
	if errors.Is(err, codec.ErrTooSmall) {
		return EmbedReport{}, &SizeError{Width: v.Width, Height: v.Height}
	}
	if err != nil {
		return EmbedReport{}, err
	}
	if opt.CRF == 0 {
		opt.CRF = DefaultCRF
	}
	if opt.Preset == "" {
		opt.Preset = DefaultPreset
	}
	if opt.CRF < 0 || opt.CRF > 51 || !validPreset(opt.Preset) {
		return EmbedReport{}, fmt.Errorf("video: bad encoder options: crf %d, preset %q", opt.CRF, opt.Preset)
	}
	f := newFrameFormat(v)
	rep := EmbedReport{Duration: info.Duration, Width: v.Width + v.Width%2, Height: v.Height + v.Height%2,
		SourceWidth: v.Width, SourceHeight: v.Height,
		BitDepth: f.bits, Container: info.Container, VideoCodec: "h264", CRF: opt.CRF, Preset: opt.Preset}

	tmp, err := os.CreateTemp(filepath.Dir(dst), ".filigrane-video-*."+info.Container)
	if err != nil {
		return EmbedReport{}, fmt.Errorf("video: output: %w", err)
	}
	tmpName := tmp.Name()
	tmp.Close()
	done := false
	defer func() {
		if !done {
			os.Remove(tmpName)
		}
	}()

	ctx, stop := context.WithTimeout(ctx, t.limits.Timeout)
	defer stop()
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	decode := t.newProc(pctx, "decode", t.ffmpeg, t.decodeArgs(src, v, f.pixFmt, "", 0)...)
	decode.redact = []string{src}
	var encode, remux *proc
	if v.Rotation == 0 {
		encode = t.newProc(pctx, "encode", t.ffmpeg, encodeMuxArgs(src, tmpName, info, f, opt)...)
		encode.redact = []string{src, tmpName}
	} else {
		encode = t.newProc(pctx, "encode", t.ffmpeg, encodeArgs(v, f, opt)...)
		remux = t.newProc(pctx, "remux", t.ffmpeg, remuxArgs(src, tmpName, info)...)
		remux.redact = []string{src, tmpName}
	}
	decOut, err := decode.cmd.StdoutPipe()
	if err != nil {
		return EmbedReport{}, err
	}
	encIn, err := encode.cmd.StdinPipe()
	if err != nil {
		return EmbedReport{}, err
	}
	var mr, mw *os.File
	if remux != nil {
		// The encoder's output goes straight into the remuxer, without passing through Go.
		if mr, mw, err = os.Pipe(); err != nil {
			return EmbedReport{}, err
		}
		encode.cmd.Stdout = mw
		remux.cmd.Stdin = mr
	}
	var pl pipeline
	startErr := pl.start(decode)
	if startErr == nil {
		startErr = pl.start(encode)
	}
	if startErr == nil && remux != nil {
		startErr = pl.start(remux)
	}
	if remux != nil {
		mw.Close() // the children hold their own copies
		mr.Close()
	}
	var goErr error
	if startErr != nil {
		goErr = startErr
	} else {
		tl := newTimeline()
		mark := func(pix []byte, ms int64) error {
			tl.add(ms)
			if f.bits == 8 {
				return marker.Mark8(pix[:f.lumaSize], v.Width)
			}
			return marker.Mark16(pix[:f.lumaSize], 2*v.Width, f.bits)
		}
		maxFrames, byWork := embedding.frameCap(info, t.limits)
		budgeted := false
		if a.FrameBudget != nil {
			if b := a.FrameBudget(info); b > 0 && b < maxFrames {
				maxFrames, budgeted, byWork = b, true, false
			}
		}
		rep.FrameCount, goErr = walkMKV(decOut, encIn, f.size, maxFrames, f.rawTag, mark)
		switch {
		case budgeted && errors.Is(goErr, ErrTooManyFrames):
			goErr = fmt.Errorf("%w: more than %d frames decoded, the probe declared %d", ErrFrameBudget, maxFrames, v.Frames)
		case byWork:
			goErr = asWorkError(goErr, embedding.name, embedding.cost, info, t.limits.MaxWork, maxFrames)
		}
		tl.finish()
		rep.Segments = tl.segs
		if goErr != nil {
			goErr = fmt.Errorf("video: marking frames: %w", goErr)
			if !errors.Is(goErr, syscall.EPIPE) {
				cancel() // the frames are wrong: stop the encoder before it sees a clean end of input
			}
			io.Copy(io.Discard, decOut) //nolint:errcheck // let the decoder finish or fail on its own
		}
	}
	encIn.Close()
	if err := pl.waitAll(pctx, cancel, goErr); err != nil {
		if ctx.Err() != nil {
			return EmbedReport{}, fmt.Errorf("video: embedding stopped: %w", ctx.Err())
		}
		return EmbedReport{}, err
	}
	if rep.FrameCount == 0 {
		return EmbedReport{}, fmt.Errorf("%w: no frame could be decoded", ErrTruncated)
	}
	if err := decode.checkComplete(rep.FrameCount, info); err != nil {
		return EmbedReport{}, err
	}
	if min(v.Width, v.Height) < codec.VideoTileSide {
		if err := a.readBack(ctx, tmpName, id, v); err != nil {
			return EmbedReport{}, err
		}
	}
	// CreateTemp makes the file private; the output is an ordinary media file.
	if err := os.Chmod(tmpName, 0o644); err != nil {
		return EmbedReport{}, fmt.Errorf("video: output: %w", err)
	}
	if err := os.Rename(tmpName, dst); err != nil {
		return EmbedReport{}, fmt.Errorf("video: output: %w", err)
	}
	done = true
	return rep, nil
}

// readBackSeconds is how much of a marked output readBack detects. Detection sums the segments it reads, so a mark
// found in the first seconds is found in the whole file; reading all of it cost 30% more CPU than the embed
// itself on a 30-second 320x240 clip, and more seconds add little once ten have not read.
const readBackSeconds = 10

// readBack detects the mark in the marked output path of frames v and fails with ErrMarkUnreadable unless it reads
// as id. Frames under one tile (codec.VideoTileSide) carry the mark on fewer chips, and on static or finely
// textured content it may not read even from the output itself (docs/video.md, "Minimum frame size"); an embed
// that answered with such a file would be charged for a mark no detection finds.
func (a *Adapter) readBack(ctx context.Context, path string, id codec.ID, v Stream) error {
	d, err := a.detect(ctx, path, readBackSeconds)
	if err != nil {
		return fmt.Errorf("video: reading back the marked output: %w", err)
	}
	if !d.Watermarked || d.WatermarkID == nil || *d.WatermarkID != id.String() {
		return fmt.Errorf("%w: frames of %dx%d hold less than one tile of the mark (%d pixels a side)", ErrMarkUnreadable,
			v.Width, v.Height, codec.VideoTileSide)
	}
	return nil
}

// mp4Copyable are the audio and subtitle codecs (ffprobe's names) that ffmpeg 5.1's MP4 muxer stores: its
// codec_mp4_tags. PCM, the ADPCMs, AMR and the other QuickTime codecs are not among them, and they are what an
// MP4 from a camera may carry (Sony's XAVC S: LPCM in an .MP4), a 3GP from an old phone (AMR) or a QuickTime
// file without a brand.
var mp4Copyable = map[string]bool{"aac": true, "mp3": true, "mp2": true, "ac3": true, "eac3": true, "alac": true,
	"dts": true, "truehd": true, "flac": true, "opus": true, "vorbis": true, "qcelp": true, "evrc": true,
	"mp4als": true, "mpegh_3d_audio": true, "mov_text": true, "dvd_subtitle": true}

// OutputContainer is the container an embed of the probed file writes: the source's, except an MP4 whose audio
// or subtitles the MP4 muxer would refuse, which comes out a MOV (the same ISO family, which holds them): the
// encoder stopped on "codec not currently supported in container" and the embed failed with a processing
// error, the file being fine. Empty for a file embedding refuses (no ISO brand).
func (info Info) OutputContainer() string {
	if info.Container != "mp4" {
		return info.Container
	}
	for _, c := range info.CopiedCodecs {
		if !mp4Copyable[c] {
			return "mov"
		}
	}
	return "mp4"
}

// frameFormat is the raw layout of decoded frames.
type frameFormat struct {
	// rawTag is the FourCC of a pixel format that ffmpeg 5.1's Matroska muxer stores only in VFW mode, declared
	// as RGB (10-bit): the Go stage rewrites the track as native uncompressed video of this format before the
	// encoder reads it (declareRawTrack), so deep frames keep their timestamps like 8-bit ones.
	rawTag   string
	pixFmt   string
	bits     int
	lumaSize int // bytes of the Y plane
	size     int // bytes of the whole frame
}

func newFrameFormat(v Stream) frameFormat {
	w, h := v.Width, v.Height
	cw, ch := (w+1)/2, (h+1)/2
	if v.BitDepth > 8 {
		return frameFormat{rawTag: "Y3\x0b\x0a", pixFmt: "yuv420p10le", bits: 10, lumaSize: 2 * w * h,
			size: 2 * (w*h + 2*cw*ch)}
	}
	pf := "yuv420p"
	if strings.HasPrefix(v.PixFmt, "yuvj") || v.ColorRange == "pc" {
		pf = "yuvj420p" // full range: same layout, no range conversion
	}
	return frameFormat{pixFmt: pf, bits: 8, lumaSize: w * h, size: w*h + 2*cw*ch}
}

// decodeArgs decodes the video stream to raw frames in Matroska on stdout, in stored orientation (the rotation is
// written back as metadata) and with the source's timestamps. vf is an optional filter; seconds, when above 0,
// limits the decoding to the stream's first seconds.
func (t tools) decodeArgs(src string, v Stream, pixFmt, vf string, seconds float64) []string {
	args := []string{"-nostdin", "-v", "error", "-protocol_whitelist", "file,pipe", "-noautorotate",
		"-format_whitelist", inputFormats}
	if seconds > 0 {
		args = append(args, "-t", strconv.FormatFloat(seconds, 'f', -1, 64)) // reads only the first seconds
	}
	args = append(args, "-i", "file:"+src, "-map", "0:"+strconv.Itoa(v.Index), "-an", "-sn", "-dn", "-copyts")
	if vf != "" {
		args = append(args, "-vf", vf)
	}
	args = append(args, "-c:v", "rawvideo", "-pix_fmt", pixFmt, "-fps_mode", "passthrough",
		"-write_crc32", "0", "-allow_raw_vfw", "1")
	return append(args, "-f", "matroska", "pipe:1")
}

func encodeArgs(v Stream, f frameFormat, opt Options) []string {
	args := []string{"-nostdin", "-v", "error", "-protocol_whitelist", "pipe", "-f", "matroska", "-i", "pipe:0",
		"-map", "0:v:0", "-copyts"}
	args = append(args, encoderOptions(v, f, opt)...)
	return append(args, "-f", "matroska", "pipe:1")
}

// encodeMuxArgs encode the marked frames and write the output container in the same process, with the source's
// other streams and metadata: what encodeArgs and remuxArgs do in two processes, one ffmpeg start (about 0.1 s of
// CPU, a sixth of a plain re-encode of a 10-second 320x240 clip) and one pass of muxing fewer. Only for a video
// without rotation: ffmpeg 5.1 writes the rotate tag only on stream copy.
func encodeMuxArgs(src, dst string, info Info, f frameFormat, opt Options) []string {
	args := []string{"-nostdin", "-v", "error", "-protocol_whitelist", "file,pipe", "-f", "matroska",
		"-i", "pipe:0", "-protocol_whitelist", "file", "-format_whitelist", inputFormats, "-i", "file:" + src, "-copyts", "-map", "0:v:0", "-map", "1:a?",
		"-map", "1:s?"}
	args = append(args, encoderOptions(info.Video, f, opt)...)
	args = append(args, "-c:a", "copy", "-c:s", "copy")
	return append(args, outputArgs(dst, info)...)
}

// encoderOptions are the x264 settings and the colour signalling of the output video (every option names the
// video stream: in encodeMuxArgs the same process copies the other streams).
func encoderOptions(v Stream, f frameFormat, opt Options) []string {
	var args []string
	if v.Width%2 != 0 || v.Height%2 != 0 {
		// 4:2:0 H.264 needs even sizes: repeat the last column or row.
		args = append(args, "-filter:v", "pad=ceil(iw/2)*2:ceil(ih/2)*2,fillborders=right=1:bottom=1:mode=smear")
	}
	args = append(args, "-c:v", "libx264", "-preset:v", opt.Preset, "-crf:v", strconv.Itoa(opt.CRF),
		"-pix_fmt:v", f.pixFmt, "-fps_mode:v", "passthrough")
	// HDR static metadata goes into x264's SEI (ffmpeg 5.1 passes no side data to libx264 itself).
	var x264 []string
	if tff, interlaced := v.TopFieldFirst(); interlaced {
		// Interlaced frames stay interlaced: coded as field pairs and flagged so, in the source's field order,
		// else a player shows the woven fields of moving content as combs instead of deinterlacing them. The
		// raw frames crossed Matroska, which gives the encoder the wrong order (tt arrives as tb), so the order
		// is told to x264 itself.
		args = append(args, "-flags:v", "+ildct+ilme")
		if tff {
			x264 = append(x264, "tff=1")
		} else {
			x264 = append(x264, "bff=1")
		}
	}
	if v.MasteringDisplay != "" {
		x264 = append(x264, "mastering-display="+v.MasteringDisplay)
	}
	if v.ContentLight != "" {
		x264 = append(x264, "cll="+v.ContentLight)
	}
	if len(x264) > 0 {
		args = append(args, "-x264-params:v", strings.Join(x264, ":"))
	}
	for _, tag := range [][2]string{{"-color_range:v", v.ColorRange}, {"-colorspace:v", v.ColorSpace},
		{"-color_trc:v", v.ColorTransfer}, {"-color_primaries:v", v.ColorPrimaries}} {
		if tag[1] != "" && tag[1] != "unknown" && tag[1] != "reserved" {
			args = append(args, tag[0], tag[1])
		}
	}
	return args
}

// remuxArgs puts the encoded video and the source's other streams into the output container. Stream copy is
// where ffmpeg honours the rotate tag, so rotation is set here.
func remuxArgs(src, dst string, info Info) []string {
	args := []string{"-nostdin", "-v", "error", "-protocol_whitelist", "file,pipe", "-f", "matroska",
		"-i", "pipe:0", "-protocol_whitelist", "file", "-format_whitelist", inputFormats, "-i", "file:" + src, "-copyts", "-map", "0:v:0", "-map", "1:a?", "-map", "1:s?", "-c", "copy",
		"-metadata:s:v:0", "rotate=" + strconv.Itoa(info.Video.Rotation),
	}
	return append(args, outputArgs(dst, info)...)
}

// outputArgs are the output options shared by remuxArgs and encodeMuxArgs: the source's metadata, chapters and
// per-stream tags, its timestamps (timestampArgs), +faststart and the container.
func outputArgs(dst string, info Info) []string {
	args := []string{"-map_metadata", "1", "-map_metadata:s:v:0", "1:s:" + strconv.Itoa(info.Video.Index),
		"-map_chapters", "1", "-metadata:s:v:0", "encoder="}
	args = append(args, timestampArgs(info.Video)...)
	// Per-stream tags (language, handler, creation time) of the copied streams, each from its own source stream:
	// the mapping of the video's tags above turns off ffmpeg's default copy of every stream's tags, and one
	// mapping for all ("-map_metadata:s:a 1:s:a") gave every track the first track's tags (a German second audio
	// track came out tagged English). "-map 1:a?" keeps the source's order, so output track i is source track i; a
	// specifier that matches no stream is an error, hence the counts.
	for i := range info.Audio {
		n := strconv.Itoa(i)
		args = append(args, "-map_metadata:s:a:"+n, "1:s:a:"+n)
	}
	for i := range info.Subtitles {
		n := strconv.Itoa(i)
		args = append(args, "-map_metadata:s:s:"+n, "1:s:s:"+n)
	}
	return append(args, "-movflags", "+faststart", "-f", info.Container, "-y", "file:"+dst)
}

// timestampArgs give the output video the source's time base and, for a constant frame rate, put every timestamp
// back on the source's frame grid: the raw frames crossed Matroska, whose timestamps are whole milliseconds.
// Variable-rate timing keeps the millisecond precision.
func timestampArgs(v Stream) []string {
	tb := v.TimeBase
	if !tb.Valid() || tb.Num != 1 {
		return nil
	}
	// The first filter only changes the time base (rounding to its ticks); the second, whose TB is then the
	// source's, snaps to the frame grid anchored at the source's start time.
	bsf := "setts=time_base=" + tb.String() + ":pts=PTS:dts=DTS"
	if r := v.FrameRate; r.Valid() && !v.VFR() {
		snap := func(ts string) string {
			return fmt.Sprintf("round((%.9f+round((%s*TB-%.9f)*%d/%d)*%d/%d)*%d)", v.StartTime, ts, v.StartTime,
				r.Num, r.Den, r.Den, r.Num, tb.Den)
		}
		bsf += ",setts=pts=" + snap("PTS") + ":dts=" + snap("DTS")
	}
	return []string{"-bsf:v", bsf, "-video_track_timescale", strconv.FormatInt(tb.Den, 10)}
}

func validPreset(p string) bool {
	switch p {
	case "ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow":
		return true
	}
	return false
}

// limitWriter fails once more than n bytes were written.
type limitWriter struct {
	w io.Writer
	n int64
}

func (l *limitWriter) Write(b []byte) (int, error) {
	if int64(len(b)) > l.n {
		return 0, errors.New("video: tool output above its limit")
	}
	l.n -= int64(len(b))
	return l.w.Write(b)
}

// looksLikeISO reports whether the file starts with an ISO base media box (ftyp, moov, mdat, ...), as every MP4 or
// MOV does, truncated or not.
func looksLikeISO(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var b [8]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		return false
	}
	switch string(b[4:8]) {
	case "ftyp", "moov", "mdat", "free", "skip", "wide", "pnot":
		return true
	}
	return false
}
