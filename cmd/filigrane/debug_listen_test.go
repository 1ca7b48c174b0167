package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// --debug-listen serves the runtime profiles on its own listener; an address that cannot be bound stops serve
// with exit 2 before the node starts.
func TestDebugListener(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := startDebugListener(ctx, "127.0.0.1:0", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"/debug/pprof/": "goroutine", "/debug/pprof/goroutine?debug=1": "goroutine profile"} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Fatalf("GET %s: %d, %.200s", path, resp.StatusCode, body)
		}
	}
	var out, errb bytes.Buffer
	code := run(ctx, []string{"serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--upload-listen", "127.0.0.1:0",
		"--debug-listen", addr}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "--debug-listen") {
		t.Fatalf("serve with a taken debug address: exit %d: %s", code, errb.String())
	}
}
