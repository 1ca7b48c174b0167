package video

import (
	"context"
	"path/filepath"
	"testing"
)

// TestEmbedKeepsHDRSignalling: a 10-bit HDR10 source (HEVC, BT.2020 primaries and matrix, PQ transfer, limited
// range) comes out 10-bit with the same colour signalling, so players still show it as HDR, and carries the id.
func TestEmbedKeepsHDRSignalling(t *testing.T) {
	a := testAdapter(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "hdr10.mp4")
	makeClip(t, src, "384x288", "25", "2", "-c:v", "libx265", "-preset", "ultrafast", "-pix_fmt", "yuv420p10le",
		"-tag:v", "hvc1", "-x265-params", "log-level=error:hdr10=1:repeat-headers=1",
		"-color_primaries", "bt2020", "-color_trc", "smpte2084", "-colorspace", "bt2020nc", "-color_range", "tv")
	const tags = "stream=pix_fmt,color_range,color_space,color_transfer,color_primaries"
	in := probeOut(t, "-select_streams", "v:0", "-show_entries", tags, "-of", "csv=p=0", src)
	if in != "yuv420p10le,tv,bt2020nc,smpte2084,bt2020" {
		t.Fatalf("the test clip is not HDR10: %s", in)
	}
	dst := filepath.Join(dir, "out.mp4")
	id := testID(21)
	rep, err := a.Embed(context.Background(), src, dst, id, Options{Preset: "ultrafast"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.BitDepth != 10 || rep.FrameCount != 50 {
		t.Fatalf("report %+v", rep)
	}
	if out := probeOut(t, "-select_streams", "v:0", "-show_entries", tags, "-of", "csv=p=0", dst); out != in {
		t.Fatalf("output signalling %q, source %q", out, in)
	}
	d, err := a.Detect(context.Background(), dst)
	if err != nil {
		t.Fatal(err)
	}
	requireID(t, d, id, "HDR10 output")
}
