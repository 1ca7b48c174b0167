package console_test

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"filigrane/internal/clock"
)

// photo draws a w x h image with enough texture to carry a mark.
func photo(t *testing.T, w, h int) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			v := 128 + 50*math.Sin(float64(x)/17)*math.Cos(float64(y)/23) + float64((x*7919+y*104729)%23) - 11
			c := uint8(max(0, min(255, v)))
			img.SetNRGBA(x, y, color.NRGBA{R: c, G: 255 - c/2, B: uint8((x + y) % 256), A: 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestThumbnails: the assets page's previews are small PNGs made on the server, kept by the browser by
// ETag, only for the organization's own image assets, and never decoded past the node's decode budget.
func TestThumbnails(t *testing.T) {
	n := startNode(t, clock.NewManual(time.Now()), nil)
	c := &client{t: t, base: "http://" + n.APIAddr(), cookies: map[string]string{}}
	if r := c.signIn(n.DevOrg.ConsoleEmail, n.DevOrg.ConsolePassword); r.status != 303 {
		t.Fatalf("sign in: %d", r.status)
	}
	tok := csrfField.FindStringSubmatch(c.do("GET", "/console/keys", nil, nil).body)[1]

	// Mark a 512x320 image through the console: small (a mark needs a short side of 256 pixels), because the
	// codec runs under the race detector here.
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("data", `{"owner":"thumb test"}`)
	fw, _ := mw.CreateFormFile("file", "wide.png")
	_, _ = fw.Write(photo(t, 512, 320))
	_ = mw.Close()
	req, _ := http.NewRequest("POST", c.base+"/console/api/watermarks/images", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("X-CSRF-Token", tok)
	req.AddCookie(&http.Cookie{Name: "filigrane_session", Value: c.cookies["filigrane_session"]})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	source := resp.Header.Get("X-Source-Asset-ID")
	marked := resp.Header.Get("X-Asset-ID")
	firstJob := resp.Header.Get("X-Request-ID")
	if resp.StatusCode != 200 || source == "" || marked == "" {
		t.Fatalf("mark: %d source %q marked %q", resp.StatusCode, source, marked)
	}

	for _, id := range []string{source, marked} {
		r := c.do("GET", "/console/thumbnails/"+id, nil, nil)
		if r.status != 200 || r.header.Get("Content-Type") != "image/png" || !strings.HasPrefix(r.header.Get("Cache-Control"), "private") {
			t.Fatalf("thumbnail of %s: %d %q %q", id, r.status, r.header.Get("Content-Type"), r.header.Get("Cache-Control"))
		}
		img, err := png.Decode(strings.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		if b := img.Bounds(); b.Dx() != 160 || b.Dy() != 100 {
			t.Fatalf("thumbnail of %s is %v, want 160x100 (the image's shape)", id, b)
		}
		if len(r.body) > 60<<10 {
			t.Fatalf("thumbnail of %s has %d bytes", id, len(r.body))
		}
		etag := r.header.Get("ETag")
		if again := c.do("GET", "/console/thumbnails/"+id, nil, map[string]string{"If-None-Match": etag}); again.status != 304 || again.body != "" {
			t.Fatalf("revalidation: %d", again.status)
		}
	}
	if r := c.do("GET", "/console/thumbnails/ast_"+strings.Repeat("0", 64), nil, nil); r.status != 404 {
		t.Fatalf("unknown asset: %d", r.status)
	}
	// Another organization's person does not see it: the new organization of the same person has no such
	// asset.
	if r := c.do("POST", "/console/orgs", map[string][]string{"csrf": {tok}, "name": {"Elsewhere"}}, nil); r.status != 303 {
		t.Fatalf("create organization: %d", r.status)
	}
	if r := c.do("GET", "/console/thumbnails/"+source, nil, nil); r.status != 404 {
		t.Fatalf("thumbnail from another organization: %d", r.status)
	}
	if r := c.do("POST", "/console/orgs/switch", map[string][]string{"csrf": {tok}, "org": {n.DevOrg.OrgID}}, nil); r.status != 303 {
		t.Fatalf("switch back: %d", r.status)
	}
	signedOut := &client{t: t, base: c.base, cookies: map[string]string{}}
	if r := signedOut.do("GET", "/console/thumbnails/"+source, nil, nil); r.status != 303 {
		t.Fatalf("without a session: %d", r.status)
	}

	// With the whole decode budget in use, a thumbnail not made yet answers busy instead of decoding; once
	// the memory is free it is made.
	var body2 bytes.Buffer
	mw = multipart.NewWriter(&body2)
	_ = mw.WriteField("data", `{"owner":"thumb test"}`)
	fw, _ = mw.CreateFormFile("file", "tall.png")
	_, _ = fw.Write(photo(t, 256, 512))
	_ = mw.Close()
	req, _ = http.NewRequest("POST", c.base+"/console/api/watermarks/images", &body2)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("X-CSRF-Token", tok)
	req.AddCookie(&http.Cookie{Name: "filigrane_session", Value: c.cookies["filigrane_session"]})
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	tall := resp.Header.Get("X-Source-Asset-ID")
	// Both marks are on the jobs page's recent list, newest first.
	jobs := c.do("GET", "/console/jobs", nil, nil).body
	secondJob := resp.Header.Get("X-Request-ID")
	i, j := strings.Index(jobs, `data-request-id="`+secondJob+`"`), strings.Index(jobs, `data-request-id="`+firstJob+`"`)
	if firstJob == "" || secondJob == "" || i < 0 || j < 0 || i > j {
		t.Fatalf("recent jobs: %q at %d, %q at %d", secondJob, i, firstJob, j)
	}
	if resp.StatusCode != 200 || tall == "" {
		t.Fatalf("mark: %d source %q", resp.StatusCode, tall)
	}
	budget := n.DecodeBudget()
	release, err := budget.Acquire(context.Background(), budget.Capacity())
	if err != nil {
		t.Fatal(err)
	}
	if r := c.do("GET", "/console/thumbnails/"+tall, nil, nil); r.status != 503 || r.header.Get("Retry-After") == "" {
		release()
		t.Fatalf("thumbnail while the decode budget is in use: %d", r.status)
	}
	release()
	r := c.do("GET", "/console/thumbnails/"+tall, nil, nil)
	img, err := png.Decode(strings.NewReader(r.body))
	if r.status != 200 || err != nil || img.Bounds().Dx() != 80 || img.Bounds().Dy() != 160 {
		t.Fatalf("thumbnail after the budget is free: %d %v", r.status, err)
	}
}
