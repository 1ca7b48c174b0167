package markfile

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"

	"filigrane/codec"
	"filigrane/codec/imageio"
	"filigrane/codec/imageio/imageiotest"
)

// The stored (sideways) test photo is storedW×storedH with EXIF orientation 6: upright it is storedH×storedW.
const storedW, storedH = 384, 256

// thumbMarker is in the input's IFD1 thumbnail: an unmarked copy of the picture that must not reach an output.
var thumbMarker = []byte("UNMARKED-THUMBNAIL-OF-THE-ORIGINAL")

func cameraEXIF() []byte {
	thumb := append([]byte{0xFF, 0xD8, 0xFF, 0xE0}, bytes.Repeat(thumbMarker, 30)...)
	return imageiotest.CameraEXIF(imageiotest.Camera{
		Orientation:      6,
		Make:             "FiliCam",
		Model:            "Model 7 Mk II",
		DateTimeOriginal: "2024:05:17 10:42:07",
		GPSLatitude:      [3][2]uint32{{48, 1}, {51, 1}, {2904, 100}},
		PixelX:           storedW,
		PixelY:           storedH,
		Thumbnail:        append(thumb, 0xFF, 0xD9),
	})
}

// storedPhoto is a textured image whose top-left 64×64 corner is red and the rest blue-green: upright
// (orientation 6 turns it clockwise) the red corner is at the top right.
func storedPhoto() *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, storedW, storedH))
	rng := rand.New(rand.NewPCG(5, 6))
	for y := 0; y < storedH; y++ {
		for x := 0; x < storedW; x++ {
			v := uint8(70 + rng.IntN(80))
			c := color.NRGBA{v / 3, v, v + 60, 255}
			if x < 64 && y < 64 {
				c = color.NRGBA{v + 90, v / 4, v / 4, 255}
			}
			img.SetNRGBA(x, y, c)
		}
	}
	return img
}

func rgbICC() []byte {
	icc := make([]byte, 600)
	binary.BigEndian.PutUint32(icc, uint32(len(icc)))
	copy(icc[16:20], "RGB ")
	copy(icc[36:40], "acsp")
	for i := 128; i < len(icc); i++ {
		icc[i] = byte(i * 13)
	}
	return icc
}

func jpegSeg(marker byte, payload []byte) []byte {
	return append([]byte{0xFF, marker, byte((len(payload) + 2) >> 8), byte(len(payload) + 2)}, payload...)
}

// inputs returns the stored photo as a JPEG (APP1 Exif, APP2 ICC), a PNG (iCCP, eXIf) and a WebP (VP8X, ICCP,
// VP8L, EXIF), each carrying exif; the container bytes are put together here, not by imageio.
func inputs(t *testing.T, exif []byte) map[string][]byte {
	t.Helper()
	src := storedPhoto()
	icc := rgbICC()
	var j bytes.Buffer
	if err := jpeg.Encode(&j, src, &jpeg.Options{Quality: 97}); err != nil {
		t.Fatal(err)
	}
	jpg := append([]byte{0xFF, 0xD8}, jpegSeg(0xE1, append([]byte("Exif\x00\x00"), exif...))...)
	jpg = append(jpg, jpegSeg(0xE2, append([]byte("ICC_PROFILE\x00\x01\x01"), icc...))...)
	jpg = append(jpg, j.Bytes()[2:]...)

	var p bytes.Buffer // the fastest compression, as picture's: the same pixels
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&p, src); err != nil {
		t.Fatal(err)
	}
	chunk := func(typ string, body []byte) []byte {
		c := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
		c = append(append(c, typ...), body...)
		return binary.BigEndian.AppendUint32(c, crc32.ChecksumIEEE(c[4:]))
	}
	const ihdrEnd = 8 + 25
	var z bytes.Buffer
	z.WriteString("ICC\x00\x00") // profile name, compression method
	zw := zlib.NewWriter(&z)
	zw.Write(icc)
	zw.Close()
	pngFile := append(bytes.Clone(p.Bytes()[:ihdrEnd]), chunk("iCCP", z.Bytes())...)
	pngFile = append(pngFile, chunk("eXIf", exif)...)
	pngFile = append(pngFile, p.Bytes()[ihdrEnd:]...)

	var w bytes.Buffer
	if err := imageio.EncodeWebP(&w, src, imageio.Metadata{}); err != nil { // a simple VP8L file
		t.Fatal(err)
	}
	riff := func(id string, body []byte) []byte {
		c := append([]byte(id), binary.LittleEndian.AppendUint32(nil, uint32(len(body)))...)
		c = append(c, body...)
		if len(body)%2 == 1 {
			c = append(c, 0)
		}
		return c
	}
	cw, ch := storedW-1, storedH-1 // the canvas size minus one, 24 bits each
	vp8x := []byte{0x28, 0, 0, 0, byte(cw), byte(cw >> 8), 0, byte(ch), byte(ch >> 8), 0}
	body := append([]byte("WEBP"), riff("VP8X", vp8x)...)
	body = append(body, riff("ICCP", icc)...)
	body = append(body, w.Bytes()[12:]...)
	body = append(body, riff("EXIF", exif)...)
	webp := append([]byte("RIFF"), binary.LittleEndian.AppendUint32(nil, uint32(len(body)))...)
	return map[string][]byte{"jpeg": jpg, "png": pngFile, "webp": append(webp, body...)}
}

