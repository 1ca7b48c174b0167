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

// The flags are held to what their environment variables are held to: a value the variable would be refused
// for stops serve with the flag's name instead of being read as the default. (A cancelled context: were a value
// accepted, the node would stop at once and exit 1, not 2.)
func TestServeRefusesOutOfRangeFlags(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, args := range [][]string{
		{"--cluster-suspicion-mult", "0"},
		{"--cluster-probe-interval", "0s"},
		{"--cluster-probe-timeout", "-1s"},
		{"--max-conns", "-5"},
		{"--max-conns-per-ip", "-1"},
		{"--workers", "-1"},
		{"--long-workers", "-2"},
		{"--gpu-slots", "-1"},
		{"--unknown-keys-per-ip", "-1"},
		{"--unknown-key-lookups", "-3"},
		{"--header-timeout", "-1s"},
		{"--body-timeout", "-1s"},
		{"--idle-timeout", "-1s"},
		{"--drain-timeout", "-1s"},
		{"--max-video-work", "-1s"},
		{"--max-video-work", "1h30m1s"},
	} {
		var stderr bytes.Buffer
		rc := runServe(ctx, append([]string{"--data", t.TempDir(), "--listen", "127.0.0.1:0", "--upload-listen", "127.0.0.1:0"}, args...),
			&bytes.Buffer{}, &stderr)
		if rc != 2 || !strings.Contains(stderr.String(), args[0]+" "+args[1]+": want") {
			t.Errorf("%v: exit %d: %s", args, rc, stderr.String())
		}
	}
}
