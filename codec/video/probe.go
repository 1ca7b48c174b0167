package video

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Info is what ffprobe says about a file, reduced to what the adapter needs.
type Info struct {
	FormatName string  // ffprobe's format_name, e.g. "mov,mp4,m4a,3gp,3g2,mj2"
	Container  string  // "mp4" or "mov" for the ISO family (by major brand), else ""
	Duration   float64 // seconds (the container's, else the video stream's)
	Size       int64   // bytes, as ffprobe reports them
	Video      Stream  // the first video stream that is not a cover picture
	Audio      int     // number of audio streams
	Subtitles  int     // number of subtitle streams
	Streams    int     // number of streams of any kind
	// CopiedCodecs are the codec names of the audio and subtitle streams, in file order: the streams an embed
	// copies into its output.
	CopiedCodecs []string
}

// Stream describes the video stream.
type Stream struct {
	Index         int
	Codec         string
	Profile       string
	Width, Height int
	PixFmt        string
	BitDepth      int      // bits per luma sample (8 for yuv420p, 10 for yuv420p10le, ...)
	FrameRate     Rational // r_frame_rate: the base rate (lowest rate that represents all timestamps)
	AvgFrameRate  Rational
	TimeBase      Rational
	StartTime     float64
	Duration      float64
	Frames        int64 // nb_frames when the container states it, else duration × average rate (rounded up)
	Rotation      int   // degrees from the display matrix (ffprobe's sign convention), 0 when none
	// FieldOrder is ffprobe's field_order: "progressive", "tt", "bb", "tb", "bt" (interlaced), or "" / "unknown".
	FieldOrder     string
	ColorRange     string
	ColorSpace     string
	ColorTransfer  string
	ColorPrimaries string
	// HDR static metadata, in x264's option syntax, empty when the stream has none: MasteringDisplay is
	// "G(x,y)B(x,y)R(x,y)WP(x,y)L(max,min)" (chromaticity in 0.00002, luminance in 0.0001 cd/m²), ContentLight
	// is "MaxCLL,MaxFALL" (cd/m²).
	MasteringDisplay string
	ContentLight     string
	// Alpha: the pixel format has an alpha plane (ProRes 4444 with alpha: yuva444p10le; PNG or QuickTime
	// Animation in a MOV: rgba, argb), which the H.264 output cannot carry (embedding refuses it: ErrAlpha).
	Alpha bool
}

// TopFieldFirst reports whether the stream is interlaced (interlaced is false for progressive or unknown field
// order) and, if so, whether its top field is displayed first: "tt" and "bt" are top first, "bb" and "tb" bottom
// first (ffprobe names the coded order, then the displayed one).
func (s Stream) TopFieldFirst() (tff, interlaced bool) {
	switch s.FieldOrder {
	case "tt", "bt":
		return true, true
	case "bb", "tb":
		return false, true
	}
	return false, false
}

// VFR reports whether the stream's frame timing is variable: its average rate differs from its base rate.
func (s Stream) VFR() bool {
	return s.FrameRate.Valid() && s.AvgFrameRate.Valid() &&
		math.Abs(s.FrameRate.Float()-s.AvgFrameRate.Float()) > 0.01*s.FrameRate.Float()
}

// Rational is a ratio of integers as ffprobe writes them ("30000/1001").
type Rational struct{ Num, Den int64 }

// Valid reports whether the ratio is positive and finite.
func (r Rational) Valid() bool { return r.Num > 0 && r.Den > 0 }

// Float is the ratio's value, 0 when invalid.
func (r Rational) Float() float64 {
	if !r.Valid() {
		return 0
	}
	return float64(r.Num) / float64(r.Den)
}

func (r Rational) String() string { return fmt.Sprintf("%d/%d", r.Num, r.Den) }

func parseRational(s string) Rational {
	num, den, ok := strings.Cut(s, "/")
	if !ok {
		den = "1"
	}
	n, err1 := strconv.ParseInt(num, 10, 64)
	d, err2 := strconv.ParseInt(den, 10, 64)
	if err1 != nil || err2 != nil || n <= 0 || d <= 0 || n > 1<<31 || d > 1<<31 {
		return Rational{}
	}
	return Rational{n, d}
}

