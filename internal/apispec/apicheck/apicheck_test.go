package apicheck

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestCheckerCatchesDrift: each kind of mismatch the Transport exists to catch is reported, and a correct
// answer passes.
func TestCheckerCatchesDrift(t *testing.T) {
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	hdr := func(ct string) http.Header {
		return http.Header{"Content-Type": {ct}, "X-Request-Id": {"req_1"}, "Cache-Control": {"no-store"}}
	}
	prob := func(code string, status int) []byte {
		return []byte(`{"type":"/problems/` + code + `","title":"t","status":` + strconv.Itoa(status) + `,"code":"` + code + `","request_id":"req_1"}`)
	}
	key := []byte(`{"organization_id":"org_1","key_id":"key_1","scopes":["assets:read"]}`)
	cases := []struct {
		name, method, path string
		status             int
		h                  http.Header
		body               []byte
		want               string // "" = valid
	}{
		{"valid", "GET", "/auth/api-key", 200, hdr("application/json"), key, ""},
		{"valid problem", "GET", "/assets/ast_00", 404, hdr("application/problem+json"), prob("asset_not_found", 404), ""},
		{"undocumented status", "GET", "/auth/api-key", 201, hdr("application/json"), key, "not documented"},
		{"missing field", "GET", "/auth/api-key", 200, hdr("application/json"), []byte(`{"key_id":"k","scopes":[]}`), "does not match"},
		{"missing header", "GET", "/auth/api-key", 200, http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"r"}}, key, "Cache-Control"},
		{"wrong content type", "GET", "/auth/api-key", 200, hdr("text/plain"), key, "not documented"},
		{"code not listed", "GET", "/auth/api-key", 409, hdr("application/problem+json"), prob("asset_version_conflict", 409), "not listed"},
		{"status not the table's", "GET", "/assets/ast_00", 404, hdr("application/problem+json"), prob("asset_version_conflict", 404), "not listed"},
		{"status differs from table", "GET", "/assets/ast_00", 422, hdr("application/problem+json"), prob("asset_not_found", 422), "has status 404"},
		{"unknown route 200", "GET", "/nowhere", 200, hdr("application/json"), key, "not in the OpenAPI document"},
	}
	for _, tc := range cases {
		err := c.Response(tc.method, tc.path, tc.status, tc.h, tc.body)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}
