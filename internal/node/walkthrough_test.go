package node_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// sendTyped sends body with the given Content-Type ("" sends none).
func sendTyped(t *testing.T, method, url, key, contentType, body string) response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("X-API-Key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// TestREADMEWalkthroughBodies: what the README's curl commands send is understood as written. JSON bodies
// arrive as application/json, with no type, or with curl's default form type; upload URLs in JSON answers
// keep their '&' so that they can be copied (no \u0026); other types are still refused.
func TestREADMEWalkthroughBodies(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const curlDefault = "application/x-www-form-urlencoded"
	for _, ct := range []string{"application/json", "", curlDefault} {
		r := sendTyped(t, "POST", f.base+"/uploads", f.keyA, ct, `{"kind":"image","filename":"poster.jpg","size":10}`)
		if r.status != 201 {
			t.Fatalf("create upload as %q: %d %s", ct, r.status, r.body)
		}
		if !strings.Contains(string(r.body), "&signature=") || strings.Contains(string(r.body), `\u0026`) {
			t.Fatalf("upload URL escaped in %s", r.body)
		}
	}
	wantProblem(t, "text/plain upload", sendTyped(t, "POST", f.base+"/uploads", f.keyA, "text/plain", `{"kind":"image","filename":"p.jpg","size":10}`), 415, "unsupported_media_type")

	e := assetEmbed(t, f, f.keyA, 3, `{"a":1}`)
	for i, ct := range []string{"application/json", "", curlDefault} {
		r := sendTyped(t, "PATCH", f.base+"/assets/"+e.out, f.keyA, ct, fmt.Sprintf(`{"version":%d,"name":"Spring poster %d"}`, i+1, i))
		if r.status != 200 || !strings.Contains(string(r.body), fmt.Sprintf(`"name":"Spring poster %d"`, i)) {
			t.Fatalf("PATCH as %q: %d %s", ct, r.status, r.body)
		}
	}
	r := sendTyped(t, "POST", f.base+"/assets/bulk-delete", f.keyA, curlDefault, fmt.Sprintf(`{"asset_ids":[%q,%q]}`, e.out, e.src))
	if r.status >= 300 {
		t.Fatalf("bulk delete as curl sends it: %d %s", r.status, r.body)
	}
	if _, g := getAsset(t, f, f.keyA, e.out); g.status != 404 {
		t.Fatalf("bulk-deleted asset: %d %s", g.status, g.body)
	}
}
