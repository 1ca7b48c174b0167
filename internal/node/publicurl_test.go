package node_test

import (
	"context"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"filigrane/internal/node"
)

// TestPublicURLLocations: behind a proxy that serves the API under a path prefix, Location headers are absolute
// under --public-url (a relative one would resolve against the request's URL and lose the prefix); bodies keep
// the spec's relative URLs, which clients append to their base URL.
func TestPublicURLLocations(t *testing.T) {
	t.Parallel()
	const public = "https://api.example.com/filigrane"
	f := newFixture(t, func(c *node.Config) { c.PublicURL = public + "/" })
	r := post(t, f.base+"/watermarks/images/async", f.keyA, "public-url-1", photo(t, 320, 240, 3), `{"a":1}`)
	rc := decodeReceipt(t, r)
	if r.status != 202 || r.header.Get("Location") != public+"/watermarks/jobs/"+rc.RequestID ||
		rc.StatusURL != "/watermarks/jobs/"+rc.RequestID || rc.ResultURL != rc.StatusURL+"/result" {
		t.Fatalf("async embed: %d Location %q body %s", r.status, r.header.Get("Location"), r.body)
	}
	u := call(t, "POST", f.base+"/uploads", f.keyA, strings.NewReader(`{"kind":"image","filename":"a.png","size":1000}`))
	if u.status != 201 || !strings.HasPrefix(u.header.Get("Location"), public+"/uploads/upl_") {
		t.Fatalf("upload: %d Location %q", u.status, u.header.Get("Location"))
	}

	// Without it, Location is the path.
	f.stop(t)
	g := newFixture(t)
	r = post(t, g.base+"/watermarks/images/async", g.keyA, "public-url-2", photo(t, 320, 240, 3), `{"a":1}`)
	if rc := decodeReceipt(t, r); r.status != 202 || r.header.Get("Location") != rc.StatusURL {
		t.Fatalf("async embed without a public URL: %d Location %q", r.status, r.header.Get("Location"))
	}

	// A public URL that is no base URL stops the start, before anything listens.
	for _, bad := range []string{"api.example.com", "https://api.example.com?x=1", "ftp://api.example.com"} {
		_, err := node.Start(context.Background(), node.Config{DataDir: t.TempDir(), APIAddr: "127.0.0.1:0",
			UploadAddr: "127.0.0.1:0", NodeName: "bad", Logger: zerolog.Nop(), SweepInterval: -1, PublicURL: bad})
		if err == nil || !strings.Contains(err.Error(), "public URL") {
			t.Fatalf("start with public URL %q: %v", bad, err)
		}
	}
}
