package video

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// The decoder hands frames to the Go stage as raw video in Matroska rather than a bare raw stream, because
// Matroska carries each frame's timestamp: the encoder then keeps the source's timing, variable frame rate
// included. The Go stage walks the EBML elements, edits the pixels of each block in place (sizes never change)
// and passes every byte on. Only the elements written by ffmpeg's Matroska muxer for one raw video track are
// understood; anything else is copied through untouched.

const (
	ebmlSegment     = 0x18538067
	ebmlTracks      = 0x1654AE6B
	ebmlTrackEntry  = 0xAE
	ebmlCodecID     = 0x86
	ebmlCodecPriv   = 0x63A2
	ebmlVideo       = 0xE0
	ebmlColourSpace = 0x2EB524
	ebmlVoid        = 0xEC
	ebmlCluster     = 0x1F43B675
	ebmlBlockGroup  = 0xA0
	ebmlBlock       = 0xA1
	ebmlSimpleBlock = 0xA3
	ebmlTimestamp   = 0xE7
	ebmlUnknownSize = -1
	// maxCopiedElement bounds any element other than a frame block (headers, tags, cues).
	maxCopiedElement = 64 << 20
)

// frameFunc receives each frame's pixels (writable in place) and its presentation time in milliseconds.
type frameFunc func(pix []byte, ms int64) error

// walkMKV reads Matroska from r, calls fn for every block of exactly frameSize bytes of pixels, and writes the
// stream, with the edited pixels, to w (nil: nothing is written). It returns the number of frames. A non-empty
// rawTag is the FourCC of the frames' pixel format: a raw track the muxer stored in VFW mode is rewritten as
// native uncompressed video of that format (see declareRawTrack).
func walkMKV(r io.Reader, w io.Writer, frameSize int, maxFrames int64, rawTag string, fn frameFunc) (int64, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	var hdr [12]byte
	var buf []byte
	var clusterMS, frames int64
	write := func(b []byte) error {
		if w == nil {
			return nil
		}
		_, err := w.Write(b)
		return err
	}
	for {
		id, size, n, err := readElementHeader(br, hdr[:])
		if err == io.EOF {
			return frames, nil
		}
		if err != nil {
			return frames, err
		}
		if err := write(hdr[:n]); err != nil {
			return frames, err
		}
		if id == ebmlTracks && rawTag != "" {
			if size == ebmlUnknownSize || size > maxCopiedElement {
				return frames, fmt.Errorf("video: raw stream track list of %d bytes", size)
			}
			b := make([]byte, size)
			if _, err := io.ReadFull(br, b); err != nil {
				return frames, fmt.Errorf("video: raw stream cut in the track list: %w", err)
			}
			if err := declareRawTrack(b, rawTag); err != nil {
				return frames, err
			}
			if err := write(b); err != nil {
				return frames, err
			}
			continue
		}
		switch id {
		case ebmlSegment, ebmlCluster, ebmlBlockGroup:
			continue // master elements: walk into their children
		case ebmlTimestamp, ebmlSimpleBlock, ebmlBlock:
		default:
			if size == ebmlUnknownSize || size > maxCopiedElement {
				return frames, fmt.Errorf("video: raw stream element 0x%X of %d bytes", id, size)
			}
			if w == nil {
				_, err = br.Discard(int(size))
			} else {
				_, err = io.CopyN(w, br, size)
			}
			if err != nil {
				return frames, fmt.Errorf("video: raw stream cut in element 0x%X: %w", id, err)
			}
			continue
		}
		if size == ebmlUnknownSize || size > int64(frameSize)+64 {
			return frames, fmt.Errorf("video: raw stream element 0x%X of %d bytes for %d-byte frames", id, size,
				frameSize)
		}
		if cap(buf) < int(size) {
			buf = make([]byte, size)
		}
		b := buf[:size]
		if _, err := io.ReadFull(br, b); err != nil {
			return frames, fmt.Errorf("video: raw stream cut in a frame: %w", err)
		}
		if id == ebmlTimestamp {
			var v int64
			for _, c := range b {
				v = v<<8 | int64(c)
			}
			clusterMS = v
		} else {
			// Block: track number (a vint), a signed 16-bit timestamp relative to the cluster, flags, pixels.
			tn := vintLength(b[0])
			if tn == 0 || len(b) < tn+3 {
				return frames, errors.New("video: malformed raw frame block")
			}
			rel := int64(int16(uint16(b[tn])<<8 | uint16(b[tn+1])))
			if b[tn+2]&0x06 != 0 {
				return frames, errors.New("video: laced raw frame block")
			}
			pix := b[tn+3:]
			if len(pix) != frameSize {
				return frames, fmt.Errorf("video: raw frame of %d bytes, expected %d", len(pix), frameSize)
			}
			frames++
			if frames > maxFrames {
				return frames, &LimitError{Kind: ErrTooManyFrames, Frames: frames, MaxFrames: maxFrames, Decoded: true}
			}
			if err := fn(pix, clusterMS+rel); err != nil {
				return frames, err
			}
		}
		if err := write(b); err != nil {
			return frames, err
		}
	}
}

// vintLength is the length in bytes of the EBML variable-size integer starting with byte b (0: invalid).
func vintLength(b byte) int {
	for l := 1; l <= 8; l++ {
		if b&(0x80>>(l-1)) != 0 {
			return l
		}
	}
	return 0
}

