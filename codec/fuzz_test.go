package codec

import (
	"bytes"
	"image"
	"testing"
)

// FuzzIDFromJSON checks that the canonicalizer never panics, that canonical output is itself canonical (a fixed
// point) and that it hashes to the same id as the input.
func FuzzIDFromJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `[1,2.5e10,"x\u0000"]`, `{"\ud83d\ude00":null}`, `-0.0`, `"\\"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		id, err := IDFromJSON(data)
		if err != nil {
			return
		}
		canon, err := CanonicalJSON(data)
		if err != nil {
			t.Fatalf("IDFromJSON accepted but CanonicalJSON failed: %v", err)
		}
		again, err := CanonicalJSON(canon)
		if err != nil {
			t.Fatalf("canonical output rejected: %v (%q)", err, canon)
		}
		if !bytes.Equal(again, canon) {
			t.Fatalf("not a fixed point: %q -> %q", canon, again)
		}
		id2, _ := IDFromJSON(canon)
		if id2 != id {
			t.Fatal("canonical form hashes differently")
		}
	})
}

// FuzzParseID checks that ParseID never panics and that every accepted id prints back to the same hex.
func FuzzParseID(f *testing.F) {
	f.Add("0000000000000000000000000000000000000000000000000000000000000000")
	f.Add("zz")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseID(s)
		if err != nil {
			return
		}
		if !bytes.EqualFold([]byte(id.String()), []byte(s)) {
			t.Fatalf("%q parsed to %s", s, id)
		}
	})
}

// FuzzDetect feeds arbitrary small gray images to Detect: it must never panic and never report a mark.
func FuzzDetect(f *testing.F) {
	f.Add(uint16(70), uint16(90), []byte{0, 255, 17})
	f.Add(uint16(300), uint16(64), []byte{128})
	c, err := New([]byte("fuzz-key-0123456789abcdef"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, w, h uint16, seed []byte) {
		w, h = w%400, h%400
		img := image.NewGray(image.Rect(0, 0, int(w), int(h)))
		if len(seed) > 0 {
			for i := range img.Pix {
				img.Pix[i] = seed[i%len(seed)] + uint8(i/len(seed))
			}
		}
		if d := c.Detect(img); d.Watermarked || d.WatermarkID != nil || len(d.Units) != 1 {
			t.Fatalf("%dx%d: %+v", w, h, d)
		}
	})
}
