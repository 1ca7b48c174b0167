package batchinput

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"testing"

	"filigrane/internal/problem"
)

func body(items string, extra string) []byte {
	return []byte(`{"archive":false` + extra + `,"items":[` + items + `]}`)
}

const okItem = `{"filename":"a.jpg","size":1234,"data":{"customer":"c-1"}}`

func wantCode(t *testing.T, name string, aerr *Error, code problem.Code) {
	t.Helper()
	if aerr == nil || aerr.Code != code {
		t.Errorf("%s: got %v, want %s", name, aerr, code)
	}
}

func TestParseCreate(t *testing.T) {
	r, aerr := ParseCreate(body(okItem+`,{"filename":"doc.PDF","size":10,"data":{"b":1}},{"filename":"clip.mov","size":20000000,"data":{"c":[1,2]}}`, `,"accelerator":"cpu"`))
	if aerr != nil {
		t.Fatal(aerr)
	}
	if len(r.Items) != 3 || r.Items[1].Kind.Media != "document" || r.Items[2].Kind.Media != "video" || r.Items[0].Size != 1234 {
		t.Fatalf("items %+v", r.Items)
	}
	if r.Items[0].WatermarkID == r.Items[1].WatermarkID {
		t.Fatal("each item's data gives its own watermark id")
	}
	many := strings.TrimSuffix(strings.Repeat(okItem+",", 101), ",")
	bigData := `{"filename":"a.jpg","size":1,"data":{"x":"` + strings.Repeat("y", MaxData) + `"}}`
	cases := []struct {
		name string
		body []byte
		code problem.Code
	}{
		{"not json", []byte(`{"items":[`), problem.MalformedJSON},
		{"two values", []byte(`{"items":[` + okItem + `]} {}`), problem.MalformedJSON},
		{"unknown field", body(okItem, `,"archve":true`), problem.InvalidRequest},
		{"no items", body(``, ``), problem.InvalidRequest},
		{"101 items", body(many, ``), problem.InvalidRequest},
		{"items wrong type", []byte(`{"items":{}}`), problem.InvalidRequest},
		{"no filename", body(`{"size":1,"data":{"a":1}}`, ``), problem.InvalidRequest},
		{"path filename", body(`{"filename":"x/a.jpg","size":1,"data":{"a":1}}`, ``), problem.InvalidRequest},
		{"long filename", body(`{"filename":"`+strings.Repeat("a", 252)+`.jpg","size":1,"data":{"a":1}}`, ``), problem.InvalidRequest},
		{"unsupported type", body(okItem+`,{"filename":"song.mp3","size":1,"data":{"a":1}}`, ``), problem.UnsupportedFileType},
		{"no extension", body(`{"filename":"README","size":1,"data":{"a":1}}`, ``), problem.UnsupportedFileType},
		{"missing size", body(`{"filename":"a.jpg","data":{"a":1}}`, ``), problem.InvalidRequest},
		{"zero size", body(`{"filename":"a.jpg","size":0,"data":{"a":1}}`, ``), problem.InvalidRequest},
		{"fractional size", body(`{"filename":"a.jpg","size":1.5,"data":{"a":1}}`, ``), problem.InvalidRequest},
		{"image too large", body(okItem+`,{"filename":"a.png","size":50000001,"data":{"a":1}}`, ``), problem.FileTooLarge},
		{"video too large", body(`{"filename":"a.mp4","size":20000001,"data":{"a":1}}`, ``), problem.FileTooLarge},
		{"missing data", body(`{"filename":"a.jpg","size":1}`, ``), problem.InvalidData},
		{"null data", body(`{"filename":"a.jpg","size":1,"data":null}`, ``), problem.InvalidData},
		{"empty data", body(`{"filename":"a.jpg","size":1,"data":{}}`, ``), problem.InvalidData},
		{"array data", body(`{"filename":"a.jpg","size":1,"data":[1]}`, ``), problem.InvalidData},
		{"big data", body(bigData, ``), problem.InvalidData},
		{"duplicate keys", body(`{"filename":"a.jpg","size":1,"data":{"a":1,"a":2}}`, ``), problem.InvalidData},
		{"accelerator", body(okItem, `,"accelerator":"tpu"`), problem.InvalidAccelerator},
		{"archive and storage", []byte(`{"archive":true,"storage_destination_id":"dst_1","items":[` + okItem + `]}`), problem.InvalidRequest},
		{"too big", append(body(okItem, ``), bytes.Repeat([]byte(" "), MaxBody)...), problem.TooLarge},
	}
	for _, c := range cases {
		_, aerr := ParseCreate(c.body)
		wantCode(t, c.name, aerr, c.code)
	}
	// Nulls the SDKs send for absent options are accepted.
	if _, aerr := ParseCreate([]byte(`{"archive":true,"webhook_id":null,"accelerator":null,"storage_destination_id":null,"items":[` + okItem + `]}`)); aerr != nil {
		t.Fatalf("nulls: %v", aerr)
	}
}

