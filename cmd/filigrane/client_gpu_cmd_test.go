package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"filigrane/gpu"
)

// TestClientCLIAccelerator: `accelerator status|wake` against a node without a GPU (FILIGRANE_GPU=off makes
// that so on any machine): both show "unavailable" as the API answers it, wake names a webhook endpoint only
// if it exists, and `filigrane gpu status` points to the right command.
func TestClientCLIAccelerator(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	t.Setenv(gpu.EnvGPU, "off")
	base, key := spawnNode(t)
	const noGPU = "accelerator gpu\nstatus      unavailable\nready_at    -\nwarm_until  -\n"
	for _, sub := range []string{"status", "wake"} {
		code, stdout, stderr := runCLI(t, "accelerator", sub, "--url", base, "--key", key)
		if code != exitOK || stdout != noGPU {
			t.Fatalf("accelerator %s: exit %d, stdout %q, stderr %q", sub, code, stdout, stderr)
		}
		code, stdout, stderr = runCLI(t, "accelerator", sub, "--url", base, "--key", key, "--json")
		var raw map[string]any
		if code != exitOK || json.Unmarshal([]byte(stdout), &raw) != nil || raw["accelerator"] != "gpu" ||
			raw["status"] != "unavailable" || raw["ready_at"] != nil || raw["warm_until"] != nil {
			t.Fatalf("accelerator %s --json: exit %d, stdout %q, stderr %q", sub, code, stdout, stderr)
		}
		if _, ok := raw["ready_at"]; !ok {
			t.Fatalf("accelerator %s --json: no ready_at member in %q", sub, stdout)
		}
	}

	// wake --webhook-id: an unknown endpoint is the server's 404; a known one is accepted.
	code, _, stderr := runCLI(t, "accelerator", "wake", "--webhook-id", "wh_"+strings.Repeat("0", 32), "--url", base, "--key", key)
	if code != exitClient || !strings.Contains(stderr, "webhook_not_found: ") || !strings.Contains(stderr, "(HTTP 404") {
		t.Fatalf("wake with an unknown webhook: exit %d, stderr %q", code, stderr)
	}
	code, stdout, _ := runCLI(t, "webhooks", "create", "https://hooks.example.test/gpu", "--events", "accelerator.ready",
		"--url", base, "--key", key, "--json")
	var wh webhookView
	if code != exitOK || json.Unmarshal([]byte(stdout), &wh) != nil || wh.ID == "" {
		t.Fatalf("webhooks create: exit %d, %q", code, stdout)
	}
	code, stdout, stderr = runCLI(t, "accelerator", "wake", "--webhook-id", wh.ID, "--url", base, "--key", key)
	if code != exitOK || stdout != noGPU {
		t.Fatalf("wake with a webhook: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	// Usage errors, and the local gpu command pointing to this one.
	for _, args := range [][]string{{"accelerator"}, {"accelerator", "sleep"}, {"accelerator", "status", "extra"},
		{"accelerator", "status", "--webhook-id", wh.ID}} {
		if code, _, stderr = runCLI(t, append(args, "--url", base, "--key", key)...); code != exitUsage {
			t.Fatalf("%v: exit %d, want %d; stderr %q", args, code, exitUsage, stderr)
		}
	}
	code, _, stderr = runCLI(t, "gpu", "status")
	if code != 2 || !strings.Contains(stderr, "`filigrane accelerator status`") {
		t.Fatalf("gpu status: exit %d, stderr %q", code, stderr)
	}
}

// TestClientAcceleratorStates covers what a node without a GPU cannot answer: a starting GPU's times, the
// wake body the client sends, and a plan without GPU access (403, exit 3), with a local server answering
// as the API does (internal/apispec/openapi.yaml, GPU and Problem responses).
func TestClientAcceleratorStates(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type")+" "+string(b))
		mu.Unlock()
		if r.Header.Get("X-API-Key") == "free" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(403)
			fmt.Fprint(w, `{"type":"/problems/plan_forbidden","title":"Not included in the plan","status":403,`+
				`"detail":"the free plan does not include GPU processing","code":"plan_forbidden","request_id":"req_9"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"accelerator":"gpu","status":"starting","ready_at":"2026-11-27T08:00:02Z","warm_until":"2026-11-27T08:05:02Z"}`)
	}))
	defer srv.Close()

	code, stdout, stderr := runCLI(t, "accelerator", "wake", "--webhook-id", "wh_0123", "--url", srv.URL, "--key", "k")
	want := "accelerator gpu\nstatus      starting\nready_at    2026-11-27T08:00:02Z\nwarm_until  2026-11-27T08:05:02Z\n"
	if code != exitOK || stdout != want {
		t.Fatalf("wake: exit %d, stdout %q (want %q), stderr %q", code, stdout, want, stderr)
	}
	if code, _, _ = runCLI(t, "accelerator", "wake", "--url", srv.URL, "--key", "k"); code != exitOK {
		t.Fatalf("plain wake: exit %d", code)
	}
	if code, _, _ = runCLI(t, "accelerator", "status", "--url", srv.URL, "--key", "k"); code != exitOK {
		t.Fatalf("status: exit %d", code)
	}
	mu.Lock()
	sent := got
	mu.Unlock()
	wantSent := []string{
		`POST /accelerators/gpu/wake application/json {"webhook_id":"wh_0123"}`,
		`POST /accelerators/gpu/wake  `, // no body, so no content type: the API's plain wake
		`GET /accelerators/gpu  `,
	}
	if strings.Join(sent, "\n") != strings.Join(wantSent, "\n") {
		t.Fatalf("requests sent:\n%s\nwant:\n%s", strings.Join(sent, "\n"), strings.Join(wantSent, "\n"))
	}

	code, _, stderr = runCLI(t, "accelerator", "wake", "--url", srv.URL, "--key", "free")
	if code != exitAuth || !regexp.MustCompile(`^filigrane accelerator: plan_forbidden: the free plan does not include GPU processing \(HTTP 403, request req_9\)\n$`).MatchString(stderr) {
		t.Fatalf("wake on a plan without GPU: exit %d, stderr %q", code, stderr)
	}
}
