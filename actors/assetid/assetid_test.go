package assetid

import (
	"regexp"
	"strings"
	"testing"
)

// The form Etchv's SDKs check before they send an asset call.
var sdkForm = regexp.MustCompile(`^ast_[a-f0-9]{64}$`)

func TestForHasTheSDKForm(t *testing.T) {
	a, b := For("req_1", KindWatermarked), For("req_1", KindSource)
	if !sdkForm.MatchString(a) || !sdkForm.MatchString(b) || a == b {
		t.Fatalf("ids %q %q", a, b)
	}
	if For("req_1", KindWatermarked) != a {
		t.Fatal("not deterministic")
	}
}

func TestValidAndLegacy(t *testing.T) {
	full := For("req_1", KindWatermarked)
	short := full[:LegacyLen]
	for _, id := range []string{full, short} {
		if !Valid(id) {
			t.Errorf("%q refused", id)
		}
	}
	for _, id := range []string{"", "ast_", full + "0", full[:LegacyLen+1], "ast_" + strings.Repeat("A", 64),
		"asx_" + full[4:], strings.Replace(full, "a", "g", 1), "ast_" + strings.Repeat("0", 48)} {
		if Valid(id) {
			t.Errorf("%q accepted", id)
		}
	}
	if !IsLegacy(short) || IsLegacy(full) || Legacy(full) != short || Legacy(short) != short || Legacy("junk") != "junk" {
		t.Fatal("legacy form")
	}
}

func TestCanonical(t *testing.T) {
	full := For("req_1", KindSource)
	short := full[:LegacyLen]
	cases := []struct{ id, req, kind, want string }{
		{short, "req_1", KindSource, full},           // a stored short id shows as its full form
		{full, "req_1", KindSource, full},            // full ids are already canonical
		{short, "req_1", KindWatermarked, short},     // not the prefix of that kind's id: left alone
		{short, "req_2", KindSource, short},          // nor of another request's
		{short, "", KindSource, short},               // no request id to derive from
		{"", "req_1", KindSource, ""},                // absent stays absent
		{"ast_w", "req_1", KindWatermarked, "ast_w"}, // garbage is not touched
	}
	for _, c := range cases {
		if got := Canonical(c.id, c.req, c.kind); got != c.want {
			t.Errorf("Canonical(%q, %q, %q) = %q, want %q", c.id, c.req, c.kind, got, c.want)
		}
	}
}

// FuzzAssetID: whatever a path names, Valid accepts only the two forms, and Legacy and Canonical keep a
// valid id valid (they never make garbage out of an id, nor an id out of garbage).
func FuzzAssetID(f *testing.F) {
	full := For("req_1", KindWatermarked)
	for _, s := range []string{full, full[:LegacyLen], "", "ast_", "ast_" + strings.Repeat("g", 64), full + "0", "AST_" + full[4:]} {
		f.Add(s, "req_1")
	}
	f.Fuzz(func(t *testing.T, id, req string) {
		ok := Valid(id)
		if ok && len(id) != Len && len(id) != LegacyLen {
			t.Fatalf("Valid(%q) with length %d", id, len(id))
		}
		if ok && !Valid(Legacy(id)) {
			t.Fatalf("Legacy(%q) = %q is not valid", id, Legacy(id))
		}
		c := Canonical(id, req, KindSource)
		if Valid(c) != ok || (c != id && !(IsLegacy(id) && c == For(req, KindSource))) {
			t.Fatalf("Canonical(%q, %q) = %q", id, req, c)
		}
	})
}
