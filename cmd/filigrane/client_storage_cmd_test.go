package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"filigrane/bench/apibench"
	"filigrane/persistence/s3test"
)

// eventually runs try until it reports true or the deadline passes; the state it waits for is reached by the
// node's own background work (a delivery attempt), which no request can wait for.
func eventually(t *testing.T, what string, within time.Duration, try func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !try() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestClientCLIStorage: against a node and a real S3 server (versitygw), the storage commands create a
// destination (the secret from the environment, never echoed), verify it, move an earlier result into it,
// show and list the delivery until it is stored, retry it, and delete the destination; a wrong secret fails
// verification with the server's 422 and exit 2.
func TestClientCLIStorage(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a node and an S3 server")
	}
	srv := s3test.Start(t)
	bucket := srv.NewBucket(t)
	ctx := context.Background()
	s, err := apibench.Spawn(ctx, apibench.SpawnConfig{Nodes: 1, Workers: 2, AllowPrivateTargets: true})
	if err != nil {
		t.Fatalf("spawn node: %v", err)
	}
	t.Cleanup(func() { s.Close(context.WithoutCancel(ctx)) })
	base, key := s.Targets()[0], s.Key
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, append(args, "--url", base, "--key", key)...)
	}
	// The commands that read the secret from the environment run as a process of their own with it (this
	// test binary runs main: TestMain), so this test sets no variable of its own process and runs in parallel.
	cliWithSecret := func(secret string, args ...string) (int, string, string) {
		t.Helper()
		return runCLIProcess(t, []string{envStorageSecret + "=" + secret}, append(args, "--url", base, "--key", key)...)
	}

	code, stdout, stderr := cli("storage", "list")
	if code != exitOK || stdout != "no storage destinations\n" {
		t.Fatalf("empty list: exit %d, %q %q", code, stdout, stderr)
	}
	create := []string{"storage", "create", "--name", "mine", "--endpoint", srv.Endpoint, "--secure", "false", "--path-style", "true",
		"--region", srv.Region, "--bucket", bucket, "--prefix", "cli", "--access-key-id", srv.AccessKey}
	// Without the secret in the environment: a usage error, nothing sent.
	if code, _, stderr = cliWithSecret("", create...); code != exitUsage || !strings.Contains(stderr, envStorageSecret) {
		t.Fatalf("create without a secret: exit %d, %q", code, stderr)
	}
	code, stdout, stderr = cliWithSecret(srv.SecretKey, create...)
	m := regexp.MustCompile(`^(dst_[0-9a-f]{32})  "mine"  ` + regexp.QuoteMeta(srv.Endpoint+"/"+bucket+"/cli") + `  enabled  not verified\n$`).FindStringSubmatch(stdout)
	if code != exitOK || m == nil || strings.Contains(stdout+stderr, srv.SecretKey) {
		t.Fatalf("create: exit %d, %q %q", code, stdout, stderr)
	}
	dst := m[1]
	code, stdout, stderr = cli("storage", "verify", dst)
	if code != exitOK || !regexp.MustCompile(`^`+dst+`  "mine"  .*  enabled  verified \S+\n$`).MatchString(stdout) {
		t.Fatalf("verify: exit %d, %q %q", code, stdout, stderr)
	}

	// An earlier result to move: embed a photo, take its watermarked asset.
	dir := t.TempDir()
	photo := filepath.Join(dir, "photo.jpg")
	writePhoto(t, photo, 640, 480, 7)
	if code, _, stderr = cli("embed", photo, "--data", `{"cli":"storage"}`, "-o", filepath.Join(dir, "marked.jpg"), "--quiet"); code != exitOK {
		t.Fatalf("embed: exit %d, %q", code, stderr)
	}
	var page assetPage
	cliJSON(t, &page, base, key, "assets", "list", "--kind", "watermarked")
	if len(page.Items) != 1 {
		t.Fatalf("assets: %+v", page)
	}
	asset := page.Items[0].ID
	code, stdout, stderr = cli("storage", "move", dst, asset, "--storage-key", "moved/photo.jpg")
	mv := regexp.MustCompile(`^(std_[0-9a-f]{64})  queued  ` + asset + ` -> ` + dst + `  attempts \d+`).FindStringSubmatch(stdout)
	if code != exitOK || mv == nil {
		t.Fatalf("move: exit %d, %q %q", code, stdout, stderr)
	}
	std := mv[1]
	eventually(t, "delivery stored", 60*time.Second, func() bool {
		code, stdout, _ = cli("storage", "delivery", std)
		return code == exitOK && strings.HasPrefix(stdout, std+"  stored  ")
	})
	if !strings.Contains(stdout, "cli/moved/photo.jpg") {
		t.Fatalf("stored delivery without its object key: %q", stdout)
	}
	// An embed that names the destination: its delivery id is printed, and the delivery gets stored.
	code, stdout, stderr = cli("embed", photo, "--data", `{"cli":"storage-embed"}`, "-o", filepath.Join(dir, "marked2.jpg"),
		"--storage-destination-id", dst, "--storage-key", "direct/photo.png", "--quiet")
	de := regexp.MustCompile(`(?m)^delivery     (std_[0-9a-f]{64}) `).FindStringSubmatch(stdout)
	if code != exitOK || de == nil {
		t.Fatalf("embed to the destination: exit %d, %q %q", code, stdout, stderr)
	}
	eventually(t, "the embed's delivery stored", 60*time.Second, func() bool {
		code, stdout, _ = cli("storage", "delivery", de[1])
		return code == exitOK && strings.HasPrefix(stdout, de[1]+"  stored  ") && strings.Contains(stdout, "cli/direct/photo.png")
	})
	if code, _, _ = cli("embed", photo, "--storage-key", "k"); code != exitUsage {
		t.Fatalf("--storage-key alone: exit %d", code)
	}
	code, stdout, _ = cli("storage", "deliveries", dst)
	if code != exitOK || !strings.Contains(stdout, std+"  stored  "+asset+" -> "+dst) || !strings.Contains(stdout, de[1]+"  stored  ") {
		t.Fatalf("deliveries: exit %d, %q", code, stdout)
	}
	code, stdout, _ = cli("storage", "deliveries", dst, "--json")
	var dp deliveryPage
	if code != exitOK || json.Unmarshal([]byte(stdout), &dp) != nil || len(dp.Items) != 2 || dp.Items[0].ID != de[1] || dp.Items[1].ID != std {
		t.Fatalf("deliveries --json (newest first): exit %d, %q", code, stdout)
	}
	// Paged one at a time: the first page names the flag for the next; --after takes it; --all walks both.
	code, stdout, _ = cli("storage", "deliveries", dst, "--limit", "1")
	next := regexp.MustCompile(`(?m)^next page: --after (\S+)\n$`).FindStringSubmatch(stdout)
	if code != exitOK || !strings.HasPrefix(stdout, de[1]+"  stored  ") || strings.Contains(stdout, std) || next == nil {
		t.Fatalf("deliveries --limit 1: exit %d, %q", code, stdout)
	}
	code, stdout, _ = cli("storage", "deliveries", dst, "--limit", "1", "--after", next[1])
	if code != exitOK || !strings.HasPrefix(stdout, std+"  stored  ") || strings.Contains(stdout, de[1]) {
		t.Fatalf("deliveries --after: exit %d, %q", code, stdout)
	}
	code, stdout, _ = cli("storage", "deliveries", dst, "--limit", "1", "--all")
	if lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n"); code != exitOK || len(lines) != 2 ||
		!strings.HasPrefix(lines[0], de[1]+"  stored  ") || !strings.HasPrefix(lines[1], std+"  stored  ") {
		t.Fatalf("deliveries --all: exit %d, %q", code, stdout)
	}
	// Retrying a stored delivery answers it as it is.
	if code, stdout, _ = cli("storage", "retry", std); code != exitOK || !strings.HasPrefix(stdout, std+"  stored  ") {
		t.Fatalf("retry: exit %d, %q", code, stdout)
	}

	// A wrong secret: update clears the verification, verify fails with the server's 422.
	if code, stdout, stderr = cliWithSecret("not-the-secret", "storage", "update", dst, "--access-key-id", srv.AccessKey); code != exitOK || !strings.Contains(stdout, "not verified") {
		t.Fatalf("update: exit %d, %q %q", code, stdout, stderr)
	}
	code, _, stderr = cli("storage", "verify", dst)
	if code != exitClient || !strings.Contains(stderr, "storage_verification_failed") || !strings.Contains(stderr, "HTTP 422") {
		t.Fatalf("verify with a wrong secret: exit %d, %q", code, stderr)
	}
	if code, _, _ = cli("storage", "update", dst); code != exitUsage {
		t.Fatalf("update with nothing to change: exit %d", code)
	}
	if code, stdout, _ = cli("storage", "delete", dst); code != exitOK || stdout != "deleted "+dst+"\n" {
		t.Fatalf("delete: exit %d, %q", code, stdout)
	}
	if code, _, stderr = cli("storage", "get", dst); code != exitClient || !strings.Contains(stderr, "HTTP 404") {
		t.Fatalf("get after delete: exit %d, %q", code, stderr)
	}
}