// readElementHeader reads an element id and data size into hdr and returns them with the header length. The
// size is ebmlUnknownSize when all its value bits are set.
func readElementHeader(br *bufio.Reader, hdr []byte) (id uint32, size int64, n int, err error) {
	c, err := br.ReadByte()
	if err != nil {
		return 0, 0, 0, err // io.EOF between elements is the normal end
	}
	il := vintLength(c)
	if il == 0 || il > 4 {
		return 0, 0, 0, fmt.Errorf("video: bad element id byte 0x%02X in raw stream", c)
	}
	hdr[0] = c
	if _, err := io.ReadFull(br, hdr[1:il]); err != nil {
		return 0, 0, 0, fmt.Errorf("video: raw stream cut in an element id: %w", err)
	}
	for _, b := range hdr[:il] {
		id = id<<8 | uint32(b)
	}
	c, err = br.ReadByte()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("video: raw stream cut in an element size: %w", err)
	}
	sl := vintLength(c)
	if sl == 0 {
		return 0, 0, 0, errors.New("video: bad element size in raw stream")
	}
	hdr[il] = c
	if _, err := io.ReadFull(br, hdr[il+1:il+sl]); err != nil {
		return 0, 0, 0, fmt.Errorf("video: raw stream cut in an element size: %w", err)
	}
	v := int64(c & (0xFF >> sl))
	all := v == int64(0xFF>>sl)
	for _, b := range hdr[il+1 : il+sl] {
		v = v<<8 | int64(b)
		all = all && b == 0xFF
	}
	if all {
		v = ebmlUnknownSize
	}
	return id, v, il + sl, nil
}

// declareRawTrack rewrites, in place and at the same size, a Matroska track list whose raw video track ffmpeg's
// muxer stored in VFW mode (CodecID V_MS/VFW/FOURCC with a BITMAPINFOHEADER that declares RGB): ffmpeg 5.1 stores
// raw pixel formats deeper than 8 bits only that way (-allow_raw_vfw) and its demuxer then reads the frames as
// RGB. The track becomes native uncompressed video (V_UNCOMPRESSED, NUL-padded to the old length), the header
// becomes a Void element of the same size, and the ColourSpace element that the muxer writes for raw video gets
// tag, the FourCC from which ffmpeg's raw decoder takes the pixel format. A track already native is left as it
// is (muxers that store the format natively).
func declareRawTrack(tracks []byte, tag string) error {
	const vfw, native = "V_MS/VFW/FOURCC", "V_UNCOMPRESSED"
	if len(tag) != 4 {
		return fmt.Errorf("video: raw pixel format tag %q is not a FourCC", tag)
	}
	var codecID, codecPriv, colourSpace []byte // element contents (slices of tracks)
	var privStart int                          // offset of the CodecPrivate element's header
	var walk func(b []byte, base int) error
	walk = func(b []byte, base int) error {
		for p := 0; p < len(b); {
			id, size, n, err := parseElementHeader(b[p:])
			if err != nil {
				return err
			}
			if size == ebmlUnknownSize || int64(len(b)-p-n) < size {
				return errors.New("video: raw stream track list with an element past its end")
			}
			content := b[p+n : p+n+int(size)]
			switch id {
			case ebmlTrackEntry, ebmlVideo:
				if err := walk(content, base+p+n); err != nil {
					return err
				}
			case ebmlCodecID:
				codecID = content
			case ebmlCodecPriv:
				codecPriv, privStart = content, base+p
			case ebmlColourSpace:
				colourSpace = content
			}
			p += n + int(size)
		}
		return nil
	}
	if err := walk(tracks, 0); err != nil {
		return err
	}
	if string(bytes.TrimRight(codecID, "\x00")) == native && string(colourSpace) == tag {
		return nil
	}
	if string(bytes.TrimRight(codecID, "\x00")) != vfw || len(codecID) < len(native) || len(colourSpace) != 4 ||
		codecPriv == nil {
		return fmt.Errorf("video: unexpected raw track layout from the decoder (codec %q)", codecID)
	}
	clear(codecID)
	copy(codecID, native)
	copy(colourSpace, tag)
	// The Void element spans the CodecPrivate element, header included.
	void := tracks[privStart : privStart+(len(codecPriv)+elementHeaderLen(tracks[privStart:]))]
	clear(void)
	void[0] = ebmlVoid
	if n := len(void) - 2; n < 0x7F {
		void[1] = 0x80 | byte(n)
	} else {
		n := len(void) - 9 // 8-byte size: 0x01 then 7 bytes
		void[1] = 0x01
		for i := range 7 {
			void[8-i] = byte(n >> (8 * i))
		}
	}
	return nil
}

// parseElementHeader reads an element id and data size from the start of b (as readElementHeader does from a
// stream) and returns them with the header length.
func parseElementHeader(b []byte) (id uint32, size int64, n int, err error) {
	var hdr [12]byte
	id, size, n, err = readElementHeader(bufio.NewReader(bytes.NewReader(b)), hdr[:])
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return id, size, n, err
}

func elementHeaderLen(b []byte) int {
	_, _, n, _ := parseElementHeader(b)
	return n
}
