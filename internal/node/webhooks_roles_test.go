package node_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"filigrane/actors"
	"filigrane/internal/admin"
)

// webhookRoleKeys restarts the fixture's node with keys of the development organization for the role and
// scope checks: a plain member and an admin with every scope, and its owner with webhooks:read only and with
// no webhook scope.
func webhookRoleKeys(t *testing.T, f *fixture) (member, adminKey, readOnly, noWebhooks string) {
	t.Helper()
	stopNode(t, f.n)
	offline(t, f.dataDir, f.clk, func(a admin.Admin) {
		ctx := context.Background()
		key := func(mem string, scopes []string) string {
			s, _, err := a.CreateKey(ctx, actors.NewKeySpec{OrgID: f.dev.OrgID, MemberID: mem, Scopes: scopes})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		m, err := a.AddMember(ctx, f.dev.OrgID, "plain member", actors.RoleMember)
		if err != nil {
			t.Fatal(err)
		}
		ad, err := a.AddMember(ctx, f.dev.OrgID, "an admin", actors.RoleAdmin)
		if err != nil {
			t.Fatal(err)
		}
		member, adminKey = key(m, actors.AllScopes()), key(ad, actors.AllScopes())
		readOnly = key(f.dev.MemberID, []string{actors.ScopeWebhooksRead})
		noWebhooks = key(f.dev.MemberID, []string{actors.ScopeEmbed, actors.ScopeDetect})
	})
	f.n = startNode(t, f.dataDir, f.clk)
	f.base = "http://" + f.n.APIAddr()
	return member, adminKey, readOnly, noWebhooks
}

// TestWebhookManagementRolesAndScopes (spec 5): changing endpoints and redelivering needs webhooks:write
// and an owner or admin member. A plain member's key with every scope is refused 403 role_forbidden on every
// write route and changes nothing; it still reads (webhooks:read). An owner's key with webhooks:read only is
// refused 403 insufficient_scope on writes; a key without webhooks:read cannot even list. An admin manages.
func TestWebhookManagementRolesAndScopes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	member, adminKey, readOnly, noWebhooks := webhookRoleKeys(t, f)
	owner := f.dev.Secret

	r := jsonCall(t, "POST", f.base+"/webhooks", owner, map[string]any{"url": "https://hooks.example.com/a"})
	if r.status != 201 {
		t.Fatalf("owner creates: %d %s", r.status, r.body)
	}
	id := decodeJSONField(t, r.body, "id")
	evt := "evt_" + strings.Repeat("ab", 32)
	writes := []struct {
		method, path string
		body         any
	}{
		{"POST", "/webhooks", map[string]any{"url": "https://hooks.example.com/b"}},
		{"PATCH", "/webhooks/" + id, map[string]any{"enabled": false}},
		{"POST", "/webhooks/" + id + "/rotate-secret", nil},
		{"POST", "/webhooks/" + id + "/deliveries/" + evt + "/redeliver", nil},
		{"DELETE", "/webhooks/" + id, nil},
	}
	for _, w := range writes {
		for _, c := range []struct {
			who, key, code string
		}{{"member", member, "role_forbidden"}, {"read-only owner", readOnly, "insufficient_scope"}, {"no webhook scope", noWebhooks, "insufficient_scope"}} {
			res := jsonCall(t, w.method, f.base+w.path, c.key, w.body)
			if res.status != 403 || decodeProblem(t, res).Code != c.code {
				t.Fatalf("%s %s by %s: %d %s, want 403 %s", w.method, w.path, c.who, res.status, res.body, c.code)
			}
		}
	}
	// Nothing changed: one endpoint, enabled, with its first secret's overlap never started.
	list := call(t, "GET", f.base+"/webhooks", member, nil)
	if list.status != 200 || strings.Count(string(list.body), `"id":"wh_`) != 1 || !strings.Contains(string(list.body), `"enabled":true`) ||
		!strings.Contains(string(list.body), `"previous_secret_expires_at":null`) {
		t.Fatalf("member reads the list: %d %s", list.status, list.body)
	}
	for _, path := range []string{"/webhooks", "/webhooks/" + id, "/webhooks/" + id + "/deliveries"} {
		if res := call(t, "GET", f.base+path, readOnly, nil); res.status != 200 {
			t.Fatalf("GET %s with webhooks:read: %d %s", path, res.status, res.body)
		}
		if res := call(t, "GET", f.base+path, noWebhooks, nil); res.status != 403 || decodeProblem(t, res).Code != "insufficient_scope" {
			t.Fatalf("GET %s without webhooks:read: %d %s", path, res.status, res.body)
		}
	}
	// An admin manages like the owner.
	if res := jsonCall(t, "PATCH", f.base+"/webhooks/"+id, adminKey, map[string]any{"enabled": false}); res.status != 200 {
		t.Fatalf("admin disables: %d %s", res.status, res.body)
	}
	if res := call(t, "DELETE", f.base+"/webhooks/"+id, adminKey, nil); res.status != 204 {
		t.Fatalf("admin deletes: %d %s", res.status, res.body)
	}
}

// decodeJSONField reads the string field name of a JSON object body.
func decodeJSONField(t *testing.T, body []byte, name string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	s, _ := m[name].(string)
	if s == "" {
		t.Fatalf("body %s has no string %q", body, name)
	}
	return s
}
