package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"filigrane/actors"
	"filigrane/actors/assetid"
	"filigrane/internal/node"
)

// sdkCall sends a request as one of Etchv's SDKs does: it names itself in User-Agent.
func sdkCall(t *testing.T, method, url, key, userAgent, contentType string, body []byte) response {
	t.Helper()
	req, _ := http.NewRequest(method, url, bytes.NewReader(body))
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("User-Agent", userAgent)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// TestSDKErrorDetailShapes: Etchv's Go and Python SDKs read an error's code only from a `detail` object
// ({code, message, limit}); every other client gets RFC 9457's string detail. Both bodies keep type, title,
// status and the top-level code.
func TestSDKErrorDetailShapes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ct, body := form(t, []byte("not an image"), "x.png", "")
	for _, ua := range []string{"etchv-go/1.2.0", "etchv-python/1.2.0", "curl/8.5.0"} {
		// A bad key (401) and a file that is not an image (an input error) as the SDKs send them.
		for _, c := range []struct {
			key    string
			status int
			code   string
		}{{"fg_wrong", 401, "unauthorized"}, {f.keyA, 422, ""}} {
			r := sdkCall(t, "POST", f.base+"/watermarks/images", c.key, ua, ct, body)
			var p map[string]any
			if err := json.Unmarshal(r.body, &p); err != nil {
				t.Fatalf("%s: body %s: %v", ua, r.body, err)
			}
			code, _ := p["code"].(string)
			if r.status < 400 || (c.code != "" && code != c.code) || p["type"] == nil || p["title"] == nil || p["status"] != float64(r.status) {
				t.Fatalf("%s %s: %d %s", ua, c.key, r.status, r.body)
			}
			switch d := p["detail"].(type) {
			case map[string]any:
				if ua == "curl/8.5.0" || d["code"] != code || d["message"] == "" {
					t.Fatalf("%s: detail object %v for code %s", ua, d, code)
				}
			case string:
				if ua != "curl/8.5.0" || d == "" {
					t.Fatalf("%s: detail string %q", ua, d)
				}
			default:
				t.Fatalf("%s: detail %T in %s", ua, d, r.body)
			}
		}
	}
}

// TestSDKJobHeaders: a job's responses carry the job's request id in X-Request-ID (the SDKs read the job's
// id from it) and the accelerator also as X-Etchv-Accelerator.
func TestSDKJobHeaders(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	img := photo(t, 800, 600, 5)
	r := post(t, f.base+"/watermarks/images/async", f.keyA, "sdk-headers-1", img, `{"a":1}`)
	if r.status != 202 {
		t.Fatalf("async embed: %d %s", r.status, r.body)
	}
	rc := decodeReceipt(t, r)
	if got := r.header.Get("X-Request-ID"); got != rc.RequestID {
		t.Fatalf("202: X-Request-ID %q, job %q", got, rc.RequestID)
	}
	res := waitResult(t, f, f.keyA, rc.ResultURL)
	if res.status != 200 || res.header.Get("X-Request-ID") != rc.RequestID {
		t.Fatalf("result: %d X-Request-ID %q, job %q", res.status, res.header.Get("X-Request-ID"), rc.RequestID)
	}
	if a, e := res.header.Get("X-Service-Accelerator"), res.header.Get("X-Etchv-Accelerator"); a != "cpu" || e != a {
		t.Fatalf("result accelerator headers %q / %q", a, e)
	}
	st := call(t, "GET", f.base+rc.StatusURL, f.keyA, nil)
	if st.status != 200 || st.header.Get("X-Request-ID") != rc.RequestID {
		t.Fatalf("status: %d X-Request-ID %q, job %q", st.status, st.header.Get("X-Request-ID"), rc.RequestID)
	}
}

// TestSDKURLEncodedUploadID: Etchv's Python SDK names an upload in an application/x-www-form-urlencoded body;
// it is marked like the multipart form. A url-encoded form cannot carry a file (415).
func TestSDKURLEncodedUploadID(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	img := photo(t, 800, 600, 11)
	u := uploaded(t, f, f.keyA, "image", "p.jpg", img)
	body := []byte("upload_id=" + u.UploadID + "&data=%7B%22sdk%22%3A%22python%22%7D")
	r := sendRaw(t, f.base+"/watermarks/images", f.keyA, "", "application/x-www-form-urlencoded", body)
	if r.status != 200 || r.header.Get("X-Watermark-ID") == "" || len(r.body) == 0 {
		t.Fatalf("url-encoded upload_id: %d %s", r.status, r.body)
	}
	r = sendRaw(t, f.base+"/watermarks/images", f.keyA, "", "application/x-www-form-urlencoded", []byte("file=abc"))
	wantProblem(t, "url-encoded file", r, 415, "unsupported_media_type")
}