// redAt reports whether the 16×16 block centred on (x, y) of img is red rather than blue-green.
func redAt(img image.Image, x, y int) bool {
	var r, b int
	for dy := -8; dy < 8; dy++ {
		for dx := -8; dx < 8; dx++ {
			c := color.NRGBAModel.Convert(img.At(x+dx, y+dy)).(color.NRGBA)
			r, b = r+int(c.R), b+int(c.B)
		}
	}
	return r > b+16*16*40
}

// ffprobeTags returns the frame tags ffprobe reads from a file (it reads EXIF from JPEG and WebP), failing the
// test when ffprobe rejects the file.
func ffprobeTags(t *testing.T, data []byte) map[string]string {
	t.Helper()
	if _, err := exec.LookPath("ffprobe"); err != nil {
		t.Fatal("ffprobe is not installed: run scripts/setup.sh")
	}
	cmd := exec.Command("ffprobe", "-v", "error", "-show_frames", "-of", "flat", "-")
	cmd.Stdin = bytes.NewReader(data)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("ffprobe: %v: %s", err, stderr.String())
	}
	tags := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && strings.Contains(k, ".tags.") {
			tags[k[strings.LastIndex(k, ".")+1:]] = strings.TrimSpace(strings.Trim(v, `"`))
		}
	}
	return tags
}

