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
