package video

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestEmbedKeepsHDRSignalling: a 10-bit HDR10 source (HEVC, BT.2020 primaries and matrix, PQ transfer, limited
// range, mastering display and content light level SEI) with variable frame timing comes out 10-bit with the
// same colour signalling and static metadata, so players still show it as HDR, with every frame at its time,
// and carries the id.
func TestEmbedKeepsHDRSignalling(t *testing.T) {
	t.Parallel()
	a := testAdapter(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "hdr10.mp4")
	const master = "G(13250,34500)B(7500,3000)R(34000,16000)WP(15635,16450)L(10000000,50)"
	// Two seconds (a gap from 1.3 to 1.8 s, every fourth frame dropped): both units read the id at confidence 1;
	// a third second cost 0.3 CPU-s more.
	makeClip(t, src, "384x288", "25", "2", "-vf", "select='not(eq(mod(n,4),1))*not(between(t,1.3,1.8))'",
		"-fps_mode", "vfr", "-c:v", "libx265", "-preset", "ultrafast", "-pix_fmt", "yuv420p10le",
		"-tag:v", "hvc1", "-x265-params", "log-level=error:hdr10=1:repeat-headers=1:master-display="+master+
			":max-cll=1000,400",
		"-color_primaries", "bt2020", "-color_trc", "smpte2084", "-colorspace", "bt2020nc", "-color_range", "tv")
	// The colour signalling and the frame times of each file, with one ffprobe a file.
	const tags = "pix_fmt,color_range,color_space,color_transfer,color_primaries"
	signalling := func(p probedVideo) string {
		var v []string
		for _, k := range strings.Split(tags, ",") {
			v = append(v, p.stream[k])
		}
		return strings.Join(v, ",")
	}
	probedIn := probeVideo(t, src, tags)
	in := signalling(probedIn)
	if in != "yuv420p10le,tv,bt2020nc,smpte2084,bt2020" {
		t.Fatalf("the test clip is not HDR10: %s", in)
	}
	info, err := a.Probe(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Video.VFR() {
		t.Fatalf("the test clip is not VFR: r %v avg %v", info.Video.FrameRate, info.Video.AvgFrameRate)
	}
	wantSEI := hdrSEI(t, src)
	if !strings.Contains(wantSEI, "max_content_light_level=1000") {
		t.Fatalf("the test clip carries no HDR static metadata: %q", wantSEI)
	}
	dst := filepath.Join(dir, "out.mp4")
	id := testID(21)
	rep, err := a.Embed(context.Background(), src, dst, id, Options{Preset: "ultrafast"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.BitDepth != 10 {
		t.Fatalf("report %+v", rep)
	}
	probedOut := probeVideo(t, dst, tags)
	if out := signalling(probedOut); out != in {
		t.Fatalf("output signalling %q, source %q", out, in)
	}
	if got := hdrSEI(t, dst); got != wantSEI {
		t.Errorf("output HDR static metadata\n%q\nsource's\n%q", got, wantSEI)
	}
	requireSameTimes(t, probedIn.times, probedOut.times, rep.FrameCount)
	d, err := a.Detect(context.Background(), dst)
	if err != nil {
		t.Fatal(err)
	}
	requireID(t, d, id, "HDR10 output")
}

// hdrSEI lists the fields of the first mastering display colour volume and content light level SEI messages of
// the video stream of f, as the bitstream carries them (ffmpeg 5.1's H.264 decoder does not report them as
// side data, so the bitstream is read with the trace_headers filter).
func hdrSEI(t *testing.T, f string) string {
	t.Helper()
	out, err := exec.Command("ffmpeg", "-nostdin", "-v", "info", "-i", f, "-map", "0:v:0", "-c", "copy",
		"-bsf:v", "trace_headers", "-frames:v", "1", "-f", "null", "-").CombinedOutput()
	if err != nil {
		t.Fatalf("trace_headers %s: %v: %s", f, err, out)
	}
	field := regexp.MustCompile(`\] \d+\s+(display_primaries_[xy]\[\d\]|white_point_[xy]|` +
		`(?:max|min)_display_mastering_luminance|max_content_light_level|max_pic_average_light_level)\s+[01]+ = (\d+)`)
	seen := map[string]bool{}
	var fields []string
	for _, m := range field.FindAllStringSubmatch(string(out), -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			fields = append(fields, m[1]+"="+m[2])
		}
	}
	sort.Strings(fields) // the encoders write the two messages in different orders
	return strings.Join(fields, " ")
}
