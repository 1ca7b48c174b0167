package batchinput

import (
	"testing"

	"filigrane/actors/jobstate"
	"filigrane/internal/problem"
)

// TestOutputFormatOption: the body and the manifest take the image embed's output_format values; a PDF or
// video item beside them is fine (the option applies to images only), and anything else is refused before
// anything is created.
func TestOutputFormatOption(t *testing.T) {
	const pdfItem = `{"filename":"doc.pdf","size":10,"data":{"b":1}}`
	const zipItem = `{"filename":"a.jpg","data":{"a":1}}`
	good := map[string]jobstate.OutputFormat{
		``: jobstate.OutputPNG, `,"output_format":""`: jobstate.OutputPNG, `,"output_format":"png"`: jobstate.OutputPNG,
		`,"output_format":"jpeg"`: jobstate.OutputJPEG, `,"output_format":"JPG"`: jobstate.OutputJPEG,
		`,"output_format":"WebP"`: jobstate.OutputWebP,
	}
	for extra, want := range good {
		r, aerr := ParseCreate(body(okItem+","+pdfItem, extra))
		if aerr != nil || r.OutputFormat != want {
			t.Errorf("body with %q: %+v, %v; want %q", extra, r, aerr, want)
		}
		m, aerr := ParseManifest(body(zipItem, extra))
		if aerr != nil || m.OutputFormat != want {
			t.Errorf("manifest with %q: %+v, %v; want %q", extra, m, aerr, want)
		}
	}
	for _, extra := range []string{`,"output_format":"gif"`, `,"output_format":"pdf"`, `,"output_format":"mp4"`,
		`,"output_format":" png"`, `,"output_format":"image/jpeg"`} {
		_, aerr := ParseCreate(body(okItem, extra))
		wantCode(t, "body"+extra, aerr, problem.InvalidRequest)
		_, aerr = ParseManifest(body(zipItem, extra))
		wantCode(t, "manifest"+extra, aerr, problem.InvalidRequest)
	}
	_, aerr := ParseCreate(body(okItem, `,"output_format":7`))
	wantCode(t, "number", aerr, problem.InvalidRequest)
}
