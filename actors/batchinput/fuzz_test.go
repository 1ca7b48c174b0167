package batchinput

import (
	"archive/zip"
	"bytes"
	"io"
	"testing"

	"filigrane/internal/problem"
)

// FuzzParseManifest: any bytes give a checked request or an *Error whose code is in the error table; a
// request always holds 1 to 100 items with a media kind and without paths that could escape.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"archive":true,"items":[{"filename":"a/b.jpg","data":{"x":1}}]}`), true)
	f.Add([]byte(`{"items":[{"filename":"a.jpg","size":10,"data":{"x":"é"}}],"accelerator":"gpu"}`), false)
	f.Add([]byte(`{"items":[{"filename":"../a.jpg","data":{"x":1}}]}`), true)
	f.Add([]byte(`{"items":[{"filename":"a.jpg","size":1e99,"data":{"x":1}}]}`), false)
	f.Add([]byte(`{"items":[{"filename":"a.jpg","data":{"x":{"y":[[[[[]]]]]}}}]}`), true)
	f.Fuzz(func(t *testing.T, b []byte, isZip bool) {
		var r *Request
		var aerr *Error
		if isZip {
			r, aerr = ParseManifest(b)
		} else {
			r, aerr = ParseCreate(b)
		}
		if aerr != nil {
			if _, ok := problem.Lookup(aerr.Code); !ok || r != nil {
				t.Fatalf("error %v with code outside the table or a request", aerr)
			}
			return
		}
		if len(r.Items) < 1 || len(r.Items) > 100 {
			t.Fatalf("%d items", len(r.Items))
		}
		for _, it := range r.Items {
			if it.Kind.Media == "" || (isZip && checkMemberPath(it.Filename) != nil) || (!isZip && it.Size <= 0) {
				t.Fatalf("accepted item %+v", it)
			}
		}
	})
}

// FuzzCheckZip: any bytes checked as a zip against a fixed manifest never panic, never accept a member
// above its limits, and every accepted member unpacks to at most its declared size.
func FuzzCheckZip(f *testing.F) {
	for _, z := range [][]byte{
		makeZip(f, member{name: "a.jpg", data: noise(3000, 1), method: zip.Deflate}, member{name: "d/b.png", data: noise(100, 2)}),
		makeZip(f, member{name: "a.jpg", data: make([]byte, 5000), method: zip.Deflate}),
		makeZip(f, member{name: "__MACOSX/x", data: []byte("x")}, member{name: "a.jpg", data: noise(10, 3)}),
		makeZip(f, member{name: "a.jpg", data: noise(10, 3), encrypt: true}),
		[]byte("PK\x05\x06\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff\x00\x00\x00\x00\x00\x00"),
	} {
		f.Add(z)
	}
	req, aerr := ParseManifest([]byte(`{"items":[{"filename":"a.jpg","data":{"a":1}},{"filename":"d/b.png","data":{"b":1}}]}`))
	if aerr != nil {
		f.Fatal(aerr)
	}
	f.Fuzz(func(t *testing.T, z []byte) {
		items := append([]Item(nil), req.Items...)
		m, aerr := CheckZip(bytes.NewReader(z), int64(len(z)), items)
		if aerr != nil {
			if _, ok := problem.Lookup(aerr.Code); !ok {
				t.Fatalf("code %q outside the table", aerr.Code)
			}
			return
		}
		if m.Unpacked > MaxUnpacked {
			t.Fatalf("accepted %d unpacked bytes", m.Unpacked)
		}
		for i, mb := range m.List {
			if mb.Size > items[i].Kind.Limits.BatchMember || mb.Size != items[i].Size {
				t.Fatalf("member %d size %d", i, mb.Size)
			}
			rc, err := m.Open(i)
			if err != nil {
				continue
			}
			n, _ := io.Copy(io.Discard, io.LimitReader(rc, mb.Size+1))
			rc.Close()
			if n > mb.Size {
				t.Fatalf("member %d produced %d bytes, declared %d", i, n, mb.Size)
			}
		}
	})
}