// TestClientCLIWebhookDeliveries: an async embed naming an endpoint whose host does not resolve leaves a
// failed attempt in the endpoint's delivery log; `webhooks deliveries` shows it with the error, and
// `webhooks redeliver` queues the event again.
func TestClientCLIWebhookDeliveries(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a node")
	}
	base, key := spawnNode(t)
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, append(args, "--url", base, "--key", key)...)
	}
	code, stdout, stderr := cli("webhooks", "create", "https://hooks.example.test/in")
	m := regexp.MustCompile(`(?m)^(wh_[0-9a-f]{32})  `).FindStringSubmatch(stdout)
	if code != exitOK || m == nil {
		t.Fatalf("create: exit %d, %q %q", code, stdout, stderr)
	}
	wh := m[1]
	if code, stdout, _ = cli("webhooks", "deliveries", wh); code != exitOK || stdout != "no deliveries\n" {
		t.Fatalf("empty log: exit %d, %q", code, stdout)
	}
	dir := t.TempDir()
	photo := filepath.Join(dir, "photo.jpg")
	writePhoto(t, photo, 640, 480, 9)
	if code, _, stderr = cli("embed", photo, "--data", `{"cli":"webhook"}`, "--async", "--wait", "--webhook-id", wh,
		"-o", filepath.Join(dir, "marked.jpg"), "--quiet"); code != exitOK {
		t.Fatalf("embed: exit %d, %q", code, stderr)
	}
	line := regexp.MustCompile(`^(evt_[0-9a-f]{64})  watermark\.embed\.succeeded  (retrying|exhausted)  attempts [1-9]\d*  last error: .+\n$`)
	var evt []string
	eventually(t, "a failed delivery attempt in the log", 60*time.Second, func() bool {
		code, stdout, _ = cli("webhooks", "deliveries", wh)
		evt = line.FindStringSubmatch(stdout)
		return code == exitOK && evt != nil
	})
	code, stdout, _ = cli("webhooks", "deliveries", wh, "--json")
	var page webhookDeliveryPage
	if code != exitOK || json.Unmarshal([]byte(stdout), &page) != nil || len(page.Data) != 1 || page.Data[0].ID != evt[1] {
		t.Fatalf("deliveries --json: exit %d, %q", code, stdout)
	}
	code, stdout, stderr = cli("webhooks", "redeliver", wh, evt[1])
	if code != exitOK || !strings.HasPrefix(stdout, evt[1]+"  watermark.embed.succeeded  ") {
		t.Fatalf("redeliver: exit %d, %q %q", code, stdout, stderr)
	}
	if code, _, stderr = cli("webhooks", "redeliver", wh, "evt_"+strings.Repeat("0", 64)); code != exitClient || !strings.Contains(stderr, "HTTP 404") {
		t.Fatalf("redeliver unknown: exit %d, %q", code, stderr)
	}
}

