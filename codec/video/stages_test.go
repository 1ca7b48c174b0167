package video

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"filigrane/codec"
)

// BenchmarkStageCPU splits the embedding pipeline's extra CPU over a plain x264 re-encode (bench/README.md,
// "Video"): it runs only with FILIGRANE_VIDEO_STAGES set to an 8-bit MP4 or MOV clip, and reports the CPU
// seconds (user+sys) of each part run one at a time on files: the plain re-encode; decoding to raw Matroska;
// x264 on the unmarked raw frames; the Go stage (Mark8 on every frame, frames in memory); x264 on the marked raw
// frames.
//
//	FILIGRANE_VIDEO_STAGES=$PWD/megamind.mp4 go test -run '^$' -bench StageCPU -benchtime 1x ./codec/video
func BenchmarkStageCPU(b *testing.B) {
	src := os.Getenv("FILIGRANE_VIDEO_STAGES")
	if src == "" {
		b.Skip("set FILIGRANE_VIDEO_STAGES to a clip to measure")
	}
	for b.Loop() {
		stageCPU(b, src)
	}
}

func stageCPU(b *testing.B, src string) {
	a := testAdapter(b)
	info, err := a.Probe(context.Background(), src)
	if err != nil {
		b.Fatal(err)
	}
	v := info.Video
	f := newFrameFormat(v)
	if f.bits != 8 {
		b.Skip("8-bit clips only")
	}
	dir := b.TempDir()
	children := func(run func()) float64 {
		var r0, r1 syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_CHILDREN, &r0) //nolint:errcheck
		run()
		syscall.Getrusage(syscall.RUSAGE_CHILDREN, &r1) //nolint:errcheck
		return cpuSeconds(r1) - cpuSeconds(r0)
	}
	ff := func(args ...string) func() {
		return func() { ffmpegRun(b, args...) }
	}
	x264 := []string{"-c:v", "libx264", "-preset", DefaultPreset, "-crf", "18", "-pix_fmt", f.pixFmt}
	raw, marked := filepath.Join(dir, "raw.mkv"), filepath.Join(dir, "marked.mkv")
	plain := children(ff(append(append([]string{"-i", src, "-map", "0:v:0"}, x264...), filepath.Join(dir, "plain.mp4"))...))
	dec := children(ff(append([]string{"-i", src, "-map", "0:v:0", "-copyts", "-c:v", "rawvideo", "-pix_fmt",
		f.pixFmt, "-fps_mode", "passthrough", "-write_crc32", "0", "-f", "matroska"}, raw)...))
	encode := func(in, out string) func() {
		return ff(append(append([]string{"-f", "matroska", "-i", in, "-map", "0:v:0", "-copyts"}, x264...),
			"-fps_mode", "passthrough", "-f", "matroska", filepath.Join(dir, out))...)
	}
	encRaw := children(encode(raw, "enc-raw.mkv"))

	data, err := os.ReadFile(raw)
	if err != nil {
		b.Fatal(err)
	}
	m, err := a.Codec.NewVideoMarker(testID(1), v.Width, v.Height, codec.EmbedOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var out bytes.Buffer
	var s0, s1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &s0) //nolint:errcheck
	n, err := walkMKV(bytes.NewReader(data), &out, f.size, 1<<40, "", func(pix []byte, _ int64) error {
		return m.Mark8(pix[:f.lumaSize], v.Width)
	})
	syscall.Getrusage(syscall.RUSAGE_SELF, &s1) //nolint:errcheck
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(marked, out.Bytes(), 0o600); err != nil {
		b.Fatal(err)
	}
	encMarked := children(encode(marked, "enc-marked.mkv"))
	size := func(f string) int64 {
		st, err := os.Stat(f)
		if err != nil {
			b.Fatal(err)
		}
		return st.Size()
	}
	for _, m := range []struct {
		v    float64
		unit string
	}{
		{plain, "plain-cpu-s"}, {dec, "decode-cpu-s"}, {encRaw, "x264-raw-cpu-s"},
		{cpuSeconds(s1) - cpuSeconds(s0), "go-stage-cpu-s"}, {encMarked, "x264-marked-cpu-s"},
		{float64(size(filepath.Join(dir, "enc-raw.mkv"))), "raw-out-bytes"},
		{float64(size(filepath.Join(dir, "enc-marked.mkv"))), "marked-out-bytes"}, {float64(n), "frames"},
	} {
		b.ReportMetric(m.v, m.unit)
	}
}

func cpuSeconds(r syscall.Rusage) float64 {
	return float64(r.Utime.Sec+r.Stime.Sec) + float64(r.Utime.Usec+r.Stime.Usec)/1e6
}
