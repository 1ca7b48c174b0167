package node_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"

	"filigrane/gpu"
)

// pngHeader returns the start of a PNG that announces w x h pixels: enough for a header check, and far
// too little to decode. A decompression bomb looks like this to a server that checks headers first.
func pngHeader(w, h uint32) []byte {
	var b bytes.Buffer
	b.Write([]byte("\x89PNG\r\n\x1a\n"))
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 2 // 8-bit RGB
	chunk := append([]byte("IHDR"), ihdr...)
	binary.Write(&b, binary.BigEndian, uint32(13))
	b.Write(chunk)
	binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(chunk))
	b.Write(bytes.Repeat([]byte{0}, 64))
	return b.Bytes()
}

func TestSizeAndPixelLimits(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cases := []struct {
		name   string
		url    string
		file   []byte
		data   string
		status int
		code   string
	}{
		{"41 megapixels", "/watermarks/images", pngHeader(8000, 5125), `{"a":1}`, 413, "image_too_large"},
		{"201 megapixels, detect", "/watermarks/images/detect", pngHeader(20100, 10000), "", 413, "image_too_large"},
		{"over 40 MB embed", "/watermarks/images", bytes.Repeat([]byte{1}, 40_000_001), `{"a":1}`, 413, "file_too_large"},
	}
	for _, c := range cases {
		r := post(t, f.base+c.url, f.keyA, "", c.file, c.data)
		if p := decodeProblem(t, r); r.status != c.status || p.Code != c.code {
			t.Fatalf("%s: %d %+v", c.name, r.status, p)
		}
	}
	if n := countBlobs(t, f); n != 0 {
		t.Fatalf("refused files left %d blobs behind", n)
	}
	if bal, held := balance(t, f, f.orgA); bal != 150 || held != 0 {
		t.Fatalf("refused requests moved credits: %d held %d", bal, held)
	}
}

func TestGPUEndpoints(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := call(t, "GET", f.base+"/accelerators/gpu", f.keyA, nil)
	want := `{"accelerator":"gpu","status":"unavailable","warm_until":null,"ready_at":null}`
	if gpu.CodecAvailable() && len(gpu.Devices()) > 0 {
		want = `{"accelerator":"gpu","status":"idle","warm_until":null,"ready_at":null}` // a machine with a GPU
	}
	if r.status != 200 || string(r.body) != want {
		t.Fatalf("status: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", f.base+"/accelerators/gpu/wake", f.keyA, nil); r.status != 403 || decodeProblem(t, r).Code != "plan_forbidden" {
		t.Fatalf("wake on a trial plan: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", f.base+"/accelerators/gpu/wake", f.dev.Secret, nil); r.status != 200 {
		t.Fatalf("wake on a GPU plan: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", f.base+"/accelerators/gpu/wake", f.dev.Secret, strings.NewReader(`{"webhook_id":"wh_0123"}`)); r.status != 404 {
		t.Fatalf("wake with an unknown webhook: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", f.base+"/accelerators/gpu/wake", f.dev.Secret, strings.NewReader(`{"webhook_id":`)); r.status != 400 || decodeProblem(t, r).Code != "malformed_json" {
		t.Fatalf("malformed wake body: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", f.base+"/accelerators/gpu", f.keyNoScopes, nil); r.status != 403 {
		t.Fatalf("assets-only key: %d", r.status)
	}
}