// ffprobe's JSON, only the fields used. Numbers are strings in ffprobe's output.
type probeJSON struct {
	Streams []struct {
		Index          int               `json:"index"`
		CodecName      string            `json:"codec_name"`
		CodecType      string            `json:"codec_type"`
		Profile        string            `json:"profile"`
		Width          int               `json:"width"`
		Height         int               `json:"height"`
		PixFmt         string            `json:"pix_fmt"`
		RFrameRate     string            `json:"r_frame_rate"`
		AvgFrameRate   string            `json:"avg_frame_rate"`
		TimeBase       string            `json:"time_base"`
		StartTime      string            `json:"start_time"`
		Duration       string            `json:"duration"`
		NbFrames       string            `json:"nb_frames"`
		BitsPerRaw     string            `json:"bits_per_raw_sample"`
		FieldOrder     string            `json:"field_order"`
		ColorRange     string            `json:"color_range"`
		ColorSpace     string            `json:"color_space"`
		ColorTransfer  string            `json:"color_transfer"`
		ColorPrimaries string            `json:"color_primaries"`
		Disposition    map[string]int    `json:"disposition"`
		Tags           map[string]string `json:"tags"`
		SideData       []sideData        `json:"side_data_list"`
	} `json:"streams"`
	Format *struct {
		FormatName string            `json:"format_name"`
		Duration   string            `json:"duration"`
		Size       string            `json:"size"`
		Tags       map[string]string `json:"tags"`
	} `json:"format"`
}

// sideData is one entry of a stream's or a frame's side_data_list.
type sideData struct {
	Type     string   `json:"side_data_type"`
	Rotation *float64 `json:"rotation"`
	// Mastering display metadata: ratios as "34000/50000".
	RedX         string `json:"red_x"`
	RedY         string `json:"red_y"`
	GreenX       string `json:"green_x"`
	GreenY       string `json:"green_y"`
	BlueX        string `json:"blue_x"`
	BlueY        string `json:"blue_y"`
	WhiteX       string `json:"white_point_x"`
	WhiteY       string `json:"white_point_y"`
	MinLuminance string `json:"min_luminance"`
	MaxLuminance string `json:"max_luminance"`
	// Content light level metadata.
	MaxContent *int64 `json:"max_content"`
	MaxAverage *int64 `json:"max_average"`
}

// hdrMetadata reads the mastering display and content light level entries of side data in x264's syntax (see
// Stream.MasteringDisplay); an entry with a missing or out-of-range value is ignored.
func hdrMetadata(list []sideData) (master, light string) {
	for _, sd := range list {
		switch sd.Type {
		case "Mastering display metadata":
			var v [10]int64
			ok := true
			for i, r := range []string{sd.GreenX, sd.GreenY, sd.BlueX, sd.BlueY, sd.RedX, sd.RedY, sd.WhiteX, sd.WhiteY} {
				v[i] = scaled(r, 50000, 50000)
				ok = ok && v[i] >= 0
			}
			v[8], v[9] = scaled(sd.MaxLuminance, 10000, math.MaxUint32), scaled(sd.MinLuminance, 10000, math.MaxUint32)
			if ok && v[8] > 0 && v[9] >= 0 {
				master = fmt.Sprintf("G(%d,%d)B(%d,%d)R(%d,%d)WP(%d,%d)L(%d,%d)", v[0], v[1], v[2], v[3], v[4], v[5],
					v[6], v[7], v[8], v[9])
			}
		case "Content light level metadata":
			if sd.MaxContent != nil && sd.MaxAverage != nil && *sd.MaxContent >= 0 && *sd.MaxContent <= 65535 &&
				*sd.MaxAverage >= 0 && *sd.MaxAverage <= 65535 {
				light = fmt.Sprintf("%d,%d", *sd.MaxContent, *sd.MaxAverage)
			}
		}
	}
	return master, light
}

// scaled is the ratio r ("34000/50000") times unit, rounded, or -1 when r is not a ratio in [0, limit/unit].
func scaled(r string, unit, limit int64) int64 {
	num, den, ok := strings.Cut(r, "/")
	if !ok {
		den = "1"
	}
	n, err1 := strconv.ParseInt(num, 10, 64)
	d, err2 := strconv.ParseInt(den, 10, 64)
	if err1 != nil || err2 != nil || n < 0 || d <= 0 {
		return -1
	}
	v := math.Round(float64(n) / float64(d) * float64(unit))
	if v > float64(limit) {
		return -1
	}
	return int64(v)
}