// A photo with camera EXIF (orientation 6, make, model, date, GPS, an IFD1 thumbnail) and an ICC profile, from a
// JPEG, PNG or WebP file, marked into each output format: the output is upright, carries the mark, the profile
// and the camera's EXIF with orientation 1 and the upright size, and neither IFD1 nor the thumbnail's bytes.
func TestEmbedKeepsEXIF(t *testing.T) {
	c := testCodec(t)
	ctx := context.Background()
	in := inputs(t, cameraEXIF())
	for _, tc := range []struct{ in, out string }{
		{"jpeg", "png"}, {"jpeg", "jpeg"}, {"jpeg", "webp"}, {"png", "jpeg"}, {"webp", "png"},
	} {
		t.Run(tc.in+"-to-"+tc.out, func(t *testing.T) {
			pic, err := imageio.DecodeBytes(in[tc.in], imageio.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			f, _ := ParseFormat(tc.out)
			id, _ := codec.IDFromJSON([]byte(`{"exif":"` + tc.in + tc.out + `"}`))
			res, err := Embed(ctx, c, pic, id, f, codec.EmbedOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(res.Data, thumbMarker) {
				t.Fatal("the unmarked thumbnail is in the output")
			}
			out, err := imageio.DecodeBytes(res.Data, imageio.Limits{})
			if err != nil || out.Format != tc.out {
				t.Fatalf("output does not decode: %v (%q)", err, out.Format)
			}
			if d := c.Detect(out.Image); !d.Watermarked || *d.WatermarkID != id.String() {
				t.Fatalf("mark not read from the output: %+v", d)
			}
			if !bytes.Equal(out.ICC, rgbICC()) {
				t.Error("ICC profile lost")
			}
			// Only a JPEG input's orientation is applied to the pixels (see imageio's package doc).
			w, h := storedW, storedH
			if tc.in == "jpeg" {
				w, h = storedH, storedW
				if out.Width != w || !redAt(out.Image, w-32, 32) || redAt(out.Image, 32, 32) {
					t.Fatalf("output %dx%d is not upright", out.Width, out.Height)
				}
			}
			exif := imageiotest.EXIFOf(res.Data)
			info, err := imageiotest.ReadEXIF(exif)
			if err != nil {
				t.Fatalf("output EXIF (%d bytes): %v", len(exif), err)
			}
			o, _ := info.Uint(info.IFD0, 0x0112)
			px, _ := info.Uint(info.Exif, 0xA002)
			py, _ := info.Uint(info.Exif, 0xA003)
			lat := info.GPS[0x0002]
			if o != 1 || int(px) != w || int(py) != h || info.NextIFD != 0 {
				t.Errorf("orientation %d, pixel dimensions %dx%d (want %dx%d), next IFD %d", o, px, py, w, h, info.NextIFD)
			}
			if info.String(info.IFD0, 0x010F) != "FiliCam" || info.String(info.IFD0, 0x0110) != "Model 7 Mk II" ||
				info.String(info.Exif, 0x9003) != "2024:05:17 10:42:07" || info.String(info.GPS, 0x0001) != "N" ||
				lat.Count != 3 || binary.LittleEndian.Uint32(lat.Value[16:]) != 2904 {
				t.Errorf("camera fields changed: %q %q %q GPS %+v", info.String(info.IFD0, 0x010F),
					info.String(info.IFD0, 0x0110), info.String(info.Exif, 0x9003), lat)
			}
			// An independent reader: ffprobe reads the EXIF of JPEG and WebP (not PNG eXIf in ffmpeg 5).
			if tc.out != "png" {
				tags := ffprobeTags(t, res.Data)
				if tags["Make"] != "FiliCam" || tags["Orientation"] != "1" ||
					tags["DateTimeOriginal"] != "2024:05:17 10:42:07" || tags["GPSLatitudeRef"] != "N" {
					t.Errorf("ffprobe reads %v", tags)
				}
			} else if _, err := png.Decode(bytes.NewReader(res.Data)); err != nil { // checks every chunk's CRC
				t.Errorf("image/png rejects the output: %v", err)
			}
		})
	}
}

// Broken EXIF (truncated, an IFD loop, a huge count) is left out of the output; the embed succeeds.
func TestEmbedDropsBrokenEXIF(t *testing.T) {
	c := testCodec(t)
	good := cameraEXIF()
	loop := bytes.Clone(good)
	binary.LittleEndian.PutUint32(loop[8+2+3*12+8:], 8) // the Exif IFD pointer points back at IFD0
	huge := bytes.Clone(good)
	binary.LittleEndian.PutUint32(huge[8+2+4:], 0xFFFFFFF0) // Make's count
	for name, exif := range map[string][]byte{"truncated": good[:60], "loop": loop, "huge count": huge} {
		pic, err := imageio.DecodeBytes(inputs(t, exif)["jpeg"], imageio.Limits{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		res, err := Embed(context.Background(), c, pic, codec.ID{7}, JPEG, codec.EmbedOptions{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if e := imageiotest.EXIFOf(res.Data); e != nil || bytes.Contains(res.Data, thumbMarker) {
			t.Errorf("%s: output carries %d bytes of EXIF", name, len(e))
		}
	}
}
