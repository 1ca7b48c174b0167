package node_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAccessMatrix walks every authenticated route of the API with every kind of key: no key and a revoked
// key get 401, a key without the route's scope 403, and another organization's key 404 for a resource
// that exists. The route list must grow with the router: a route missing here is a route nobody checked.
func TestAccessMatrix(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// Resources of organization A: a job with its two assets, and an upload.
	emb := post(t, f.base+"/watermarks/images", f.keyA, "", photo(t, 320, 320, 21), `{"m":1}`)
	if emb.status != 200 {
		t.Fatalf("embed: %d %s", emb.status, emb.body)
	}
	asset := emb.header.Get("X-Asset-ID")
	async := decodeReceipt(t, post(t, f.base+"/watermarks/images/async", f.keyA, "", photo(t, 320, 320, 22), `{"m":2}`))
	job := async.RequestID
	up := call(t, "POST", f.base+"/uploads", f.keyA, strings.NewReader(`{"kind":"image","filename":"a.jpg","size":1000}`))
	var upload struct {
		UploadID string `json:"upload_id"`
	}
	if err := json.Unmarshal(up.body, &upload); err != nil || up.status != 201 {
		t.Fatalf("upload: %d %s", up.status, up.body)
	}

	type route struct {
		method, path, body string
		scopes             []string // any of
		resource           bool     // names a resource of organization A
	}
	embed, detect := "watermarks:embed", "watermarks:detect"
	routes := []route{
		{"GET", "/auth/api-key", "", nil, false},
		{"POST", "/watermarks/images", "", []string{embed}, false},
		{"POST", "/watermarks/images/async", "", []string{embed}, false},
		{"POST", "/watermarks/images/detect", "", []string{detect}, false},
		{"POST", "/watermarks/images/detect/async", "", []string{detect}, false},
		{"GET", "/watermarks/jobs/" + job, "", []string{embed, detect}, true},
		{"GET", "/watermarks/jobs/" + job + "/result", "", []string{embed, detect}, true},
		{"GET", "/watermarks/detection-jobs/" + job, "", []string{embed, detect}, true},
		{"GET", "/watermarks/detection-jobs/" + job + "/result", "", []string{embed, detect}, true},
		{"POST", "/uploads", `{"kind":"image","filename":"a.jpg","size":10}`, []string{embed, detect}, false},
		{"GET", "/uploads/" + upload.UploadID, "", []string{embed, detect}, true},
		{"GET", "/assets", "", []string{"assets:read"}, false},
		{"GET", "/assets/" + asset, "", []string{"assets:read"}, true},
		{"GET", "/assets/" + asset + "/content", "", []string{"assets:read"}, true},
		{"PATCH", "/assets/" + asset, `{"version":1,"name":"x"}`, []string{"assets:write"}, true},
		{"DELETE", "/assets/" + asset, "", []string{"assets:delete"}, true},
		{"POST", "/assets/bulk-delete", `{"asset_ids":["` + asset + `"]}`, []string{"assets:delete"}, true},
		{"GET", "/accelerators/gpu", "", []string{embed, detect}, false},
		{"POST", "/accelerators/gpu/wake", "", []string{embed, detect}, false},
	}
	send := func(r route, key string) response {
		if r.body != "" {
			return call(t, r.method, f.base+r.path, key, strings.NewReader(r.body))
		}
		return call(t, r.method, f.base+r.path, key, nil)
	}
	for _, r := range routes {
		name := r.method + " " + r.path
		for _, k := range []struct{ what, key string }{{"no key", ""}, {"revoked key", f.keyRevoked}, {"bad key", "fgk_0000000000000000_x"}} {
			if res := send(r, k.key); res.status != 401 || decodeProblem(t, res).Code != "unauthorized" {
				t.Fatalf("%s with %s: %d %s", name, k.what, res.status, res.body)
			}
		}
		if res := send(r, f.keyGone); res.status != 403 {
			t.Fatalf("%s by a removed member: %d", name, res.status)
		}
		if len(r.scopes) > 0 {
			// keyNoScopes holds assets:read only; keyB holds watermarks:detect only.
			for _, k := range []struct {
				key   string
				holds string
			}{{f.keyNoScopes, "assets:read"}, {f.keyB, detect}} {
				granted := false
				for _, s := range r.scopes {
					granted = granted || s == k.holds
				}
				if granted {
					continue
				}
				if res := send(r, k.key); res.status != 403 || decodeProblem(t, res).Code != "insufficient_scope" {
					t.Fatalf("%s with only %s: %d %s", name, k.holds, res.status, res.body)
				}
			}
		}
		if r.resource {
			// keyExpiring belongs to organization B and holds every scope.
			if res := send(r, f.keyExpiring); res.status != 404 {
				t.Fatalf("%s by another organization: %d %s", name, res.status, res.body)
			}
		}
	}
	// Nothing above changed organization A's asset.
	if res := call(t, "GET", f.base+"/assets/"+asset, f.keyA, nil); res.status != 200 || !strings.Contains(string(res.body), `"version":1`) {
		t.Fatalf("asset after the matrix: %d %s", res.status, res.body)
	}
}