// parseFrameSideData reads the HDR static metadata of the first frame from ffprobe's JSON (-show_frames with
// frame side data) into v, where the stream's own side data had none.
func parseFrameSideData(data []byte, v *Stream) error {
	var p struct {
		Frames []struct {
			SideData []sideData `json:"side_data_list"`
		} `json:"frames"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return fmt.Errorf("video: unreadable frame probe output: %w", err)
	}
	if len(p.Frames) == 0 {
		return nil
	}
	master, light := hdrMetadata(p.Frames[0].SideData)
	if v.MasteringDisplay == "" {
		v.MasteringDisplay = master
	}
	if v.ContentLight == "" {
		v.ContentLight = light
	}
	return nil
}

// maxProbeJSON bounds the ffprobe output read (a file with thousands of streams or huge tags is refused).
const maxProbeJSON = 4 << 20

// ParseProbe turns ffprobe's JSON (-show_format -show_streams) into Info. It wraps ErrNotVideo when there is no
// format section or the file is a still image, and ErrNoVideoStream when no stream is a moving picture.
func ParseProbe(data []byte) (Info, error) {
	if len(data) > maxProbeJSON {
		return Info{}, fmt.Errorf("%w: probe output above %d bytes", ErrUnsupported, maxProbeJSON)
	}
	var p probeJSON
	if err := json.Unmarshal(data, &p); err != nil {
		return Info{}, fmt.Errorf("%w: unreadable probe output: %v", ErrNotVideo, err)
	}
	if p.Format == nil || p.Format.FormatName == "" {
		return Info{}, fmt.Errorf("%w: no container format recognised", ErrNotVideo)
	}
	info := Info{FormatName: p.Format.FormatName, Streams: len(p.Streams)}
	if isImageFormat(info.FormatName) {
		return info, fmt.Errorf("%w: %s is a still image format", ErrNotVideo, info.FormatName)
	}
	if strings.Contains(info.FormatName, "mp4") || strings.HasPrefix(info.FormatName, "mov") {
		info.Container = "mp4"
		if strings.TrimSpace(p.Format.Tags["major_brand"]) == "qt" {
			info.Container = "mov"
		}
	}
	info.Duration = parseSeconds(p.Format.Duration)
	info.Size, _ = strconv.ParseInt(p.Format.Size, 10, 64)
	found := false
	for _, s := range p.Streams {
		switch s.CodecType {
		case "audio":
			info.Audio++
			info.CopiedCodecs = append(info.CopiedCodecs, s.CodecName)
			continue
		case "subtitle":
			info.Subtitles++
			info.CopiedCodecs = append(info.CopiedCodecs, s.CodecName)
			continue
		case "video":
		default:
			continue
		}
		if found || s.Disposition["attached_pic"] == 1 || s.Disposition["still_image"] == 1 {
			continue
		}
		found = true
		v := Stream{Index: s.Index, Codec: s.CodecName, Profile: s.Profile, Width: s.Width, Height: s.Height,
			PixFmt: s.PixFmt, FrameRate: parseRational(s.RFrameRate), AvgFrameRate: parseRational(s.AvgFrameRate),
			TimeBase: parseRational(s.TimeBase), StartTime: parseSeconds(s.StartTime),
			Duration: parseSeconds(s.Duration), FieldOrder: s.FieldOrder, ColorRange: s.ColorRange, ColorSpace: s.ColorSpace,
			ColorTransfer: s.ColorTransfer, ColorPrimaries: s.ColorPrimaries}
		v.MasteringDisplay, v.ContentLight = hdrMetadata(s.SideData)
		v.BitDepth = pixFmtDepth(s.PixFmt)
		v.Alpha = pixFmtHasAlpha(s.PixFmt)
		if v.BitDepth == 0 {
			if b, err := strconv.Atoi(s.BitsPerRaw); err == nil && b > 0 && b <= 16 {
				v.BitDepth = b
			}
		}
		for _, sd := range s.SideData {
			if sd.Rotation != nil && !math.IsNaN(*sd.Rotation) && math.Abs(*sd.Rotation) <= 360 {
				v.Rotation = int(math.Round(*sd.Rotation))
			}
		}
		if n, err := strconv.ParseInt(s.NbFrames, 10, 64); err == nil && n > 0 {
			v.Frames = n
		}
		info.Video = v
	}
	if !found {
		return info, fmt.Errorf("%w: %d streams, none of them video", ErrNoVideoStream, len(p.Streams))
	}
	if info.Duration <= 0 {
		info.Duration = info.Video.Duration
	}
	if info.Video.Frames == 0 && info.Video.AvgFrameRate.Valid() && info.Duration > 0 {
		f := math.Ceil(info.Duration * info.Video.AvgFrameRate.Float())
		info.Video.Frames = int64(min(f, math.MaxInt32))
	}
	if info.Video.Width <= 0 || info.Video.Height <= 0 {
		return info, fmt.Errorf("%w: video stream without dimensions", ErrTruncated)
	}
	return info, nil
}

// isImageFormat reports ffprobe format names of still images (ffprobe reads a PNG as a one-frame video).
func isImageFormat(name string) bool {
	return strings.HasSuffix(name, "_pipe") || name == "image2" || name == "gif" || name == "webp" ||
		name == "apng" || name == "tty" || name == "mpjpeg"
}

// pixFmtDepth returns the luma bit depth of the pixel formats the adapter decodes, 0 when unknown.
func pixFmtDepth(f string) int {
	switch {
	case strings.Contains(f, "p10") || strings.HasSuffix(f, "10le") || strings.HasSuffix(f, "10be"):
		return 10
	case strings.Contains(f, "p12"):
		return 12
	case strings.Contains(f, "p16"):
		return 16
	case f == "":
		return 0
	}
	return 8
}

// pixFmtHasAlpha reports whether ffmpeg's pixel format f has an alpha component: the yuva, rgba/bgra/argb/abgr,
// gbrap, ya (grey with alpha), ayuv and vuya families, at any depth.
func pixFmtHasAlpha(f string) bool {
	for _, p := range []string{"yuva", "rgba", "bgra", "argb", "abgr", "gbrap", "ya8", "ya16", "ayuv", "vuya"} {
		if strings.HasPrefix(f, p) {
			return true
		}
	}
	return false
}

func parseSeconds(s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > 1e9 {
		return 0
	}
	return v
}

// Limits bound the work one file may cause; they are checked from the probe, before any frame is decoded.
// Zero fields take the DefaultLimits values.
type Limits struct {
	MaxDuration float64 // seconds
	MaxWidth    int     // pixels, either orientation: the larger side
	MaxPixels   int     // width × height of one frame
	MaxFrames   int64
	// MaxWork bounds the estimated CPU time of one core an embed or a detection of the file may take
	// (EmbedCost, DetectCost): checked from the probe, and while decoding (a probe can understate the frames).
	MaxWork     time.Duration
	MemoryBytes uint64        // address-space limit of each ffmpeg process (Linux)
	Timeout     time.Duration // wall-clock limit of one Probe, Embed or Detect, on top of the caller's context
}

// DefaultLimits allow ten minutes of up to 4K video, and 45 minutes of work: half the service's longest video
// deadline (90 minutes), which lets ten minutes of 1080p at 30 fps through (docs/video.md, "Work and deadline").
var DefaultLimits = Limits{MaxDuration: 600, MaxWidth: 4096, MaxPixels: 4096 * 2304, MaxFrames: 36000,
	MaxWork: 45 * time.Minute, MemoryBytes: 3 << 30, Timeout: 90 * time.Minute}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	l.MaxDuration, l.MaxWidth = orDefault(l.MaxDuration, d.MaxDuration), orDefault(l.MaxWidth, d.MaxWidth)
	l.MaxPixels, l.MaxFrames = orDefault(l.MaxPixels, d.MaxPixels), orDefault(l.MaxFrames, d.MaxFrames)
	l.Timeout, l.MaxWork = orDefault(l.Timeout, d.Timeout), orDefault(l.MaxWork, d.MaxWork)
	if l.MemoryBytes == 0 {
		l.MemoryBytes = d.MemoryBytes
	}
	return l
}

// orDefault is v when set (above zero), else the default d.
func orDefault[T int | int64 | float64 | time.Duration](v, d T) T {
	if v > 0 {
		return v
	}
	return d
}

// Check compares the probe with the limits other than the work's (CheckWork).
func (l Limits) Check(info Info) error {
	l = l.withDefaults()
	v := info.Video
	switch {
	case info.Duration > l.MaxDuration:
		return &LimitError{Kind: ErrTooLong, Duration: info.Duration, MaxDuration: l.MaxDuration}
	case max(v.Width, v.Height) > l.MaxWidth || v.Width*v.Height > l.MaxPixels:
		return &LimitError{Kind: ErrTooLarge, Width: v.Width, Height: v.Height, MaxSide: l.MaxWidth, MaxPixels: l.MaxPixels}
	case v.Frames > l.MaxFrames:
		return &LimitError{Kind: ErrTooManyFrames, Frames: v.Frames, MaxFrames: l.MaxFrames}
	}
	return nil
}

// CheckWork fails with a *WorkError (ErrTooMuchWork) when op ("embed" or "detect") on the file info describes
// is estimated by cost to take more than MaxWork.
func (l Limits) CheckWork(op string, cost Cost, info Info) error {
	return checkWork(op, cost, info, l.withDefaults().MaxWork)
}
