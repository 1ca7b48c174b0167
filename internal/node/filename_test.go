package node_test

import (
	"encoding/json"
	"testing"
)

// TestInputNameInAnotherScript: a file whose name keeps no safe character but its extension ("фото.jpg") is
// named after its media kind ("image.jpg"): the source asset, its download and the result. The name used to
// shrink to the bare extension: a source asset "jpg", downloaded as "jpg" (no extension), and a result
// "jpg-watermarked.png".
func TestInputNameInAnotherScript(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	key := f.dev.Secret
	r := postMedia(t, f.base+"/watermarks/images", key, "", photo(t, 320, 256, 47), "фото отпуск.jpg", `{"trip":1}`)
	if r.status != 200 {
		t.Fatalf("embed: %d %s", r.status, r.body)
	}
	if cd := r.header.Get("Content-Disposition"); cd != `attachment; filename="image-watermarked.png"` {
		t.Fatalf("result Content-Disposition %q", cd)
	}
	src := r.header.Get("X-Source-Asset-ID")
	ar := call(t, "GET", f.base+"/assets/"+src, key, nil)
	var asset struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(ar.body, &asset); err != nil || ar.status != 200 || asset.Name != "image.jpg" {
		t.Fatalf("source asset: %d name %q (%v), want image.jpg", ar.status, asset.Name, err)
	}
	if cd := call(t, "GET", f.base+"/assets/"+src+"/content", key, nil).header.Get("Content-Disposition"); cd != `attachment; filename="image.jpg"` {
		t.Fatalf("source download Content-Disposition %q", cd)
	}
}

// TestInputNameWithoutExtension: a file sent with a name that has no extension ("file", the Etchv Python SDK's
// default) is stored with the extension of the format the service detected, so that the source asset's
// download is a file an OS can open ("file.jpg"); a name with an extension keeps it, even one that does not
// match the content ("holiday.png" for a JPEG); digits alone after a dot are no extension ("scan.2024"). Those
// names used to be kept as sent: a source asset "file" downloaded as filename="file".
func TestInputNameWithoutExtension(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	key := f.dev.Secret
	img := photo(t, 256, 256, 48)
	for _, tc := range []struct{ sent, stored, result string }{
		{"file", "file.jpg", "file-watermarked.png"},
		{"scan.2024", "scan.2024.jpg", "scan.2024-watermarked.png"},
		{"holiday.png", "holiday.png", "holiday-watermarked.png"},
	} {
		r := postMedia(t, f.base+"/watermarks/images", key, "", img, tc.sent, `{"n":1}`)
		if r.status != 200 {
			t.Fatalf("embed %q: %d %s", tc.sent, r.status, r.body)
		}
		if cd := r.header.Get("Content-Disposition"); cd != `attachment; filename="`+tc.result+`"` {
			t.Errorf("embed %q: result Content-Disposition %q, want %s", tc.sent, cd, tc.result)
		}
		src := r.header.Get("X-Source-Asset-ID")
		ar := call(t, "GET", f.base+"/assets/"+src, key, nil)
		var asset struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(ar.body, &asset); err != nil || ar.status != 200 || asset.Name != tc.stored {
			t.Errorf("embed %q: source asset %d name %q (%v), want %s", tc.sent, ar.status, asset.Name, err, tc.stored)
		}
		if cd := call(t, "GET", f.base+"/assets/"+src+"/content", key, nil).header.Get("Content-Disposition"); cd != `attachment; filename="`+tc.stored+`"` {
			t.Errorf("embed %q: source download Content-Disposition %q, want %s", tc.sent, cd, tc.stored)
		}
	}
}
