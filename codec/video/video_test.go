package video

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"filigrane/codec"
)

// The tests run the real ffmpeg on short clips generated here (testsrc2 with a sine tone, small frames).

func requireFFmpeg(t testing.TB) {
	t.Helper()
	for _, tool := range []string{"ffmpeg", "ffprobe"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: run scripts/setup.sh (the video tests need the real ffmpeg)", tool)
		}
	}
}

func testAdapter(t testing.TB) *Adapter {
	t.Helper()
	requireFFmpeg(t)
	c, err := codec.New([]byte("video adapter test key, 32 bytes"))
	if err != nil {
		t.Fatal(err)
	}
	return &Adapter{Codec: c}
}

// ffmpegRun runs ffmpeg with args and fails the test with its stderr.
func ffmpegRun(t testing.TB, args ...string) {
	t.Helper()
	cmd := exec.Command("ffmpeg", append([]string{"-nostdin", "-v", "error", "-y"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("ffmpeg %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
}

// makeClip writes a clip of testsrc2 and a sine tone: size like "384x288", seconds long, at rate fps, with extra
// output args (codec, metadata) appended before the file name.
func makeClip(t testing.TB, path, size, rate string, seconds string, extra ...string) {
	t.Helper()
	args := []string{"-f", "lavfi", "-i", "testsrc2=size=" + size + ":rate=" + rate + ":duration=" + seconds,
		"-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=" + seconds}
	if len(extra) == 0 {
		extra = []string{"-c:v", "libx264", "-preset", "veryfast", "-crf", "20", "-pix_fmt", "yuv420p"}
	}
	args = append(args, extra...)
	args = append(args, "-c:a", "aac", "-b:a", "96k", path)
	ffmpegRun(t, args...)
}

// fixtures holds the clips that more than one test reads, made once for the package (each was an ffmpeg
// start and an encode per test): TestMain makes the directory and removes it after the tests.
var fixtures struct {
	dir     string
	plain   sync.Once
	plainOK bool
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "video-fixtures-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fixtures.dir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// plainClip is a 2 s clip of 320x256 at 25 fps with a sine tone, H.264 and AAC in MP4 (makeClip's defaults),
// made once for the package: read it, never write it.
func plainClip(t *testing.T) string {
	t.Helper()
	path := filepath.Join(fixtures.dir, "plain-320x256.mp4")
	fixtures.plain.Do(func() {
		makeClip(t, path, "320x256", "25", "2")
		fixtures.plainOK = true
	})
	if !fixtures.plainOK {
		t.Fatal("the shared clip could not be made (see the first test that used it)")
	}
	return path
}

func testID(b byte) codec.ID {
	var id codec.ID
	for i := range id {
		id[i] = b ^ byte(i*37)
	}
	return id
}

func requireID(t *testing.T, d codec.Detection, id codec.ID, what string) {
	t.Helper()
	if !d.Watermarked || d.WatermarkID == nil || *d.WatermarkID != id.String() {
		got := "nil"
		if d.WatermarkID != nil {
			got = *d.WatermarkID
		}
		t.Fatalf("%s: id not recovered: watermarked %v, confidence %.3f, id %s, units %+v", what, d.Watermarked,
			d.Confidence, got, d.Units)
	}
}

func TestErrorsTyped(t *testing.T) {
	t.Parallel()
	a := testAdapter(t)
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.mp4")
	if err := os.WriteFile(text, []byte("this is not a video at all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	audio := filepath.Join(dir, "audio.mp4")
	ffmpegRun(t, "-f", "lavfi", "-i", "sine=duration=1", "-c:a", "aac", audio)
	src := plainClip(t)
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.mp4")
	if err := os.WriteFile(cut, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	// The same with the index in front (+faststart): ffprobe reads it, and the decoder meets the cut.
	fast := filepath.Join(dir, "fast.mp4")
	ffmpegRun(t, "-i", src, "-c", "copy", "-movflags", "+faststart", fast)
	if data, err = os.ReadFile(fast); err != nil {
		t.Fatal(err)
	}
	cutFast := filepath.Join(dir, "cutfast.mp4")
	if err := os.WriteFile(cutFast, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file string
		want error
	}{{text, ErrNotVideo}, {audio, ErrNoVideoStream}, {cut, ErrTruncated}, {cutFast, ErrTruncated}} {
		_, err := a.Embed(context.Background(), c.file, filepath.Join(dir, "o.mp4"), testID(2), Options{})
		if !errors.Is(err, c.want) {
			t.Errorf("embed %s: error %v, want %v", filepath.Base(c.file), err, c.want)
		}
		_, err = a.Detect(context.Background(), c.file)
		if !errors.Is(err, c.want) {
			t.Errorf("detect %s: error %v, want %v", filepath.Base(c.file), err, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "o.mp4")); !os.IsNotExist(err) {
		t.Errorf("a failed embed left its output: %v", err)
	}
}

// A "video" that is a playlist (HLS, ffconcat) or another container is refused as not a video, by embed and by
// detect, without opening the files it names: ffmpeg picked the demuxer from the bytes, so a few lines of text
// naming a media file on the node's disk made the service decode and mark that file (and detection read its
// mark). The playlists here name the package's shared clip, which both would read.
func TestPlaylistsAndOtherContainersAreNotVideos(t *testing.T) {
	t.Parallel()
	a := testAdapter(t)
	dir := t.TempDir()
	clip := plainClip(t)
	// The clip copied, in one ffmpeg run, into an MPEG-TS segment, an MP4 and a Matroska file.
	segment, local, mkv := filepath.Join(dir, "segment.ts"), filepath.Join(dir, "local.mp4"), filepath.Join(dir, "matroska.mp4")
	ffmpegRun(t, "-i", clip, "-c", "copy", "-f", "mpegts", segment, "-c", "copy", local, "-c", "copy", "-f", "matroska", mkv)
	files := map[string]string{
		"hls.mp4":    "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\n" + segment + "\n#EXT-X-ENDLIST\n",
		"concat.mp4": "ffconcat version 1.0\nfile local.mp4\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"hls.mp4", "concat.mp4", "matroska.mp4"} {
		src := filepath.Join(dir, name)
		out := filepath.Join(dir, "out-"+name)
		if _, err := a.Embed(context.Background(), src, out, testID(3), Options{}); !errors.Is(err, ErrNotVideo) {
			t.Errorf("embed %s: error %v, want %v", name, err, ErrNotVideo)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("embed %s left an output: %v", name, err)
		}
		if d, err := a.Detect(context.Background(), src); !errors.Is(err, ErrNotVideo) {
			t.Errorf("detect %s: %+v, error %v, want %v", name, d, err, ErrNotVideo)
		}
	}
	// The files the playlists name are videos the adapter reads.
	if _, err := a.Probe(context.Background(), local); err != nil {
		t.Fatalf("probe of the named MP4: %v", err)
	}
}

// probeField returns one ffprobe value (ffprobe -show_entries ENTRY -of default=nw=1:nk=1) for the stream spec.
func probeOut(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command("ffprobe", append([]string{"-v", "error"}, args...)...).Output()
	if err != nil {
		t.Fatalf("ffprobe %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// probedStreams is what TestEmbedKeepsStreamsAndTiming compares between a source and its output.
type probedStreams struct {
	brand, creationTime   string // format tags
	videoFrames, rotation string // the first video stream's nb_frames and display-matrix rotation
	audioLanguages        string // every audio stream's language tag, in order, comma-separated
	videoPTS              string // the first video stream's frame timestamps, one a line
	// The first audio stream's packets, one a line: pts, dts, duration, size and the MD5 of the data (what
	// ffmpeg's framemd5 of a stream copy lists).
	audioPackets string
}

// probeStreams reads a file's probedStreams with one ffprobe (the audio packets' hashes too: a second program
// for them cost a start, about 0.07 CPU-s, per file).
func probeStreams(t testing.TB, file string) probedStreams {
	t.Helper()
	out, err := exec.Command("ffprobe", "-v", "error", "-of", "json", "-show_data_hash", "MD5", "-show_entries",
		"format_tags=major_brand,creation_time:stream=index,codec_type,nb_frames:stream_tags=language:"+
			"stream_side_data=rotation:frame=stream_index,pts_time:packet=stream_index,pts,dts,duration,size,data_hash",
		file).Output()
	if err != nil {
		t.Fatalf("ffprobe %s: %v", file, err)
	}
	var p struct {
		Format struct {
			Tags map[string]string `json:"tags"`
		} `json:"format"`
		Streams []struct {
			Index     int               `json:"index"`
			CodecType string            `json:"codec_type"`
			NbFrames  string            `json:"nb_frames"`
			Tags      map[string]string `json:"tags"`
			SideData  []struct {
				Rotation *json.Number `json:"rotation"`
			} `json:"side_data_list"`
		} `json:"streams"`
		// With both packets and frames asked for, ffprobe lists them together, in the order it read them.
		PacketsAndFrames []struct {
			Type        string      `json:"type"` // "packet" or "frame"
			StreamIndex int         `json:"stream_index"`
			PTSTime     string      `json:"pts_time"` // a frame's
			PTS         json.Number `json:"pts"`      // the rest a packet's
			DTS         json.Number `json:"dts"`
			Duration    json.Number `json:"duration"`
			Size        string      `json:"size"`
			DataHash    string      `json:"data_hash"`
		} `json:"packets_and_frames"`
	}
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatalf("ffprobe %s: %v", file, err)
	}
	r := probedStreams{brand: strings.TrimSpace(p.Format.Tags["major_brand"]), creationTime: p.Format.Tags["creation_time"]}
	video, audio := -1, -1
	for _, st := range p.Streams {
		switch {
		case st.CodecType == "video" && video < 0:
			video, r.videoFrames = st.Index, st.NbFrames
			for _, sd := range st.SideData {
				if sd.Rotation != nil {
					r.rotation = sd.Rotation.String()
				}
			}
		case st.CodecType == "audio":
			if audio < 0 {
				audio = st.Index
			}
			r.audioLanguages += "," + st.Tags["language"]
		}
	}
	var pts, packets []string
	for _, e := range p.PacketsAndFrames {
		switch {
		case e.Type == "frame" && e.StreamIndex == video:
			pts = append(pts, e.PTSTime)
		case e.Type == "packet" && e.StreamIndex == audio:
			if e.DataHash == "" {
				t.Fatalf("ffprobe %s: an audio packet without its data's hash", file)
			}
			packets = append(packets, strings.Join([]string{e.PTS.String(), e.DTS.String(), e.Duration.String(), e.Size, e.DataHash}, " "))
		}
	}
	if len(pts) == 0 || len(packets) == 0 {
		t.Fatalf("ffprobe %s: %d video frames, %d audio packets", file, len(pts), len(packets))
	}
	r.audioLanguages = strings.TrimPrefix(r.audioLanguages, ",")
	r.videoPTS = strings.Join(pts, "\n")
	r.audioPackets = strings.Join(packets, "\n")
	return r
}

// TestEmbedKeepsStreamsAndTiming checks what a user sees in the output besides the mark: the same container,
// audio packets bit-exact, the same frame count and timestamps, rotation, language and creation time kept, and
// the mark read from the output; of two audio tracks, each keeps its own language. A rotated source goes through a separate remux process, one without rotation
// is encoded and muxed by one process: both are checked. The mark read after a re-encode at CRF 30 and the
// unmarked source read as unmarked are checked once, on the 640x480 source without rotation: both are the
// codec's doing, which the remux does not touch; the rotated source is 320x240 (a quarter of the pixels to mark
// and read) for the same reason.
func TestEmbedKeepsStreamsAndTiming(t *testing.T) {
	t.Parallel()
	for _, rotate := range []string{"0", "90"} {
		t.Run("rotate="+rotate, func(t *testing.T) {
			t.Parallel()
			testEmbedKeepsStreamsAndTiming(t, rotate)
		})
	}
}

func testEmbedKeepsStreamsAndTiming(t *testing.T, rotate string) {
	a := testAdapter(t)
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain.mov")
	size := "640x480"
	if rotate != "0" {
		// What it checks beyond the other subtest is the remux and its metadata, not the mark's strength; a whole
		// tile high, so that the embed does not also read the mark back (TestSmallFrames checks that).
		size = "320x256"
	}
	// Two seconds at NTSC's rate: 60 frames whose timestamps are all compared, two units, and the CRF 30
	// re-encode still reads (confidence 0.9999); a third second cost 1.5 CPU-s more over the test.
	makeClip(t, plain, size, "30000/1001", "2")
	src := filepath.Join(dir, "src.mov")
	// Two audio tracks in two languages (a film's original and its dub): each keeps its own.
	tags := []string{"-metadata:s:a:0", "language=fra", "-metadata:s:a:1", "language=ger",
		"-metadata", "creation_time=2024-01-02T03:04:05Z"}
	if rotate != "0" {
		tags = append(tags, "-metadata:s:v:0", "rotate="+rotate)
	}
	ffmpegRun(t, append(append([]string{"-i", plain, "-i", plain, "-map", "0", "-map", "1:a", "-c", "copy"}, tags...), src)...)
	dst := filepath.Join(dir, "out.mov")
	id := testID(3)
	rep, err := a.Embed(context.Background(), src, dst, id, Options{Preset: "ultrafast"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.FrameCount != 60 || rep.Container != "mov" {
		t.Errorf("report %+v, want 60 frames in mov", rep)
	}
	// One ffprobe a file for everything compared below (each ffprobe start loads some 200 libraries).
	in, out := probeStreams(t, src), probeStreams(t, dst)
	if out.brand != "qt" {
		t.Errorf("output brand %q, want qt (MOV)", out.brand)
	}
	if in.audioLanguages != "fra,ger" {
		t.Fatalf("source audio languages %q, want fra,ger", in.audioLanguages)
	}
	if in.audioPackets != out.audioPackets {
		t.Errorf("audio packets differ between source and output:\nsource %s\noutput %s", in.audioPackets, out.audioPackets)
	}
	if in.videoPTS != out.videoPTS {
		t.Errorf("video frame timestamps differ:\nsource %s\noutput %s", in.videoPTS, out.videoPTS)
	}
	for _, c := range []struct {
		what     string
		src, dst string
	}{
		{"video nb_frames", in.videoFrames, out.videoFrames},
		{"video rotation", in.rotation, out.rotation},
		{"audio languages", in.audioLanguages, out.audioLanguages},
		{"creation_time", in.creationTime, out.creationTime},
	} {
		noRotation := rotate == "0" && c.what == "video rotation" // absent in both
		if c.src != c.dst || c.src == "" && !noRotation {
			t.Errorf("%s: source %q, output %q", c.what, c.src, c.dst)
		}
	}
	d, err := a.Detect(context.Background(), dst)
	if err != nil {
		t.Fatal(err)
	}
	requireID(t, d, id, "output")
	if len(d.Units) != 2 {
		t.Errorf("%d units, want one per second (2)", len(d.Units))
	}
	if rotate != "0" {
		return
	}
	clean, err := a.Detect(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if clean.Watermarked {
		t.Errorf("unmarked source detected as watermarked: %+v", clean)
	}
	crf30 := filepath.Join(dir, "crf30.mp4")
	ffmpegRun(t, "-i", dst, "-c:v", "libx264", "-preset", "veryfast", "-crf", "30", "-c:a", "copy", crf30)
	if d, err = a.Detect(context.Background(), crf30); err != nil {
		t.Fatal(err)
	}
	requireID(t, d, id, "x264 CRF 30 re-encode")
}

// TestEmbedDeepAndOddSources covers decoders and layouts other than 8-bit H.264: a 10-bit HEVC source stays
// 10-bit, and a VP9 source with odd dimensions is padded to even ones.
func TestEmbedDeepAndOddSources(t *testing.T) {
	t.Parallel()
	a := testAdapter(t)
	dir := t.TempDir()
	cases := []struct {
		name, size string
		enc        []string
		depth      int
		w, h       int
	}{
		{"hevc10.mp4", "384x288", []string{"-c:v", "libx265", "-preset", "ultrafast", "-pix_fmt", "yuv420p10le",
			"-tag:v", "hvc1", "-x265-params", "log-level=error"}, 10, 384, 288},
		{"vp9odd.mp4", "322x260", []string{"-vf", "scale=321:259", "-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8",
			"-b:v", "1M", "-pix_fmt", "yuv420p"}, 8, 322, 260},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := filepath.Join(dir, c.name)
			makeClip(t, src, c.size, "25", "1", c.enc...) // one second: what differs is the decoder and the layout
			dst := filepath.Join(dir, "out-"+c.name)
			id := testID(byte(10 + i))
			rep, err := a.Embed(context.Background(), src, dst, id, Options{Preset: "ultrafast"})
			if err != nil {
				t.Fatal(err)
			}
			if rep.BitDepth != c.depth || rep.Width != c.w || rep.Height != c.h || rep.FrameCount != 25 {
				t.Errorf("report %+v", rep)
			}
			wantFmt := "yuv420p"
			if c.depth == 10 {
				wantFmt = "yuv420p10le"
			}
			got := probeOut(t, "-select_streams", "v:0", "-show_entries", "stream=codec_name,pix_fmt,width,height",
				"-of", "csv=p=0", dst)
			if want := "h264," + strconvItoa(c.w) + "," + strconvItoa(c.h) + "," + wantFmt; got != want {
				t.Errorf("output stream %q, want %q", got, want)
			}
			ref := src
			if c.name == "vp9odd.mp4" {
				// The reference for a padded output is the source padded the same way by ffmpeg alone.
				ref = filepath.Join(dir, "padded-"+c.name)
				ffmpegRun(t, "-i", src, "-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2,fillborders=right=1:bottom=1:mode=smear",
					"-c:v", "libx264", "-preset", "ultrafast", "-qp", "0", ref)
			}
			if p := psnrY(t, dst, ref); p < 36 {
				t.Errorf("output luma PSNR %.1f dB against the source: the frames were damaged", p)
			}
			d, err := a.Detect(context.Background(), dst)
			if err != nil {
				t.Fatal(err)
			}
			requireID(t, d, id, "output")
		})
	}
}

func strconvItoa(v int) string { return strconv.Itoa(v) }

// TestEmbedContainerHoldsCopiedStreams: an MP4 whose audio the MP4 muxer refuses (LPCM, as a camera's XAVC S
// file carries) is embedded into a MOV with the audio copied bit-exact, where the encoder failed and the service
// answered 500; audio that neither container takes (Opus in a file branded QuickTime) is refused as unsupported,
// not as ffmpeg failing, and leaves no output.
func TestEmbedContainerHoldsCopiedStreams(t *testing.T) {
	t.Parallel()
	a := testAdapter(t)
	dir := t.TempDir()
	pcm := filepath.Join(dir, "lpcm.mp4")
	ffmpegRun(t, "-i", plainClip(t), "-t", "0.6", "-c:v", "copy", "-c:a", "pcm_s16be", "-f", "mov", "-brand", "mp42", pcm)
	in := probeStreams(t, pcm)
	if in.brand != "mp42" {
		t.Fatalf("source brand %q, want mp42", in.brand)
	}
	dst := filepath.Join(dir, "out.mp4")
	id := testID(30)
	rep, err := a.Embed(context.Background(), pcm, dst, id, Options{Preset: "ultrafast"})
	if err != nil {
		t.Fatal(err)
	}
	out := probeStreams(t, dst)
	if rep.Container != "mov" || out.brand != "qt" {
		t.Errorf("container %q, brand %q; want a MOV (qt)", rep.Container, out.brand)
	}
	if in.audioPackets != out.audioPackets {
		t.Errorf("audio packets differ between source and output:\nsource %s\noutput %s", in.audioPackets, out.audioPackets)
	}
	// The mark itself is the codec's, as in any MOV (TestEmbedKeepsStreamsAndTiming reads it): not read again here.

	opus := filepath.Join(dir, "opus.mov")
	ffmpegRun(t, "-i", plainClip(t), "-c:v", "copy", "-c:a", "libopus", "-f", "mp4", opus)
	b, err := os.ReadFile(opus)
	if err != nil || string(b[4:8]) != "ftyp" {
		t.Fatalf("opus clip: %v %q", err, b[:8])
	}
	copy(b[8:12], "qt  ") // the major brand: a QuickTime file, which ffmpeg's MOV muxer cannot give Opus
	if err := os.WriteFile(opus, b, 0o600); err != nil {
		t.Fatal(err)
	}
	dst = filepath.Join(dir, "out-opus.mov")
	if _, err := a.Embed(context.Background(), opus, dst, id, Options{Preset: "ultrafast"}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("embedding Opus in a MOV: %v, want ErrUnsupported", err)
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Errorf("a refused embed left its output: %v", err)
	}
}

// TestTrimmedVideos: a video trimmed without re-encoding (a phone's or QuickTime's trim, ffmpeg -ss with -c copy)
// keeps all its samples behind an edit list that shows only some. Its embed was refused as truncated ("37 of 50
// frames decoded", 422 through the service), and so was the detection of a marked video trimmed afterwards: the
// frames decoded were compared with the track's sample count. Now the embed keeps exactly the frames shown, and a
// trimmed copy of the output is read.
func TestTrimmedVideos(t *testing.T) {
	t.Parallel()
	a := testAdapter(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "trimmed.mp4")
	ffmpegRun(t, "-ss", "1.4", "-i", plainClip(t), "-c", "copy", src) // 2 s at 25 fps: 50 samples, 15 shown
	dst := filepath.Join(dir, "out.mp4")
	id := testID(50)
	rep, err := a.Embed(context.Background(), src, dst, id, Options{Preset: "ultrafast"})
	if err != nil {
		t.Fatal(err)
	}
	requireSameFrameTimes(t, src, dst, rep.FrameCount)
	cut := filepath.Join(dir, "cut.mp4")
	ffmpegRun(t, "-ss", "0.2", "-i", dst, "-c", "copy", cut)
	d, err := a.Detect(context.Background(), cut)
	if err != nil {
		t.Fatal(err)
	}
	requireID(t, d, id, "the output trimmed by an edit list")
}

// TestEmbedKeepsInterlacing checks that an interlaced source (a camcorder's or a broadcast capture's) comes out
// interlaced in its own field order: x264 told nothing codes woven fields as progressive frames and flags them so,
// and players then show moving edges combed instead of deinterlacing them.
func TestEmbedKeepsInterlacing(t *testing.T) {
	t.Parallel()
	a := testAdapter(t)
	dir := t.TempDir()
	for i, order := range []string{"tt", "bb"} {
		t.Run(order, func(t *testing.T) {
			src := filepath.Join(dir, order+".mp4")
			weave, x264 := "interleave_top,fieldorder=tff", "tff=1"
			if order == "bb" {
				weave, x264 = "interleave_bottom,fieldorder=bff", "bff=1"
			}
			// 50 fields a second woven into 25 frames a second, half a second.
			makeClip(t, src, "320x256", "50", "0.5", "-vf", "tinterlace="+weave, "-flags", "+ildct+ilme", "-c:v",
				"libx264", "-preset", "ultrafast", "-x264-params", x264, "-pix_fmt", "yuv420p")
			fieldOrder := func(f string) string {
				return probeOut(t, "-select_streams", "v:0", "-show_entries", "stream=field_order", "-of", "csv=p=0", f)
			}
			if got := fieldOrder(src); got != order {
				t.Fatalf("source field order %q, want %q", got, order)
			}
			dst := filepath.Join(dir, "out-"+order+".mp4")
			id := testID(byte(20 + i))
			if _, err := a.Embed(context.Background(), src, dst, id, Options{Preset: "ultrafast"}); err != nil {
				t.Fatal(err)
			}
			if got := fieldOrder(dst); got != order {
				t.Errorf("output field order %q, want the source's %q", got, order)
			}
			if order != "tt" {
				return // the mark is the same on either field order
			}
			d, err := a.Detect(context.Background(), dst)
			if err != nil {
				t.Fatal(err)
			}
			requireID(t, d, id, "output")
		})
	}
}

func TestProbeLimits(t *testing.T) {
	t.Parallel()
	a := testAdapter(t)
	src := plainClip(t)
	for _, c := range []struct {
		lim  Limits
		want error
	}{
		{Limits{MaxDuration: 1}, ErrTooLong},
		{Limits{MaxWidth: 300}, ErrTooLarge},
		{Limits{MaxPixels: 320 * 255}, ErrTooLarge},
		{Limits{MaxFrames: 49}, ErrTooManyFrames},
		// 50 frames of 320x256 are about 0.25 s of an embed's work (EmbedCost).
		{Limits{MaxWork: 100 * time.Millisecond}, ErrTooMuchWork},
	} {
		a.Limits = c.lim
		if _, err := a.Probe(context.Background(), src); !errors.Is(err, c.want) {
			t.Errorf("limits %+v: error %v, want %v", c.lim, err, c.want)
		}
	}
	// A detection's work is counted with its own cost: less per frame, but each of the clip's two seconds (three
	// counted, for a last partial one) is analysed for about 0.8 s.
	a.Limits = Limits{MaxWork: time.Second}
	if _, err := a.Probe(context.Background(), src); err != nil {
		t.Errorf("embed probe under a 1 s work bound: %v", err)
	}
	var we *WorkError
	if _, err := a.ProbeDetect(context.Background(), src); !errors.As(err, &we) || we.Operation != "detect" || we.Frames != 50 {
		t.Errorf("detect probe under a 1 s work bound: %v, want a WorkError of a detection of 50 frames", err)
	}
	// The address-space limit reaches the tool: 16 MiB is too little to even load ffprobe's libraries.
	a.Limits = Limits{MemoryBytes: 16 << 20}
	var te *ToolError
	if _, err := a.Probe(context.Background(), src); !errors.As(err, &te) || !errors.Is(err, ErrFFmpeg) {
		t.Errorf("probe under a 16 MiB limit: error %v, want a ToolError of kind ErrFFmpeg", err)
	}
	a.Limits = Limits{}
	info, err := a.Probe(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if info.Video.Width != 320 || info.Video.Height != 256 || info.Video.Frames != 50 || info.Container != "mp4" ||
		info.Audio != 1 {
		t.Errorf("probe %+v", info)
	}
}

// TestCancelKillsFFmpeg cancels an embedding while its ffmpeg processes run and requires that none survives.
// The cancel comes as soon as both processes exist; a 5 s source encoded at x264's veryslow preset keeps them
// running for several seconds past that (a 20 s source cost most of the test's CPU to make).
func TestCancelKillsFFmpeg(t *testing.T) {
	t.Parallel()
	a := testAdapter(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "long.mp4")
	makeClip(t, src, "640x480", "25", "5", "-c:v", "libx264", "-preset", "ultrafast", "-crf", "30")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := a.Embed(ctx, src, filepath.Join(dir, "out.mp4"), testID(4), Options{Preset: "veryslow"})
		done <- err
	}()
	// Wait until the decoder and the process that writes the output run (their command lines name files in dir).
	for len(ffmpegProcesses(t, dir)) < 2 {
		select {
		case err := <-done:
			t.Fatalf("embedding ended before it could be cancelled: %v", err)
		default:
		}
		runtime.Gosched()
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
	if left := ffmpegProcesses(t, dir); len(left) > 0 {
		t.Errorf("ffmpeg processes left after cancel: %v", left)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("files left in the output directory: %v", entries)
	}
}

// TestStopAfterExitIsNotAFailure: a stage that ended on its own, cleanly, and is stopped afterwards (the pipeline
// stops every stage when one fails) still reports success. The stop met a process that was gone and Wait
// returned "exec: canceling Cmd: no such process": the pipeline blamed that stage (a decoder that had finished)
// in place of the one that failed, and the service retried the job, as for a killed tool, instead of failing it
// with the real reason (TestEmbedContainerHoldsCopiedStreams's refused Opus showed it in 1 run of 8).
func TestStopAfterExitIsNotAFailure(t *testing.T) {
	t.Parallel()
	tl := tools{limits: DefaultLimits}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := tl.newProc(ctx, "decode", "/bin/true")
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// What Wait does on cancellation when the process has just been reaped: the stop finds no process.
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(p.cmd.Process.Pid, &ws, 0, nil); err != nil || !ws.Exited() || ws.ExitStatus() != 0 {
		t.Fatalf("true: %v, status %v", err, ws)
	}
	if err := p.cmd.Cancel(); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("stopping a stage that had ended: %v, want os.ErrProcessDone (a clean end)", err)
	}
}

// ffmpegProcesses lists the pids of live processes whose command line mentions dir.
func ffmpegProcesses(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(dir)) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err == nil && bytes.Contains(stat, []byte(") Z ")) {
			continue // a zombie is dead; its parent reaps it
		}
		pids = append(pids, e.Name())
	}
	return pids
}

// TestEmbedKeepsVariableFrameRate embeds into a clip with irregular frame times: every frame comes out once, at
// its time (to the millisecond: the raw frames cross Matroska).
func TestEmbedKeepsVariableFrameRate(t *testing.T) {
	t.Parallel()
	a := testAdapter(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "vfr.mp4")
	// Two seconds: 60 frames, the two drop patterns' 35-frame period and more (a third second cost 0.25 CPU-s).
	makeClip(t, src, "320x256", "30", "2", "-vf", "select='not(eq(mod(n,5),1))*not(eq(mod(n,7),3))'",
		"-fps_mode", "vfr", "-c:v", "libx264", "-preset", "ultrafast", "-crf", "20")
	info, err := a.Probe(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Video.VFR() {
		t.Fatalf("the test clip is not VFR: r %v avg %v", info.Video.FrameRate, info.Video.AvgFrameRate)
	}
	dst := filepath.Join(dir, "out.mp4")
	rep, err := a.Embed(context.Background(), src, dst, testID(5), Options{Preset: "ultrafast"})
	if err != nil {
		t.Fatal(err)
	}
	requireSameFrameTimes(t, src, dst, rep.FrameCount)
}

// requireSameFrameTimes fails unless dst has as many video frames as src (and as the report says), each at the
// source frame's presentation time to the millisecond (the raw frames cross Matroska).
func requireSameFrameTimes(t *testing.T, src, dst string, reported int64) {
	t.Helper()
	requireSameTimes(t, probeVideo(t, src, "").times, probeVideo(t, dst, "").times, reported)
}

// probedVideo is what probeVideo reads of a file's first video stream.
type probedVideo struct {
	stream map[string]string // the stream entries asked for
	times  []float64         // each frame's presentation time, in seconds
}

// probeVideo reads, with one ffprobe, the first video stream's entries named in entries (ffprobe's stream=
// names, comma-separated; "" for none) and its frames' presentation times.
func probeVideo(t *testing.T, f, entries string) probedVideo {
	t.Helper()
	show := "frame=pts_time"
	if entries != "" {
		show = "stream=" + entries + ":" + show
	}
	out, err := exec.Command("ffprobe", "-v", "error", "-select_streams", "v:0", "-of", "json", "-show_entries", show,
		f).Output()
	if err != nil {
		t.Fatalf("ffprobe %s: %v", f, err)
	}
	var p struct {
		Streams []map[string]any `json:"streams"`
		Frames  []struct {
			PTSTime string `json:"pts_time"`
		} `json:"frames"`
	}
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatalf("ffprobe %s: %v", f, err)
	}
	r := probedVideo{stream: map[string]string{}}
	if entries != "" {
		if len(p.Streams) != 1 {
			t.Fatalf("ffprobe %s: %d video streams", f, len(p.Streams))
		}
		for _, k := range strings.Split(entries, ",") {
			if v, ok := p.Streams[0][k]; ok {
				r.stream[k] = fmt.Sprint(v)
			}
		}
	}
	for _, fr := range p.Frames {
		v, err := strconv.ParseFloat(fr.PTSTime, 64)
		if err != nil {
			t.Fatalf("ffprobe %s: frame time %q: %v", f, fr.PTSTime, err)
		}
		r.times = append(r.times, v)
	}
	return r
}

// requireSameTimes fails unless b0 (the output's frame times) has as many frames as a0 (the source's) and as
// the report says, each at the source frame's time to the millisecond.
func requireSameTimes(t *testing.T, a0, b0 []float64, reported int64) {
	t.Helper()
	if len(a0) != len(b0) || int64(len(b0)) != reported {
		t.Fatalf("%d frames in, %d out, report %d", len(a0), len(b0), reported)
	}
	for i := range a0 {
		if d := a0[i] - b0[i]; d > 0.0011 || d < -0.0011 {
			t.Fatalf("frame %d at %.6f s, source %.6f s", i, b0[i], a0[i])
		}
	}
}

// psnrY is ffmpeg's average luma PSNR of a against b.
func psnrY(t *testing.T, a, b string) float64 {
	t.Helper()
	out, err := exec.Command("ffmpeg", "-nostdin", "-i", a, "-i", b, "-lavfi", "[0:v][1:v]psnr", "-f", "null",
		"-").CombinedOutput()
	if err != nil {
		t.Fatalf("psnr: %v: %s", err, out)
	}
	m := regexp.MustCompile(`PSNR y:([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no PSNR in %s", out)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// TestDetectUnitsAreSegments: detection reports one unit per second of video that has frames, numbered by
// position (index == i, as for pages), each with its span on the video's timeline. The clip has no frame
// between 1 s and 2.2 s, so its second 1 has no unit and the first unit lasts until the next frame. The embed
// report's segments (the receipt's units) are the same spans, with their frame counts.
func TestDetectUnitsAreSegments(t *testing.T) {
	t.Parallel()
	a := testAdapter(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "gap.mp4")
	makeClip(t, src, "320x256", "25", "4", "-vf", "select='not(between(t,1,2.2))'", "-fps_mode", "vfr",
		"-c:v", "libx264", "-preset", "ultrafast", "-crf", "20")
	dst := filepath.Join(dir, "out.mp4")
	id := testID(7)
	rep, err := a.Embed(context.Background(), src, dst, id, Options{Preset: "ultrafast"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := a.Detect(context.Background(), dst)
	if err != nil {
		t.Fatal(err)
	}
	requireID(t, d, id, "output")
	want := [][2]float64{{0, 2.24}, {2.24, 3}, {3, 4}}
	wantFrames := []int{25, 19, 25} // 25 fps: frames before 1 s, from 2.24 s to 3 s, from 3 s to 4 s
	if len(rep.Segments) != len(want) {
		t.Fatalf("embed report: %d segments, want %d: %+v", len(rep.Segments), len(want), rep.Segments)
	}
	for i, sg := range rep.Segments {
		if sg.Index != i || math.Abs(sg.StartTime-want[i][0]) > 0.0015 || math.Abs(sg.EndTime-want[i][1]) > 0.0015 ||
			sg.Frames != wantFrames[i] {
			t.Fatalf("embed segment %d: want index %d spanning %.3f-%.3f s with %d frames: %+v", i, i, want[i][0],
				want[i][1], wantFrames[i], rep.Segments)
		}
	}
	if len(d.Units) != len(want) {
		t.Fatalf("%d units, want %d: %s", len(d.Units), len(want), unitsString(d.Units))
	}
	for i, u := range d.Units {
		if u.Index != i || u.StartTime == nil || u.EndTime == nil ||
			math.Abs(*u.StartTime-want[i][0]) > 0.0015 || math.Abs(*u.EndTime-want[i][1]) > 0.0015 {
			t.Fatalf("unit %d: want index %d spanning %.3f-%.3f s: %s", i, i, want[i][0], want[i][1],
				unitsString(d.Units))
		}
		if !u.Watermarked || u.WatermarkID == nil || *u.WatermarkID != id.String() {
			t.Errorf("unit %d does not carry the id: %s", i, unitsString(d.Units))
		}
	}

	// The read-back's limited detection (Embed's readBack) decodes only the first seconds, here one: it reads the
	// mark in them, ends the first unit where it stopped reading (the whole file's runs to 2.24 s), and does not
	// take the frames it did not read for a truncated file. (This file's marked output, rather than a detection
	// of its own on another clip: an unmarked clip costs detection its whole search, 0.7 CPU-s.)
	first, err := a.detect(context.Background(), dst, 1)
	if err != nil {
		t.Fatalf("detect of the first second: %v", err)
	}
	requireID(t, first, id, "the first second")
	if len(first.Units) != 1 || first.Units[0].EndTime == nil || *first.Units[0].EndTime > 1.05 {
		t.Fatalf("first second: units %s, want one ending by 1 s", unitsString(first.Units))
	}
}

func unitsString(us []codec.Unit) string {
	var b strings.Builder
	for _, u := range us {
		b.WriteString("[" + strconv.Itoa(u.Index))
		if u.StartTime != nil && u.EndTime != nil {
			b.WriteString(" " + strconv.FormatFloat(*u.StartTime, 'f', 3, 64) + "-" +
				strconv.FormatFloat(*u.EndTime, 'f', 3, 64))
		}
		b.WriteString(" " + strconv.FormatBool(u.Watermarked) + "] ")
	}
	return b.String()
}

// TestFrameBudgetStopsTheEmbed: an embed whose FrameBudget for the file's probe is below the frames it decodes
// stops at the frame past the budget with ErrFrameBudget (the caller's price covered only the budget) and
// writes nothing; the budget sees the probe (its declared frames).
func TestFrameBudgetStopsTheEmbed(t *testing.T) {
	t.Parallel()
	a := testAdapter(t)
	src := plainClip(t) // 50 frames
	var declared int64
	a.FrameBudget = func(info Info) int64 {
		declared = info.Video.Frames
		return 20
	}
	dir := t.TempDir()
	dst := filepath.Join(dir, "out.mp4")
	_, err := a.Embed(context.Background(), src, dst, testID(7), Options{Preset: "ultrafast"})
	if !errors.Is(err, ErrFrameBudget) || declared != 50 {
		t.Fatalf("embed of 50 frames under a budget of 20: error %v (budget saw %d frames); want ErrFrameBudget, 50 declared", err, declared)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("left behind after the refusal: %v", ents)
	}
}

// TestAlphaRefusedForEmbeddingReadForDetection: a video with an alpha plane (ProRes 4444 with alpha, probed as
// yuva444p12le) is refused by the embed's probe and by Embed with ErrAlpha and leaves no output, where before its transparent parts came
// out opaque without a word; a detection reads it, so a marked video turned into one still gives its id.
func TestAlphaRefusedForEmbeddingReadForDetection(t *testing.T) {
	t.Parallel()
	a := testAdapter(t)
	dir := t.TempDir()
	src, marked, alpha := filepath.Join(dir, "src.mp4"), filepath.Join(dir, "marked.mp4"), filepath.Join(dir, "alpha.mov")
	makeClip(t, src, "320x256", "10", "1")
	id := testID(21)
	if _, err := a.Embed(context.Background(), src, marked, id, Options{Preset: "ultrafast"}); err != nil {
		t.Fatal(err)
	}
	ffmpegRun(t, "-i", marked, "-map", "0:v", "-c:v", "prores_ks", "-profile:v", "4444", "-pix_fmt", "yuva444p10le", alpha)
	// The embed's probe refuses it (before a request is charged), the detection's reads it.
	if _, err := a.Probe(context.Background(), alpha); !errors.Is(err, ErrAlpha) {
		t.Fatalf("embed probe of a video with alpha: %v, want ErrAlpha", err)
	}
	if _, err := a.ProbeDetect(context.Background(), alpha); err != nil {
		t.Fatalf("detection probe of a video with alpha: %v", err)
	}
	out := filepath.Join(dir, "out.mov")
	if _, err := a.Embed(context.Background(), alpha, out, testID(22), Options{Preset: "ultrafast"}); !errors.Is(err, ErrAlpha) ||
		!strings.Contains(err.Error(), "yuva444p") {
		t.Fatalf("embed of a video with alpha: %v, want ErrAlpha naming the pixel format", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("the refused embed left an output: %v", err)
	}
	d, err := a.Detect(context.Background(), alpha)
	if err != nil {
		t.Fatal(err)
	}
	requireID(t, d, id, "marked video with alpha")
}
