package http

import "testing"

func TestParsePublicURL(t *testing.T) {
	good := map[string]string{
		"https://api.example.com":             "https://api.example.com",
		"https://api.example.com/":            "https://api.example.com",
		"http://127.0.0.1:8080":               "http://127.0.0.1:8080",
		"https://example.com/filigrane/":      "https://example.com/filigrane",
		"https://[::1]:8443/a%20b":            "https://[::1]:8443/a%20b",
		"https://example.com/etchv/v1////":    "https://example.com/etchv/v1",
		"HTTPS://Example.com/Prefix":          "https://Example.com/Prefix",
		"https://api.example.com:443/x/y/z/":  "https://api.example.com:443/x/y/z",
		"http://localhost:8080/proxied/api/":  "http://localhost:8080/proxied/api",
		"https://xn--bcher-kva.example/books": "https://xn--bcher-kva.example/books",
	}
	for in, want := range good {
		got, err := ParsePublicURL(in)
		if err != nil || got != want {
			t.Errorf("ParsePublicURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "api.example.com", "/relative", "ftp://example.com", "https://", "https:///path",
		"https://user:pw@example.com", "https://example.com?x=1", "https://example.com/?", "https://example.com#top",
		"https://example.com/#", "mailto:a@example.com", "https://exa mple.com", "https://example.com/%zz"} {
		if got, err := ParsePublicURL(in); err == nil {
			t.Errorf("ParsePublicURL(%q) = %q, want an error", in, got)
		}
	}
}
