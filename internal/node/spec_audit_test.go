package node_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// Differences between the running service and the spec's error table that an audit with curl found
// (spec15), each checked through the HTTP API of a real node.

// The JSON bodies of the management routes (GPU wake, webhooks, storage destinations, moves) answer like the
// spec's routes do: a body that is not JSON is 400 malformed_json, valid JSON that does not fit (a member of
// the wrong type, an unknown member, an array) is 422 invalid_request naming the member in words, never Go's
// struct and type names. They answered 400 malformed_json with Go's decoder message for all of it.
func TestManagementBodiesFollowTheErrorTable(t *testing.T) {
	t.Parallel()
	f := newFixture(t, inMemory(t))
	key := f.dev.Secret // owner, business plan (GPU)
	dst := f.base + "/storage/destinations"
	cases := []struct {
		what, method, url, body string
		status                  int
		code, detail            string
	}{
		{"wake, webhook_id a number", "POST", f.base + "/accelerators/gpu/wake", `{"webhook_id":5}`,
			422, "invalid_request", "webhook_id must be a string, not a number"},
		{"wake, unknown member", "POST", f.base + "/accelerators/gpu/wake", `{"colour":"red"}`,
			422, "invalid_request", `unknown member "colour"; send {"webhook_id": "wh_..."} and no other member`},
		{"wake, not JSON", "POST", f.base + "/accelerators/gpu/wake", `{"webhook_id":`,
			400, "malformed_json", `the body is not valid JSON; send {"webhook_id": "wh_..."}`},
		{"webhook, url a number", "POST", f.base + "/webhooks", `{"url":5}`,
			422, "invalid_request", "url must be a string, not a number"},
		{"webhook, two values", "POST", f.base + "/webhooks", `{"url":"https://example.com/h"} {}`,
			400, "malformed_json", ""},
		{"destination, an array", "POST", dst, `[1,2]`,
			422, "invalid_request", "the body must be a JSON object: send a JSON object of the documented fields (docs/storage.md)"},
		{"destination, enabled a string", "POST", dst, `{"name":"n","enabled":"yes"}`,
			422, "invalid_request", "enabled must be a boolean, not a string"},
		{"move, asset_id a number", "POST", dst + "/dst_" + strings.Repeat("0", 32) + "/deliveries", `{"asset_id":5}`,
			422, "invalid_request", "asset_id must be a string, not a number"},
	}
	for _, c := range cases {
		r := sendBatch(t, c.method, c.url, key, "", c.body)
		wantProblem(t, c.what, r, c.status, c.code)
		p := decodeProblem(t, r)
		if c.detail != "" && p.Detail != c.detail {
			t.Errorf("%s: detail %q, want %q", c.what, p.Detail, c.detail)
		}
		if strings.Contains(p.Detail, "Go ") || strings.Contains(p.Detail, "struct") || strings.Contains(p.Detail, "json:") {
			t.Errorf("%s: the detail speaks Go: %q", c.what, p.Detail)
		}
	}
	// A body sent as another Content-Type is 415 unsupported_media_type, as on the other JSON routes (uploads,
	// batches, webhooks, assets; docs/api.md): these four read it as JSON whatever its type (specaudit25 found
	// the wake answering 200 and a destination created from a text/plain body).
	for _, c := range []struct{ what, method, url, body string }{
		{"wake", "POST", f.base + "/accelerators/gpu/wake", `{}`},
		{"destination create", "POST", dst, `{"name":"n"}`},
		{"destination change", "PATCH", dst + "/dst_" + strings.Repeat("0", 32), `{"enabled":true}`},
		{"move", "POST", dst + "/dst_" + strings.Repeat("0", 32) + "/deliveries", `{"asset_id":"ast_0"}`},
	} {
		req, err := http.NewRequest(c.method, c.url, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "text/plain")
		req.Header.Set("X-API-Key", key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		wantProblem(t, c.what+" sent as text/plain", response{status: res.StatusCode, header: res.Header, body: b}, 415, "unsupported_media_type")
	}
}

// A bulk delete naming an unknown asset says which one, whole: the detail cut ids at 64 characters, four
// short of an asset id (ast_ + 64 digits).
func TestBulkDeleteNamesTheWholeMissingID(t *testing.T) {
	t.Parallel()
	f := newFixture(t, inMemory(t))
	id := "ast_" + strings.Repeat("0", 60) + "beef"
	r := sendBatch(t, "POST", f.base+"/assets/bulk-delete", f.dev.Secret, "", `{"asset_ids":["`+id+`"]}`)
	wantProblem(t, "bulk delete of an unknown id", r, 404, "asset_not_found")
	if p := decodeProblem(t, r); p.Detail != "asset "+id+" does not exist; nothing was deleted" {
		t.Fatalf("detail %q does not name %s", p.Detail, id)
	}
}