// sdkAssetID is the form Etchv's SDKs check before any asset call (Go assets.go, Python _asset_path).
var sdkAssetID = regexp.MustCompile(`^ast_[a-f0-9]{64}$`)

// TestSDKAssetIDs: every asset id the API hands out has the SDKs' form (sync headers, receipt, asset record,
// listing, download), and the asset routes take it. An asset stored by an earlier version under its 32-digit
// id answers to both forms and shows the full one.
func TestSDKAssetIDs(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	e := assetEmbed(t, f, f.keyA, 41, `{"sdk":"ids"}`)
	if !sdkAssetID.MatchString(e.out) || !sdkAssetID.MatchString(e.src) {
		t.Fatalf("sync embed asset ids %q %q", e.out, e.src)
	}
	v, r := getAsset(t, f, f.keyA, e.out)
	if r.status != 200 || v.ID != e.out || v.ParentAssetID == nil || *v.ParentAssetID != e.src ||
		v.DownloadURL == nil || *v.DownloadURL != "/assets/"+e.out+"/content" {
		t.Fatalf("asset: %d %s", r.status, r.body)
	}
	st := call(t, "GET", f.base+"/watermarks/jobs/"+v.RequestID, f.keyA, nil)
	rc := decodeReceipt(t, st)
	if st.status != 200 || rc.AssetID == nil || *rc.AssetID != e.out || rc.SourceAssetID == nil || *rc.SourceAssetID != e.src {
		t.Fatalf("receipt: %d %s", st.status, st.body)
	}
	c := call(t, "GET", f.base+"/assets/"+e.out+"/content", f.keyA, nil)
	if c.status != 200 || c.header.Get("X-Asset-ID") != e.out || !bytes.Equal(c.body, e.body) {
		t.Fatalf("content: %d X-Asset-ID %q", c.status, c.header.Get("X-Asset-ID"))
	}
	if r := assetSend(t, "PATCH", f.base+"/assets/"+e.src, f.keyA, `{"version":1,"name":"src"}`); r.status != 200 {
		t.Fatalf("patch: %d %s", r.status, r.body)
	}

	// An asset of an earlier version, stored under the short id (written into the node's store as it was).
	req := "req_" + strings.Repeat("e", 64)
	full := actors.AssetIDFor(req, actors.AssetWatermarked)
	short := full[:assetid.LegacyLen]
	ctx := context.Background()
	info, err := f.n.Blobs().Put(ctx, "assets/legacy.png", bytes.NewReader(e.body))
	if err != nil {
		t.Fatal(err)
	}
	at := f.clk.Now().Add(-time.Hour)
	old := &actors.Asset{ID: short, OrgID: f.orgA, Name: "old.png", Version: 1, Kind: actors.AssetWatermarked,
		ParentAssetID: actors.AssetIDFor(req, actors.AssetSource)[:assetid.LegacyLen], MediaType: "image", Format: "PNG",
		ContentType: "image/png", SizeBytes: info.Size, SHA256: info.SHA256, RequestID: req, WatermarkID: e.wm,
		BlobKey: "assets/legacy.png", Filename: "old.png", CreatedAt: at, UpdatedAt: at}
	if err := (actors.Assets{Store: f.n.Store(), Blobs: f.n.Blobs()}).Create(ctx, old); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{short, full} {
		v, r := getAsset(t, f, f.keyA, id)
		if r.status != 200 || v.ID != full || v.ParentAssetID == nil || !sdkAssetID.MatchString(*v.ParentAssetID) {
			t.Fatalf("legacy asset by %s: %d %s", id, r.status, r.body)
		}
		c := call(t, "GET", f.base+"/assets/"+id+"/content", f.keyA, nil)
		if c.status != 200 || c.header.Get("X-Asset-ID") != full {
			t.Fatalf("legacy content by %s: %d X-Asset-ID %q", id, c.status, c.header.Get("X-Asset-ID"))
		}
		_, r = getAsset(t, f, f.dev.Secret, id)
		assetProblem(t, "other organization", r, 404, "asset_not_found")
	}
	l, r := listAssets(t, f, f.keyA, "limit=100")
	if r.status != 200 || len(l.Items) != 3 {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	for _, it := range l.Items {
		if !sdkAssetID.MatchString(it.ID) {
			t.Fatalf("listed id %q", it.ID)
		}
	}
	if r := assetSend(t, "PATCH", f.base+"/assets/"+short, f.keyA, `{"version":1,"name":"renamed"}`); r.status != 200 {
		t.Fatalf("patch by short id: %d %s", r.status, r.body)
	}
	if v, _ := getAsset(t, f, f.keyA, full); v.Name != "renamed" || v.Version != 2 {
		t.Fatalf("after patch by short id, the full id reads %+v", v)
	}
	if r := call(t, "DELETE", f.base+"/assets/"+full, f.dev.Secret, nil); r.status != 404 {
		t.Fatalf("another organization's key deletes: %d", r.status)
	}
	if r := call(t, "DELETE", f.base+"/assets/"+full, f.keyA, nil); r.status != 204 {
		t.Fatalf("delete by full id: %d %s", r.status, r.body)
	}
	for _, id := range []string{short, full} {
		_, r := getAsset(t, f, f.keyA, id)
		assetProblem(t, "deleted legacy asset", r, 404, "asset_not_found")
	}
	if assetBlobExists(t, f, "assets/legacy.png") {
		t.Fatal("the deleted legacy asset's file stays")
	}
	// Garbage of either length never reaches the store.
	for _, id := range []string{"ast_" + strings.Repeat("g", 64), short + "0", "ast_" + strings.Repeat("0", 48)} {
		_, r := getAsset(t, f, f.keyA, id)
		assetProblem(t, id, r, 404, "asset_not_found")
	}
}

// bigPNG is a w x h 16-bit RGBA PNG stored without compression: 8 bytes a pixel, so a few megapixels (far
// below the 40 MP embed bound) make a file of tens of MB, as a camera's large PNG or TIFF does.
func bigPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	m := image.NewNRGBA64(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			v := uint16(32768 + 20000*math.Sin(float64(x)/97) + 9000*math.Cos(float64(y)/53+float64(x)/211))
			m.SetNRGBA64(x, y, color.NRGBA64{R: v, G: 65535 - v, B: uint16(x * 65535 / w), A: 65535})
		}
	}
	// One translucent pixel keeps the alpha channel (8 bytes a pixel): fewer pixels for the same size.
	m.SetNRGBA64(0, 0, color.NRGBA64{A: 65000})
	var b bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.NoCompression}).Encode(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestSDKDirectEmbedUpTo40MB: Etchv's SDKs send files up to 40 MB in the embed request itself; a 39 MB image
// embeds directly, a 41 MB one is 413 file_too_large (the SDKs send those through an upload). A node set to the
// spec's 20 MB (MaxDirectEmbed) refuses the 39 MB one.
func TestSDKDirectEmbedUpTo40MB(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	big := bigPNG(t, 2560, 1900)
	if len(big) < 38_500_000 || len(big) > 39_500_000 {
		t.Fatalf("test image of %d bytes, want about 39 MB", len(big))
	}
	ct, body := form(t, big, "large.png", `{"sdk":"direct"}`)
	r := sdkCall(t, "POST", f.base+"/watermarks/images", f.keyA, "etchv-go/1.2.0", ct, body)
	if r.status == 202 {
		// Past the 20 s sync wait on a loaded machine: the SDKs poll the result, and so does the test.
		r = waitResult(t, f, f.keyA, decodeReceipt(t, r).ResultURL)
	}
	if r.status != 200 || len(r.header.Get("X-Watermark-ID")) != 64 || r.header.Get("Content-Type") != "image/png" {
		t.Fatalf("39 MB direct embed: %d %.300s", r.status, r.body)
	}
	src := r.header.Get("X-Source-Asset-ID")
	if v, gr := getAsset(t, f, f.keyA, src); gr.status != 200 || v.SizeBytes != int64(len(big)) {
		t.Fatalf("source asset of the 39 MB embed: %d %s", gr.status, gr.body)
	}
	r = post(t, f.base+"/watermarks/images", f.keyA, "", bigPNG(t, 2560, 2002), `{"sdk":"direct"}`)
	wantProblem(t, "41 MB direct embed", r, 413, "file_too_large")

	f.stop(t)
	strict := newFixture(t, func(c *node.Config) { c.MaxDirectEmbed = 20_000_000 })
	r = post(t, strict.base+"/watermarks/images", strict.keyA, "", big, `{"sdk":"direct"}`)
	wantProblem(t, "39 MB direct embed on a 20 MB node", r, 413, "file_too_large")
	if n := countBlobs(t, strict); n != 0 {
		t.Fatalf("the refused file left %d blobs", n)
	}
}
