package video

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
)

// MaxIndexedSamples bounds the samples a file's tracks declare, summed over them, that ffmpeg's MP4 demuxer
// indexes one by one. It makes an index entry (about 24 bytes) for each declared sample when it opens the file,
// in every process that opens it (the probe, the decoder, and the encoder that copies the audio), and a sample
// table can declare them for free: a constant sample size (stsz) or a run without per-sample fields (trun) is a
// dozen bytes for any count. A 113 KB MP4 whose audio track declared 80 million one-byte samples made ffprobe
// hold 1.9 GB. Two million is about 48 MB an opening; ten minutes at the frame bound (36,000 frames) with a
// few audio tracks (AAC: 47 packets a second) declares about 100,000.
const MaxIndexedSamples = 2_000_000

// maxIndexBox bounds the moov or moof box read to count the samples (a moov holding two million sample sizes is
// 8 MB).
const maxIndexBox = 32 << 20

// checkSampleTables fails with ErrTooManyFrames when the file at path declares more than limit samples that
// ffmpeg indexes one by one: the sample counts of every track's stsz or stz2 in moov (or in the moov a QuickTime
// cmov compresses), and of every trun in the movie fragments (moof). A sound track whose timing says one sample per tick (stts: one entry of duration 1) is
// uncompressed audio read in chunks, whose samples are not indexed: its count (48,000 a second) is left out.
// Anything it cannot read is left to ffprobe, which judges the file.
func checkSampleTables(path string, limit int64) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("video: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("video: %w", err)
	}
	size := st.Size()
	// Read in order through a buffer, seeking over large boxes (the media data): a file of millions of tiny boxes
	// costs a pass over its bytes, not a system call a box.
	r := bufio.NewReaderSize(f, 64<<10)
	var total, off int64
	skip := func(n int64) error {
		off += n
		if n <= int64(r.Buffered()) {
			_, err := r.Discard(int(n))
			return err
		}
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return err
		}
		r.Reset(f)
		return nil
	}
	var hdr [16]byte
	for off+8 <= size {
		if _, err := io.ReadFull(r, hdr[:8]); err != nil {
			return nil
		}
		boxSize, hlen := int64(binary.BigEndian.Uint32(hdr[:4])), int64(8)
		switch boxSize {
		case 0: // to the end of the file
			boxSize = size - off
		case 1: // a 64-bit size follows the type
			if _, err := io.ReadFull(r, hdr[8:16]); err != nil {
				return nil
			}
			boxSize, hlen = int64(binary.BigEndian.Uint64(hdr[8:16])), 16
		}
		if boxSize < hlen || boxSize > size-off {
			boxSize = size - off // cut or malformed: what is there is what ffmpeg reads
			if boxSize < hlen {
				return nil
			}
		}
		off += hlen
		typ := string(hdr[4:8])
		if typ != "moov" && typ != "moof" {
			if err := skip(boxSize - hlen); err != nil {
				return nil
			}
			continue
		}
		if boxSize-hlen > maxIndexBox {
			return &LimitError{Kind: ErrTooManyFrames, Box: typ, Frames: boxSize - hlen, MaxFrames: maxIndexBox}
		}
		body := make([]byte, boxSize-hlen)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil
		}
		off += boxSize - hlen
		if typ == "moov" {
			total += moovSamples(body, 0)
		} else {
			total += moofSamples(body)
		}
		if total > limit {
			return &LimitError{Kind: ErrTooManyFrames, Samples: true, Frames: total, MaxFrames: limit}
		}
	}
	return nil
}

// eachBox calls fn with the type and body of each box in b, in order, and stops at the first malformed one.
func eachBox(b []byte, fn func(typ string, body []byte)) {
	for len(b) >= 8 {
		size, hlen := uint64(binary.BigEndian.Uint32(b)), uint64(8)
		switch size {
		case 0:
			size = uint64(len(b))
		case 1:
			if len(b) < 16 {
				return
			}
			size, hlen = binary.BigEndian.Uint64(b[8:]), 16
		}
		if size < hlen || size > uint64(len(b)) {
			return
		}
		fn(string(b[4:8]), b[hlen:size])
		b = b[size:]
	}
}

// child is the body of the first box of type typ in b, nil when there is none.
func child(b []byte, typ string) []byte {
	var found []byte
	eachBox(b, func(t string, body []byte) {
		if found == nil && t == typ {
			found = body
		}
	})
	return found
}

// be32 is the big-endian uint32 at b[i:], 0 when b is too short.
func be32(b []byte, i int) int64 {
	if len(b) < i+4 {
		return 0
	}
	return int64(binary.BigEndian.Uint32(b[i:]))
}

// moovSamples sums the sample counts of the tracks of a moov box's body; depth counts the compressed movie
// headers it is inside.
func moovSamples(moov []byte, depth int) int64 {
	var total int64
	if cmov := child(moov, "cmov"); cmov != nil {
		// A QuickTime compressed movie header: the moov deflated in cmvd (its size, then zlib data), which ffmpeg
		// inflates and reads in place of this one.
		if depth >= 2 {
			return math.MaxInt32 // one inside another inside another: no encoder writes that
		}
		inner, ok := inflateMoov(child(cmov, "cmvd"))
		if !ok {
			return math.MaxInt32 // more than maxIndexBox inflated: over any limit
		}
		eachBox(inner, func(typ string, body []byte) {
			if typ == "moov" {
				total += moovSamples(body, depth+1)
			}
		})
	}
	eachBox(moov, func(typ string, trak []byte) {
		if typ != "trak" {
			return
		}
		mdia := child(trak, "mdia")
		hdlr := child(mdia, "hdlr") // version and flags, pre_defined, then the handler type
		stbl := child(child(mdia, "minf"), "stbl")
		count := be32(child(stbl, "stsz"), 8) // version and flags, sample_size, sample_count
		if stz2 := child(stbl, "stz2"); stz2 != nil {
			count = be32(stz2, 8) // version and flags, reserved and field_size, sample_count
		}
		stts := child(stbl, "stts") // version and flags, entry_count, then (sample_count, sample_delta) pairs
		if len(hdlr) >= 12 && string(hdlr[8:12]) == "soun" && be32(stts, 4) == 1 && be32(stts, 12) == 1 {
			return // uncompressed audio, read in chunks
		}
		total += count
	})
	return total
}

// inflateMoov inflates a cmvd box's body (the uncompressed size, then zlib data), reading at most maxIndexBox
// bytes: ok is false when there is more. Data that is not zlib inflates to nothing (ffmpeg fails on it too).
func inflateMoov(cmvd []byte) (_ []byte, ok bool) {
	if len(cmvd) < 4 {
		return nil, true
	}
	zr, err := zlib.NewReader(bytes.NewReader(cmvd[4:]))
	if err != nil {
		return nil, true
	}
	defer zr.Close()
	b, _ := io.ReadAll(io.LimitReader(zr, maxIndexBox+1)) // a corrupt stream ends the data where it breaks
	return b, len(b) <= maxIndexBox
}

// moofSamples sums the sample counts of the track runs of a moof box's body.
func moofSamples(moof []byte) int64 {
	var total int64
	eachBox(moof, func(typ string, traf []byte) {
		if typ != "traf" {
			return
		}
		eachBox(traf, func(typ string, trun []byte) {
			if typ == "trun" {
				total += be32(trun, 4) // version and flags, sample_count
			}
		})
	})
	return total
}