// TestClientCLIGroupHelp: each client command group prints its usage to stdout for help (exit 0), and to
// stderr with a usage error naming its subcommands for no subcommand or an unknown one (exit 2); nothing is
// sent (no server is given).
func TestClientCLIGroupHelp(t *testing.T) {
	for group, usage := range map[string]string{"assets": assetsUsage, "uploads": uploadsUsage, "batches": batchesUsage,
		"jobs": jobsUsage, "accelerator": acceleratorUsage, "storage": storageUsage, "webhooks": webhooksUsage} {
		for _, help := range []string{"help", "--help", "-h"} {
			if code, stdout, stderr := runCLI(t, group, help); code != exitOK || stdout != usage || stderr != "" {
				t.Errorf("%s %s: exit %d, stdout %q, stderr %q", group, help, code, stdout, stderr)
			}
		}
		for _, args := range [][]string{{group}, {group, "bogus"}} {
			code, stdout, stderr := runCLI(t, args...)
			if code != exitUsage || stdout != "" || !strings.HasPrefix(stderr, usage) || !strings.Contains(stderr, "want: "+group+" ") {
				t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
			}
		}
	}
}

// TestClientCLIListsHiddenCharactersEscaped: a destination or webhook endpoint stored before hidden characters
// were refused (docs/api.md, "Hidden characters") is printed with them quoted or escaped, so a right-to-left
// override in its prefix or URL reverses nothing after it on the line, and a line break splits nothing.
func TestClientCLIListsHiddenCharactersEscaped(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	printDestination(&out, destinationView{ID: "dst_1", Name: "r\u202eeven", Endpoint: "s3.example.com", Bucket: "b", Prefix: "p\u202ex\nq", Enabled: true})
	if got := out.String(); got != `dst_1  "r\u202eeven"  s3.example.com/b/p\u202ex\nq  enabled  not verified`+"\n" {
		t.Fatalf("destination printed as %q", got)
	}
	out.Reset()
	printWebhook(&out, webhookView{ID: "wh_1", URL: "https://x.example/?\u202eexe.lmth", Description: "d\u2066", Enabled: true})
	if got := out.String(); got != `wh_1  https://x.example/?\u202eexe.lmth  enabled  all events  "d\u2066"`+"\n" {
		t.Fatalf("webhook printed as %q", got)
	}
}