type member struct {
	name    string
	data    []byte
	method  uint16
	encrypt bool
}

func makeZip(t testing.TB, members ...member) []byte {
	t.Helper()
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	for _, m := range members {
		h := &zip.FileHeader{Name: m.name, Method: m.method}
		if m.encrypt {
			h.Flags |= 1
		}
		f, err := w.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(m.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func noise(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed) + 1
	for i := range b {
		x = x*1664525 + 1013904223
		b[i] = byte(x >> 24)
	}
	return b
}

func manifest(names ...string) []byte {
	var items []string
	for _, n := range names {
		items = append(items, fmt.Sprintf(`{"filename":%q,"data":{"n":%q}}`, n, n))
	}
	return []byte(`{"archive":true,"items":[` + strings.Join(items, ",") + `]}`)
}

func check(t *testing.T, z []byte, names ...string) (*Request, *Members, *Error) {
	t.Helper()
	req, aerr := ParseManifest(manifest(names...))
	if aerr != nil {
		return nil, nil, aerr
	}
	m, aerr := CheckZip(bytes.NewReader(z), int64(len(z)), req.Items)
	return req, m, aerr
}

func TestZipAccepted(t *testing.T) {
	z := makeZip(t,
		member{name: "photos/", method: zip.Store},
		member{name: "photos/a.jpg", data: noise(5000, 1), method: zip.Deflate},
		member{name: "b.png", data: noise(300, 2), method: zip.Store},
		member{name: "__MACOSX/photos/._a.jpg", data: []byte("fork"), method: zip.Store},
		member{name: "photos/.DS_Store", data: make([]byte, 4000), method: zip.Deflate}, // 100:1+ but ignored
		member{name: "Thumbs.db", data: []byte("x"), method: zip.Store},
	)
	req, m, aerr := check(t, z, "b.png", "photos/a.jpg")
	if aerr != nil {
		t.Fatal(aerr)
	}
	if req.Items[0].Size != 300 || req.Items[1].Size != 5000 || m.Unpacked != 5300 {
		t.Fatalf("sizes %d %d total %d", req.Items[0].Size, req.Items[1].Size, m.Unpacked)
	}
	rc, err := m.Open(1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, noise(5000, 1)) {
		t.Fatalf("unpacked %d bytes, err %v", len(got), err)
	}
}

func TestZipRules(t *testing.T) {
	jpg := member{name: "a.jpg", data: noise(2000, 3), method: zip.Deflate}
	cases := []struct {
		name    string
		zip     []byte
		listed  []string
		code    problem.Code
		content string
	}{
		{"not a zip", []byte("PK\x03\x04 not really"), []string{"a.jpg"}, problem.InvalidZip, ""},
		{"listed but missing", makeZip(t, jpg), []string{"a.jpg", "b.jpg"}, problem.InvalidZip, "not a member"},
		{"member not listed", makeZip(t, jpg, member{name: "c.png", data: noise(10, 1)}), []string{"a.jpg"}, problem.InvalidZip, "does not list"},
		{"listed twice", makeZip(t, jpg), []string{"a.jpg", "a.jpg"}, problem.InvalidZip, "once"},
		{"zip holds twice", makeZip(t, jpg, jpg), []string{"a.jpg"}, problem.InvalidZip, "twice"},
		{"system entry listed", makeZip(t, jpg, member{name: "x/.DS_Store"}), []string{"a.jpg", "x/.DS_Store"}, problem.InvalidZip, "system entry"},
		{"macosx listed", makeZip(t, jpg, member{name: "__MACOSX/._a.jpg", data: []byte("x")}), []string{"__MACOSX/._a.jpg"}, problem.InvalidZip, "system entry"},
		{"dotdot member", makeZip(t, member{name: "../a.jpg", data: noise(10, 1)}), []string{"a.jpg"}, problem.InvalidZip, ".."},
		{"dotdot listed", makeZip(t, jpg), []string{"x/../a.jpg"}, problem.InvalidZip, ".."},
		{"absolute member", makeZip(t, jpg, member{name: "/etc/a.jpg", data: noise(10, 1)}), []string{"a.jpg"}, problem.InvalidZip, "absolute"},
		{"backslash member", makeZip(t, jpg, member{name: `x\a.jpg`, data: noise(10, 1)}), []string{"a.jpg"}, problem.InvalidZip, "backslash"},
		{"drive letter", makeZip(t, member{name: "C:a.jpg", data: noise(10, 1)}), []string{"a.jpg"}, problem.InvalidZip, "drive"},
		{"ignored entry with dotdot", makeZip(t, jpg, member{name: "__MACOSX/../../x"}), []string{"a.jpg"}, problem.InvalidZip, ".."},
		{"encrypted", makeZip(t, member{name: "a.jpg", data: noise(10, 1), encrypt: true}), []string{"a.jpg"}, problem.InvalidZip, "encrypted"},
		{"ratio", makeZip(t, member{name: "a.jpg", data: make([]byte, 200_000), method: zip.Deflate}), []string{"a.jpg"}, problem.ZipTooLarge, "100:1"},
		{"empty member", makeZip(t, member{name: "a.jpg"}), []string{"a.jpg"}, problem.InvalidZip, "empty"},
		{"unsupported member", makeZip(t, member{name: "a.txt", data: noise(10, 1)}), []string{"a.txt"}, problem.UnsupportedFileType, ""},
	}
	for _, c := range cases {
		_, _, aerr := check(t, c.zip, c.listed...)
		wantCode(t, c.name, aerr, c.code)
		if aerr != nil && !strings.Contains(aerr.Detail, c.content) {
			t.Errorf("%s: detail %q does not say %q", c.name, aerr.Detail, c.content)
		}
	}
}

// rewriteSizes patches every central directory entry's uncompressed size, as a crafted zip would declare it.
func rewriteSizes(z []byte, size uint32) []byte {
	out := append([]byte(nil), z...)
	for i := 0; i+46 <= len(out); i++ {
		if binary.LittleEndian.Uint32(out[i:]) == 0x02014b50 {
			binary.LittleEndian.PutUint32(out[i+24:], size)
		}
	}
	return out
}

func TestZipDeclaredSizes(t *testing.T) {
	// A video member declaring 20 MB + 1: over the media limit (413) before anything is unpacked.
	z := makeZip(t, member{name: "a.mp4", data: noise(300_000, 4), method: zip.Store})
	_, _, aerr := check(t, rewriteSizes(z, 20_000_001), "a.mp4")
	wantCode(t, "video member over its limit", aerr, problem.FileTooLarge)

	// Twelve images of 45 MB declared each (under the member limit, ratio kept by the stored bytes): over 512 MB.
	var ms []member
	var names []string
	for i := 0; i < 12; i++ {
		n := fmt.Sprintf("m%02d.png", i)
		ms = append(ms, member{name: n, data: noise(450_001, byte(i)), method: zip.Store})
		names = append(names, n)
	}
	_, _, aerr = check(t, rewriteSizes(makeZip(t, ms...), 45_000_000), names...)
	wantCode(t, "unpacked total", aerr, problem.ZipTooLarge)

	// A member whose directory understates its size: unpacking stops with an error at the declared size.
	z = makeZip(t, member{name: "a.png", data: noise(5000, 5), method: zip.Deflate})
	_, m, aerr := check(t, rewriteSizes(z, 4000), "a.png")
	if aerr != nil {
		t.Fatal(aerr)
	}
	rc, err := m.Open(0)
	if err == nil {
		var n int64
		n, err = io.Copy(io.Discard, rc)
		if n > 4000 {
			t.Fatalf("unpacked %d bytes past the declared 4000", n)
		}
	}
	if err == nil {
		t.Fatal("a member larger than declared unpacked without error")
	}
}

func TestZipDirectoryBounds(t *testing.T) {
	var ms []member
	for i := 0; i < MaxEntries+1; i++ {
		ms = append(ms, member{name: fmt.Sprintf("d%05d/", i)})
	}
	z := makeZip(t, ms...)
	_, _, aerr := check(t, z, "a.jpg")
	wantCode(t, "directory entries", aerr, problem.ZipTooLarge)
	big := make([]byte, MaxZip+1)
	_, aerr = CheckZip(bytes.NewReader(big), int64(len(big)), nil)
	wantCode(t, "zip size", aerr, problem.TooLarge)
}

func TestZip64DirectoryRead(t *testing.T) {
	// Go's writer emits a zip64 end record when forced by a member header that asks for it: patch the end
	// record's counts to 0xffff so the reader must follow the locator.
	z := makeZip(t, member{name: "a.jpg", data: noise(1000, 6), method: zip.Deflate})
	_, _, aerr := check(t, z, "a.jpg")
	if aerr != nil {
		t.Fatal(aerr)
	}
	patched := append([]byte(nil), z...)
	binary.LittleEndian.PutUint16(patched[len(patched)-22+10:], 0xffff)
	_, _, aerr = check(t, patched, "a.jpg")
	wantCode(t, "zip64 marker without a locator", aerr, problem.InvalidZip)
}
