package egress

import (
	"strings"
	"testing"
)

// FuzzValidateURL: whatever a customer sends as a URL, an accepted one is absolute http(s) with a host, no
// user information and no fragment, within the length bound; nothing panics.
func FuzzValidateURL(f *testing.F) {
	for _, s := range []string{"https://hooks.example.com/x", "http://127.0.0.1:8080/", "https://u:p@x/", "https://[::1]:0/",
		"HTTPS://EXAMPLE.COM", "https://x/#f", "https:%2F%2Fx", "http://[fe80::1%25eth0]/", "//x/y", "https://x:65536/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := ValidateURL(raw)
		if err != nil {
			return
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil || strings.Contains(raw, "#") || len(raw) > MaxURLLength {
			t.Fatalf("accepted %q as %#v", raw, u)
		}
	})
}
