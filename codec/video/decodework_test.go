package video

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// childBox is the offset and size of the first box of type typ among the boxes of b[from:to].
func childBox(t *testing.T, b []byte, from, to int, typ string) (off, size int) {
	t.Helper()
	for off = from; off+8 <= to; off += size {
		size = int(binary.BigEndian.Uint32(b[off:]))
		if size < 8 || off+size > to {
			t.Fatalf("box at %d: size %d outside its parent", off, size)
		}
		if string(b[off+4:off+8]) == typ {
			return off, size
		}
	}
	t.Fatalf("no %s box in bytes %d to %d", typ, from, to)
	return 0, 0
}

// repeatEdit is the MP4 b (one video track, moov after mdat so that no chunk offset moves) with its one-entry
// edit list written n times: the track's samples are shown n times over, one after the other, while every
// count the file states (the samples, the movie's duration) stays that of one pass. ffprobe reports the
// samples and the duration of one pass; ffmpeg decodes n times the frames.
func repeatEdit(t *testing.T, b []byte, n int) []byte {
	t.Helper()
	moov, moovSize := childBox(t, b, 0, len(b), "moov")
	if moov+moovSize != len(b) {
		t.Fatal("moov is not the last box: growing it would move the chunks")
	}
	trak, trakSize := childBox(t, b, moov+8, moov+moovSize, "trak")
	edts, edtsSize := childBox(t, b, trak+8, trak+trakSize, "edts")
	elst, elstSize := childBox(t, b, edts+8, edts+edtsSize, "elst")
	// elst: size, type, version and flags, entry count, then the entries (12 bytes each in version 0).
	if b[elst+8] != 0 || binary.BigEndian.Uint32(b[elst+12:]) != 1 || elstSize != 28 {
		t.Fatalf("edit list % x: want one version-0 entry", b[elst:elst+elstSize])
	}
	grow := 12 * (n - 1)
	list := binary.BigEndian.AppendUint32(nil, uint32(elstSize+grow))
	list = append(list, "elst\x00\x00\x00\x00"...)
	list = binary.BigEndian.AppendUint32(list, uint32(n))
	list = append(list, bytes.Repeat(b[elst+16:elst+28], n)...)
	out := append(append(append([]byte(nil), b[:elst]...), list...), b[elst+elstSize:]...)
	for _, box := range []int{moov, trak, edts} {
		binary.BigEndian.PutUint32(out[box:], binary.BigEndian.Uint32(out[box:])+uint32(grow))
	}
	return out
}

// TestDecodeStopsAtTheWorkBound: a video whose container states fewer frames than it shows passes the work
// bound at its probe, and is stopped while decoding, at the frame past the frames of its size the bound allows:
// an embed and a detection fail with a WorkError that says so (Decoded), and the embed writes nothing. The
// fixture is a one-second clip of 20 frames of 256x256 whose edit list shows the track three times: it declares
// 20 frames and a second, and ffmpeg decodes 60. Under a bound of 150 ms of one core (38 frames of this size at
// EmbedCost) the embed's probe (20 frames, about 79 ms) passes; under 1.612 s (two seconds analysed and 30
// frames at DetectCost) so does the detection's.
func TestDecodeStopsAtTheWorkBound(t *testing.T) {
	t.Parallel()
	a := testAdapter(t)
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain.mp4")
	ffmpegRun(t, "-f", "lavfi", "-i", "testsrc=size=256x256:rate=20:duration=1", "-c:v", "libx264",
		"-preset", "ultrafast", "-pix_fmt", "yuv420p", plain)
	b, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "shown-three-times.mp4")
	if err := os.WriteFile(src, repeatEdit(t, b, 3), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := probeOut(t, "-count_frames", "-select_streams", "v:0", "-show_entries", "stream=nb_frames,nb_read_frames",
		"-of", "csv=p=0", src); got != "20,60" {
		t.Fatalf("the fixture declares and shows %q frames; want 20,60", got)
	}
	ctx := context.Background()
	for _, c := range []struct {
		op    operation
		bound time.Duration
		fit   int64
	}{
		{embedding, 150 * time.Millisecond, 38},
		{detecting, 1612 * time.Millisecond, 30},
	} {
		a.Limits = Limits{MaxWork: c.bound}
		probe, run := a.Probe, func() error {
			_, err := a.Embed(ctx, src, filepath.Join(dir, "out.mp4"), testID(3), Options{Preset: "ultrafast"})
			return err
		}
		if c.op.name == "detect" {
			probe, run = a.ProbeDetect, func() error { _, err := a.Detect(ctx, src); return err }
		}
		info, err := probe(ctx, src)
		if err != nil || info.Video.Frames != 20 {
			t.Fatalf("%s probe under %v: %+v %v; want it taken, 20 frames declared", c.op.name, c.bound, info.Video, err)
		}
		var we *WorkError
		if err := run(); !errors.As(err, &we) || !errors.Is(err, ErrTooMuchWork) || !we.Decoded ||
			we.Frames != c.fit || we.MaxFrames != c.fit || we.Operation != c.op.name || we.Limit != c.bound {
			t.Fatalf("%s under %v: %v (%+v); want a WorkError stopped while decoding, at %d frames", c.op.name, c.bound, err, we, c.fit)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Fatalf("left behind by the stopped embed: %v; want only the two sources", ents)
	}
}
