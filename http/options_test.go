package http

import (
	"testing"

	"github.com/valyala/fasthttp"

	"filigrane/actors"
)

func TestMergeJobOptions(t *testing.T) {
	cases := []struct {
		query string
		form  map[string]string
		want  map[string]string // nil: refused
	}{
		{"", nil, map[string]string{"accelerator": "", "webhook_id": ""}},
		{"accelerator=gpu", nil, map[string]string{"accelerator": "gpu"}},
		{"", map[string]string{"webhook_id": "wh_1"}, map[string]string{"webhook_id": "wh_1"}},
		{"storage_key=a", map[string]string{"storage_destination_id": "dst_1"},
			map[string]string{"storage_key": "a", "storage_destination_id": "dst_1"}},
		{"accelerator=cpu", map[string]string{"accelerator": "cpu"}, map[string]string{"accelerator": "cpu"}},
		{"accelerator=cpu", map[string]string{"accelerator": "gpu"}, nil},
		{"", map[string]string{"output_format": "jpeg"}, map[string]string{"output_format": "jpeg"}},
		{"output_format=webp", map[string]string{"output_format": "jpeg"}, nil},
		{"webhook_id=wh_1", map[string]string{"webhook_id": "wh_2"}, nil},
	}
	for _, c := range cases {
		var q fasthttp.Args
		q.Parse(c.query)
		get, aerr := mergeJobOptions(&q, c.form)
		if c.want == nil {
			if aerr == nil || aerr.code != CodeInvalidRequest {
				t.Errorf("query %q form %v: %v, want invalid_request", c.query, c.form, aerr)
			}
			continue
		}
		if aerr != nil {
			t.Errorf("query %q form %v: %v", c.query, c.form, aerr)
			continue
		}
		for name, v := range c.want {
			if got := get(name); got != v {
				t.Errorf("query %q form %v: %s = %q, want %q", c.query, c.form, name, got, v)
			}
		}
	}
}

func TestUploadKindMessage(t *testing.T) {
	detect := &actors.Upload{Kind: actors.UploadDetect, Media: actors.MediaImage}
	image := &actors.Upload{Kind: actors.UploadImage, Media: actors.MediaImage}
	cases := []struct {
		u     *actors.Upload
		kind  actors.UploadKind
		media actors.UploadMedia
		want  string
	}{
		{detect, actors.UploadImage, actors.MediaImage, "upload upl_1 was created for detecting in an image; this endpoint needs an image upload"},
		{image, actors.UploadDetect, actors.MediaImage, "upload upl_1 was created for embedding an image; this endpoint needs a detect upload of an image"},
		{&actors.Upload{Kind: actors.UploadDetect, Media: actors.MediaDocument}, actors.UploadDetect, actors.MediaImage,
			"upload upl_1 was created for detecting in a document; this endpoint needs a detect upload of an image"},
	}
	for _, c := range cases {
		if got := uploadKindMessage("upl_1", c.u, c.kind, c.media); got != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
	}
}
