package markfile

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"image/png"
	"strconv"
	"testing"

	"filigrane/codec"
	"filigrane/codec/imageio"
	"filigrane/codec/imageio/imageiotest"
)

// withXMP adds the XMP packet x to the files of inputs: a JPEG APP1 XMP segment after the Exif one, followed by
// an extended-XMP segment (which must not be carried), a PNG iTXt chunk after IHDR, a WebP "XMP " chunk at the
// end with the VP8X XMP flag.
func withXMP(files map[string][]byte, x []byte) map[string][]byte {
	jpg := files["jpeg"]
	afterExif := 2 + 2 + int(binary.BigEndian.Uint16(jpg[4:]))
	seg := jpegSeg(0xE1, append([]byte("http://ns.adobe.com/xap/1.0/\x00"), x...))
	seg = append(seg, jpegSeg(0xE1, append([]byte("http://ns.adobe.com/xmp/extension/\x00"),
		bytes.Repeat([]byte("EXTENDED-XMP-PART"), 40)...))...)
	jpg = append(append(bytes.Clone(jpg[:afterExif]), seg...), jpg[afterExif:]...)

	p := files["png"]
	const ihdrEnd = 8 + 25
	body := append([]byte("XML:com.adobe.xmp\x00\x00\x00\x00\x00"), x...)
	c := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	c = append(append(c, "iTXt"...), body...)
	c = binary.BigEndian.AppendUint32(c, crc32.ChecksumIEEE(c[4:]))
	p = append(append(bytes.Clone(p[:ihdrEnd]), c...), p[ihdrEnd:]...)

	w := bytes.Clone(files["webp"])
	w[20] |= 0x04
	w = append(w, "XMP "...)
	w = binary.LittleEndian.AppendUint32(w, uint32(len(x)))
	w = append(w, x...)
	if len(x)%2 == 1 {
		w = append(w, 0)
	}
	binary.LittleEndian.PutUint32(w[4:], uint32(len(w)-8))
	return map[string][]byte{"jpeg": jpg, "png": p, "webp": w}
}

// A photographer's XMP (creator, rights, usage terms, credit, orientation 6 as in its EXIF, an xmp:Thumbnails
// JPEG and an xmpGImg one, a pointer to extended XMP), from a JPEG, PNG or WebP file, marked into each output
// format, and through a device's PNG pass: the output carries the packet with the rights and creator byte for
// byte, orientation 1, the output's size, and neither thumbnail nor extended XMP anywhere in the file.
func TestEmbedKeepsXMP(t *testing.T) {
	c := testCodec(t)
	ctx := context.Background()
	x := imageiotest.PhotoXMP(imageiotest.XMPPhoto{Orientation: 6, Width: storedW, Height: storedH, Padding: 500})
	in := withXMP(inputs(t, cameraEXIF()), x)
	for _, tc := range []struct{ in, out string }{
		{"jpeg", "png"}, {"jpeg", "jpeg"}, {"jpeg", "webp"}, {"png", "jpeg"}, {"webp", "png"}, {"jpeg", "device-png"},
	} {
		t.Run(tc.in+"-to-"+tc.out, func(t *testing.T) {
			pic, err := imageio.DecodeBytes(in[tc.in], imageio.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			var data []byte
			if tc.out == "device-png" { // the GPU path: EncodePNGZlib around the device's stream
				dev := &cpuPNGDevice{}
				if data, err = encode(ctx, dev, pic.Image, pic, PNG); err != nil || dev.calls != 1 {
					t.Fatalf("device PNG: %v, %d calls", err, dev.calls)
				}
			} else {
				f, _ := ParseFormat(tc.out)
				id, _ := codec.IDFromJSON([]byte(`{"xmp":"` + tc.in + tc.out + `"}`))
				res, err := Embed(ctx, c, pic, id, f, codec.EmbedOptions{})
				if err != nil {
					t.Fatal(err)
				}
				data = res.Data
			}
			for _, leak := range []string{imageiotest.XMPThumbnailMark, "EXTENDED-XMP-PART", "HasExtendedXMP"} {
				if bytes.Contains(data, []byte(leak)) {
					t.Errorf("%s in the output", leak)
				}
			}
			got := imageiotest.XMPOf(data)
			for _, keep := range []string{imageiotest.XMPCreator, imageiotest.XMPRights, imageiotest.XMPUsageTerms,
				imageiotest.XMPCredit} {
				if !bytes.Contains(got, []byte(keep)) {
					t.Errorf("output XMP (%d bytes) lost %q", len(got), keep)
				}
			}
			props, err := imageiotest.XMPProps(got)
			if err != nil {
				t.Fatalf("output XMP: %v", err)
			}
			w, h := storedW, storedH
			if tc.in == "jpeg" {
				w, h = storedH, storedW
			}
			const tiffNS, exifNS = "http://ns.adobe.com/tiff/1.0/ ", "http://ns.adobe.com/exif/1.0/ "
			for k, want := range map[string]string{tiffNS + "Orientation": "1", tiffNS + "ImageWidth": strconv.Itoa(w),
				tiffNS + "ImageLength": strconv.Itoa(h), exifNS + "PixelXDimension": strconv.Itoa(w),
				exifNS + "PixelYDimension": strconv.Itoa(h)} {
				if v := props[k]; len(v) != 1 || v[0] != want {
					t.Errorf("%s = %q, want %q", k, v, want)
				}
			}
			// The EXIF beside it says the same orientation.
			if info, err := imageiotest.ReadEXIF(imageiotest.EXIFOf(data)); err != nil {
				t.Errorf("output EXIF: %v", err)
			} else if o, _ := info.Uint(info.IFD0, 0x0112); o != 1 {
				t.Errorf("EXIF orientation %d", o)
			}
			// Outside readers take the file with the XMP in it: ffprobe (JPEG, and WebP's VP8X container with the
			// XMP flag and chunk) still reads the EXIF; image/png checks every chunk's CRC.
			if tc.out == "jpeg" || tc.out == "webp" {
				if tags := ffprobeTags(t, data); tags["Make"] != "FiliCam" || tags["Orientation"] != "1" {
					t.Errorf("ffprobe reads %v", tags)
				}
			} else if _, err := png.Decode(bytes.NewReader(data)); err != nil {
				t.Errorf("image/png rejects the output: %v", err)
			}
		})
	}
}

// Broken XMP (truncated, with a DOCTYPE, over the size limit) is left out of the output; the embed succeeds.
func TestEmbedDropsBrokenXMP(t *testing.T) {
	c := testCodec(t)
	good := imageiotest.PhotoXMP(imageiotest.XMPPhoto{Orientation: 6, Width: storedW, Height: storedH})
	doctype := append([]byte(`<!DOCTYPE x:xmpmeta [<!ENTITY a "a">]>`), good[len(imageiotest.XMPPacketHead):]...)
	big := imageiotest.PhotoXMP(imageiotest.XMPPhoto{Orientation: 6, Width: storedW, Height: storedH,
		Padding: imageio.MaxXMPBytes})
	for name, x := range map[string][]byte{"truncated": good[:len(good)-300], "doctype": doctype, "oversized": big} {
		pic, err := imageio.DecodeBytes(withXMP(inputs(t, cameraEXIF()), x)["png"], imageio.Limits{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		res, err := Embed(context.Background(), c, pic, codec.ID{7}, WebP, codec.EmbedOptions{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := imageiotest.XMPOf(res.Data); got != nil || bytes.Contains(res.Data, []byte(imageiotest.XMPThumbnailMark)) {
			t.Errorf("%s: output carries %d bytes of XMP", name, len(got))
		}
	}
}
