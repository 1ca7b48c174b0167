package video

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// box is an ISO box of type typ around body.
func box(typ string, body ...[]byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(8+len(bytes.Join(body, nil))))
	return append(append(b, typ...), bytes.Join(body, nil)...)
}

// TestDeclaredSamplesAreBounded: an MP4 whose audio track declares ten million samples in a dozen bytes (a
// constant sample size) is refused as having too many frames, by embed and by detect, before any ffmpeg opens
// it: each ffmpeg indexed every declared sample (a 113 KB file declaring 80 million made ffprobe hold 1.9 GB).
// The same holds for movie fragments (trun) and for a compressed movie header (cmov). Uncompressed audio, which ffmpeg reads in chunks, is not counted
// sample by sample: a 50-second PCM track (2.4 million samples) passes.
func TestDeclaredSamplesAreBounded(t *testing.T) {
	t.Parallel()
	a := testAdapter(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "fast.mp4")
	ffmpegRun(t, "-i", plainClip(t), "-c", "copy", "-movflags", "+faststart", src)
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	// With +faststart the moov follows the ftyp; its second sample-size table is the audio track's (ffmpeg writes
	// the tracks in their order, video first). Its sample_size and sample_count become 1 and ten million, in place.
	moov := int(binary.BigEndian.Uint32(b)) // the ftyp's size
	if string(b[moov+4:moov+8]) != "moov" {
		t.Fatalf("no moov after the ftyp: %q", b[moov+4:moov+8])
	}
	end := moov + int(binary.BigEndian.Uint32(b[moov:]))
	audioBox := func(typ string) int { // the body of the second box of type typ in the moov
		first := bytes.Index(b[moov:end], []byte(typ))
		second := bytes.Index(b[moov+first+4:end], []byte(typ))
		if first < 0 || second < 0 {
			t.Fatalf("two %s boxes not found in the moov", typ)
		}
		return moov + first + 4 + second + 4
	}
	// Ten million samples of one byte (stsz: version and flags, sample_size, sample_count), all in every chunk
	// (stsc: version and flags, entry_count, then first_chunk, samples_per_chunk, sample_description_index):
	// ffmpeg would index all ten million.
	stsz, stsc := audioBox("stsz"), audioBox("stsc")
	binary.BigEndian.PutUint32(b[stsz+4:], 1)
	binary.BigEndian.PutUint32(b[stsz+8:], 10_000_000)
	binary.BigEndian.PutUint32(b[stsc+4:], 1)
	binary.BigEndian.PutUint32(b[stsc+8:], 1)
	binary.BigEndian.PutUint32(b[stsc+12:], 10_000_000)
	binary.BigEndian.PutUint32(b[stsc+16:], 1)
	crafted := filepath.Join(dir, "crafted.mp4")
	if err := os.WriteFile(crafted, b, 0o600); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "out.mp4")
	if _, err := a.Embed(context.Background(), crafted, dst, testID(40), Options{}); !errors.Is(err, ErrTooManyFrames) {
		t.Errorf("embed of ten million declared samples: %v, want ErrTooManyFrames", err)
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Errorf("a refused embed left its output: %v", err)
	}
	if _, err := a.Detect(context.Background(), crafted); !errors.Is(err, ErrTooManyFrames) {
		t.Errorf("detect of ten million declared samples: %v, want ErrTooManyFrames", err)
	}

	// A fragment's run without per-sample fields: version and flags, then sample_count.
	frag := filepath.Join(dir, "frag.mp4")
	trun := binary.BigEndian.AppendUint32(make([]byte, 4), 3_000_000)
	if err := os.WriteFile(frag, append(box("ftyp", []byte("isom\x00\x00\x02\x00")), box("moof", box("traf", box("trun", trun)))...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkSampleTables(frag, MaxIndexedSamples); !errors.Is(err, ErrTooManyFrames) {
		t.Errorf("a fragment declaring three million samples: %v, want ErrTooManyFrames", err)
	}

	// The same declared in a QuickTime compressed movie header (cmov), which ffmpeg inflates and reads.
	trak := box("trak", box("mdia", box("minf", box("stbl", box("stsz", binary.BigEndian.AppendUint32(make([]byte, 8), 3_000_000))))))
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	inner := box("moov", trak)
	zw.Write(inner) //nolint:errcheck // a bytes.Buffer does not fail
	zw.Close()
	cmvd := append(binary.BigEndian.AppendUint32(nil, uint32(len(inner))), z.Bytes()...)
	cmov := filepath.Join(dir, "cmov.mov")
	if err := os.WriteFile(cmov, box("moov", box("cmov", box("dcom", []byte("zlib")), box("cmvd", cmvd))), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkSampleTables(cmov, MaxIndexedSamples); !errors.Is(err, ErrTooManyFrames) {
		t.Errorf("a compressed movie header declaring three million samples: %v, want ErrTooManyFrames", err)
	}

	pcm := filepath.Join(dir, "pcm.mov")
	ffmpegRun(t, "-f", "lavfi", "-i", "anullsrc=r=48000:cl=mono", "-t", "50", "-c:a", "pcm_u8", pcm)
	if err := checkSampleTables(pcm, MaxIndexedSamples); err != nil {
		t.Errorf("50 s of PCM: %v, want it let through (read in chunks)", err)
	}
}

// FuzzCheckSampleTables: any bytes are read without a panic, and an error is only ever ErrTooManyFrames.
func FuzzCheckSampleTables(f *testing.F) {
	f.Add(box("moov", box("trak", box("mdia", box("minf", box("stbl", box("stsz", make([]byte, 12))))))))
	f.Add(box("moof", box("traf", box("trun", []byte{0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}))))
	f.Add([]byte("\x00\x00\x00\x01moov\xff\xff\xff\xff\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "f.mp4")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := checkSampleTables(path, 1000); err != nil && !errors.Is(err, ErrTooManyFrames) {
			t.Fatalf("error %v", err)
		}
	})
}
