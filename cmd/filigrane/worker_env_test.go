package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The worker-count variables the README's configuration table names stop serve, with their own name and what
// they want, when they are not a whole number: a typo must not silently start a node with the default count.
func TestServeRefusesMalformedWorkerEnv(t *testing.T) {
	for _, name := range []string{"FILIGRANE_GPU_SLOTS", "FILIGRANE_LONG_WORKERS"} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, "four")
			// A cancelled context: were the variable accepted, the node would stop at once instead of serving.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var stderr bytes.Buffer
			rc := runServe(ctx, []string{"--data", t.TempDir(), "--listen", "127.0.0.1:0", "--upload-listen", "127.0.0.1:0"},
				&bytes.Buffer{}, &stderr)
			if rc != 2 || !strings.Contains(stderr.String(), name+`="four": want a whole number of workers`) {
				t.Fatalf("exit %d: %s", rc, stderr.String())
			}
		})
	}
}
