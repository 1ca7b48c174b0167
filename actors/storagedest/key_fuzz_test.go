package storagedest

import (
	"strings"
	"testing"
)

// FuzzValidKey: a key that passes names an object under the destination's prefix (no escape with '..', no
// absolute or empty segment, no control character) and stays within MaxObjectKey.
func FuzzValidKey(f *testing.F) {
	for _, s := range []string{"out/a.png", "a", "../x", "a//b", "/abs", "a/./b", "ok/\x00", strings.Repeat("k", 900), "é/ü.png"} {
		f.Add(s)
	}
	d := &Destination{Prefix: "customer/prefix"}
	f.Fuzz(func(t *testing.T, k string) {
		if ValidKey(d, k) != nil {
			return
		}
		full := d.ObjectKey(k)
		if len(full) > MaxObjectKey || !strings.HasPrefix(full, d.Prefix+"/") || strings.HasPrefix(k, "/") {
			t.Fatalf("accepted %q -> %q", k, full)
		}
		for _, seg := range strings.Split(k, "/") {
			if seg == "" || seg == "." || seg == ".." {
				t.Fatalf("accepted %q with segment %q", k, seg)
			}
		}
		if strings.ContainsFunc(k, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			t.Fatalf("accepted a control character in %q", k)
		}
	})
}

func TestValidKeyRefusals(t *testing.T) {
	d := &Destination{Prefix: "p"}
	for _, k := range []string{"", "/a", "../a", "a/../b", "a//b", "a/", "./a", "a\nb", strings.Repeat("x", MaxObjectKey)} {
		if ValidKey(d, k) == nil {
			t.Errorf("ValidKey(%q) accepted", k)
		}
	}
	if err := ValidKey(d, "out/2026/a.png"); err != nil {
		t.Errorf("ValidKey(out/2026/a.png): %v", err)
	}
	if got := DefaultKey("req_1", "../evil"); got != "req_1/output" {
		t.Errorf("DefaultKey with a path filename = %q", got)
	}
}
