package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// Malformed failure-detection settings stop serve with the variable's name instead of being read as the
// default.
func TestServeRefusesMalformedFailureDetection(t *testing.T) {
	for name, v := range map[string]string{
		"FILIGRANE_CLUSTER_PROBE_INTERVAL": "fast",
		"FILIGRANE_CLUSTER_PROBE_TIMEOUT":  "-1s",
		"FILIGRANE_CLUSTER_SUSPICION_MULT": "0",
		"FILIGRANE_WEBHOOK_TIMEOUT":        "0s",
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, v)
			var out, errb bytes.Buffer
			if code := run(context.Background(), []string{"serve", "--data", t.TempDir()}, &out, &errb); code != 2 || !strings.Contains(errb.String(), name) {
				t.Fatalf("%s=%s: exit %d: %s", name, v, code, errb.String())
			}
		})
	}
}

// A webhook attempt timeout of zero or less is refused with the flag's name before the node starts (it
// would otherwise be read as the 10 s default). (Were it accepted, serve would run until the context ends.)
func TestServeRefusesNonPositiveWebhookTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, v := range []string{"0s", "-1s"} {
		var out, errb bytes.Buffer
		code := run(ctx, []string{"serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--upload-listen", "127.0.0.1:0",
			"--webhook-timeout", v}, &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), "--webhook-timeout") {
			t.Fatalf("--webhook-timeout %s: exit %d: %s", v, code, errb.String())
		}
	}
}

// The flags reach the cluster member: a probe timeout that is not shorter than the interval is refused at start.
// (Were they ignored, serve would run until the context ends and exit 0.)
func TestServeFailureDetectionFlags(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, []string{"serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--upload-listen", "127.0.0.1:0",
		"--cluster-probe-interval", "1s", "--cluster-probe-timeout", "2s"}, &out, &errb)
	if code == 0 || !strings.Contains(errb.String(), "probe timeout") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

// The sweeper flags reach the node: a lease that is not longer than the sweep interval (the holder would lose
// it between its own rounds) is refused at start. (Were they ignored, serve would run until the context ends
// and exit 0.)
func TestServeSweeperFlags(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, []string{"serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--upload-listen", "127.0.0.1:0",
		"--sweep-interval", "5s", "--sweeper-lease", "5s"}, &out, &errb)
	if code == 0 || !strings.Contains(errb.String(), "sweeper lease 5s: want longer than the sweep interval 5s") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

// A trusted proxy that is not an address or a CIDR stops serve with the flag's name and the entry, from the
// flag and from FILIGRANE_TRUSTED_PROXIES alike, before the node starts (were it accepted, serve would run
// until the context ends).
func TestServeRefusesMalformedTrustedProxies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := []string{"serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--upload-listen", "127.0.0.1:0"}
	var out, errb bytes.Buffer
	if code := run(ctx, append(args, "--trusted-proxies", "10.0.0.0/8,10.0.0.0/33"), &out, &errb); code != 2 ||
		!strings.Contains(errb.String(), "--trusted-proxies") || !strings.Contains(errb.String(), "10.0.0.0/33") {
		t.Fatalf("--trusted-proxies 10.0.0.0/33: exit %d: %s", code, errb.String())
	}
	t.Setenv("FILIGRANE_TRUSTED_PROXIES", "lb.internal")
	errb.Reset()
	if code := run(ctx, args, &out, &errb); code != 2 || !strings.Contains(errb.String(), "lb.internal") {
		t.Fatalf("FILIGRANE_TRUSTED_PROXIES=lb.internal: exit %d: %s", code, errb.String())
	}
}