// TestClientCLIRemoteErrorsEscaped: an error a remote server chose (an S3 endpoint's message, a webhook
// receiver's certificate names) stored before the node escaped such text, and an answer from a hostile server
// in front of the node, reach the terminal escaped and bounded: no ESC or BEL byte, so no escape sequence
// recolours, clears or retitles it or writes its clipboard (OSC 52), and no override reverses the line.
func TestClientCLIRemoteErrorsEscaped(t *testing.T) {
	t.Parallel()
	const hostile = "\x1b]52;c;cm0gLXJmIH4=\a\x1b[2J\x1b[31m\u202eexe.txt"
	const shown = `\u001b]52;c;cm0gLXJmIH4=\u0007\u001b[2J\u001b[31m\u202eexe.txt`
	msg := hostile + strings.Repeat("y", 100<<10)
	var out strings.Builder
	printDestination(&out, destinationView{ID: "dst_1", Name: "n", Endpoint: "s3.example.com", Bucket: "b", Enabled: true, LastError: &msg})
	printDelivery(&out, deliveryView{ID: "sdl_1", Status: "failed", AssetID: "ast_1", DestinationID: "dst_1", URI: "s3://b/k\u202e", LastError: &msg})
	var wd webhookDeliveryView
	wd.ID, wd.Payload.Type, wd.Status, wd.Attempts = "evt_1", "watermark.embed.succeeded", "exhausted", 1
	wd.History = append(wd.History, struct {
		At         string  `json:"at"`
		StatusCode *int    `json:"status_code"`
		Error      *string `json:"error"`
	}{At: "2026-11-28T00:00:00Z", Error: &msg})
	printWebhookDelivery(&out, wd)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("printed %d lines, want 3: %+q", len(lines), out.String())
	}
	for _, line := range lines {
		if strings.ContainsAny(line, "\x1b\a\u202e") || !strings.Contains(line, "last error: "+shown) || len(line) > 2<<10 {
			t.Errorf("printed %d bytes: %+q", len(line), line[:min(len(line), 300)])
		}
	}

	// A hostile server where the node should be (a proxy's error page, say).
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, msg)
	}))
	defer srv.Close()
	code, stdout, stderr := runCLI(t, "storage", "list", "--url", srv.URL, "--key", "k")
	if code != exitServer || stdout != "" || strings.ContainsAny(stderr, "\x1b\a\u202e") || !strings.Contains(stderr, `\u001b]52`) || len(stderr) > 1<<10 {
		t.Errorf("against a hostile server: exit %d, stdout %q, stderr %d bytes %+q", code, stdout, len(stderr), stderr[:min(len(stderr), 300)])
	}
}
