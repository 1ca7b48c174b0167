package http

import (
	"bytes"
	"context"
	"testing"

	"filigrane/actors/jobstate"
	"filigrane/actors/mediakind"
	"filigrane/persistence/fsblobs"
)

// TestFormOutputFormat: output_format is read from a multipart or url-encoded form like the other options,
// and sending it twice is refused.
func TestFormOutputFormat(t *testing.T) {
	blobs, err := fsblobs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ct, body := multipartSeed(map[string]string{"output_format": " JPEG ", "data": `{"a":1}`}, []byte("file"))
	form, err := readMediaForm(context.Background(), ct, bytes.NewReader(body), blobs, "inputs/o/r/1", 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := form.Options["output_format"]; got != "JPEG" {
		t.Errorf("multipart output_format = %q, want JPEG", got)
	}
	form, err = readMediaForm(context.Background(), "application/x-www-form-urlencoded",
		bytes.NewReader([]byte("upload_id=upl_1&output_format=webp")), blobs, "inputs/o/r/2", 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := form.Options["output_format"]; got != "webp" {
		t.Errorf("url-encoded output_format = %q, want webp", got)
	}
	twice := "--x\r\nContent-Disposition: form-data; name=\"output_format\"\r\n\r\npng\r\n" +
		"--x\r\nContent-Disposition: form-data; name=\"output_format\"\r\n\r\njpeg\r\n--x--\r\n"
	_, err = readMediaForm(context.Background(), "multipart/form-data; boundary=x", bytes.NewReader([]byte(twice)), blobs, "inputs/o/r/3", 100)
	if ae, ok := err.(*apiError); !ok || ae.code != CodeInvalidRequest {
		t.Errorf("output_format sent twice: %v, want invalid_request", err)
	}
}

// TestParseOutputFormatOption: the values an image embed takes, and what other requests take.
func TestParseOutputFormatOption(t *testing.T) {
	image, _ := mediakind.ByMedia(jobstate.MediaImage)
	doc, _ := mediakind.ByMedia(jobstate.MediaDocument)
	video, _ := mediakind.ByMedia(jobstate.MediaVideo)
	embed, detect := jobstate.OperationEmbed, jobstate.OperationDetect
	cases := []struct {
		kind mediakind.Kind
		op   jobstate.Operation
		v    string
		want jobstate.OutputFormat // "-": refused with invalid_request
	}{
		{image, embed, "", ""},
		{image, embed, "png", jobstate.OutputPNG},
		{image, embed, "jpeg", jobstate.OutputJPEG},
		{image, embed, "JPG", jobstate.OutputJPEG},
		{image, embed, "WebP", jobstate.OutputWebP},
		{image, embed, "gif", "-"},
		{image, embed, "pdf", "-"},
		{image, detect, "jpeg", "-"},
		{image, detect, "png", "-"},
		{doc, embed, "pdf", ""},
		{doc, embed, "PDF", ""},
		{doc, embed, "png", "-"},
		{video, embed, "mp4", ""},
		{video, embed, "MOV", ""},
		{video, embed, "mkv", "-"},
		{video, embed, "webp", "-"},
		{doc, detect, "pdf", "-"},
	}
	for _, c := range cases {
		var opts jobOptions
		aerr := parseOutputFormat(c.kind, c.op, c.v, &opts)
		if c.want == "-" {
			if aerr == nil || aerr.code != CodeInvalidRequest {
				t.Errorf("%s %s %q: %v, want invalid_request", c.kind.Media, c.op, c.v, aerr)
			}
			continue
		}
		if aerr != nil || opts.outputFormat != c.want {
			t.Errorf("%s %s %q: %q, %v; want %q", c.kind.Media, c.op, c.v, opts.outputFormat, aerr, c.want)
		}
	}
}
