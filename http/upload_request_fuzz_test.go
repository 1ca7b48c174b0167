package http

import (
	"encoding/json"
	"testing"

	"filigrane/actors"
	"filigrane/internal/problem"
)

// FuzzParseUploadRequest: the POST /uploads body parser never panics, answers only 400 or 422 problems, and
// what it accepts is a known kind with a string filename and a positive size that round-trips as JSON.
func FuzzParseUploadRequest(f *testing.F) {
	for _, s := range []string{
		`{"kind":"image","filename":"a.jpg","size":10}`,
		`{"kind":"detect","filename":"a.pdf","size":1e6}`,
		`{"kind":"video","filename":"a.mp4","size":"10"}`,
		`{"kind":"document","filename":"","size":-1}`,
		`{"kind":"image","filename":"a.jpg","size":1.5}`,
		`{"kind":"image","filename":"a.jpg","size":99999999999999999999999}`,
		`{"kind":"image"}{}`, `[]`, `null`, `{`, ``, `{"size":{"a":[1,2,{"b":null}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, aerr := parseUploadRequest(body)
		if aerr != nil {
			if e, _ := problem.Lookup(aerr.code); e.Status != 400 && e.Status != 422 {
				t.Fatalf("status %d (%s) for %q", e.Status, aerr.code, body)
			}
			return
		}
		if _, err := actors.ParseUploadKind(string(req.Kind)); err != nil || req.Size <= 0 {
			t.Fatalf("accepted %+v from %q", req, body)
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(body, &raw); err != nil {
			t.Fatalf("accepted a body encoding/json rejects: %q", body)
		}
		var name string
		if err := json.Unmarshal(raw["filename"], &name); err != nil || name != req.Filename {
			t.Fatalf("filename %q, body %q", req.Filename, body)
		}
	})
}
