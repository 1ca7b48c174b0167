package main

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"filigrane/bench/apibench"
)

// spawnNode starts one in-process node (development organization, every scope) for the client tests.
func spawnNode(t *testing.T) (baseURL, key string) {
	t.Helper()
	ctx := context.Background()
	s, err := apibench.Spawn(ctx, apibench.SpawnConfig{Nodes: 1, Workers: 2})
	if err != nil {
		t.Fatalf("spawn node: %v", err)
	}
	t.Cleanup(func() { s.Close(context.WithoutCancel(ctx)) })
	return s.Targets()[0], s.Key
}

func writePhoto(t *testing.T, path string, w, h int, seed uint64) {
	t.Helper()
	b, err := apibench.PhotoJPEG(w, h, seed)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// detectJSON runs `filigrane detect FILE --json` against the node and returns the server's result.
func detectJSON(t *testing.T, base, key, file string) (watermarked bool, id string) {
	t.Helper()
	code, out, errs := runCLI(t, "detect", file, "--url", base, "--key", key, "--json")
	if code != exitOK {
		t.Fatalf("detect %s: exit %d, stderr %q", file, code, errs)
	}
	var r struct {
		Watermarked bool    `json:"watermarked"`
		WatermarkID *string `json:"watermark_id"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("detect --json output %q: %v", out, err)
	}
	if r.WatermarkID != nil {
		id = *r.WatermarkID
	}
	return r.Watermarked, id
}

// TestClientCLIAgainstNode: the client commands against one node, with the URL and key as flags. Parallel
// (the checks that read the environment are TestClientCLIFromEnvironment's), so that its node's waits overlap
// the other parallel tests'.
func TestClientCLIAgainstNode(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a node")
	}
	base, key := spawnNode(t)
	dir := t.TempDir()
	photo := filepath.Join(dir, "photo.jpg")
	writePhoto(t, photo, 640, 480, 7)

	t.Run("SyncEmbedHumanOutputThenDetect", func(t *testing.T) {
		out := filepath.Join(dir, "sync.png")
		code, stdout, stderr := runCLI(t, "embed", photo, "--url", base, "--key", key, "-o", out, "--data", `{"case":"sync"}`)
		if code != exitOK {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		m := regexp.MustCompile(`watermark_id ([0-9a-f]+)`).FindStringSubmatch(stdout)
		if m == nil || !strings.Contains(stdout, "asset_id") || !strings.Contains(stdout, out) {
			t.Fatalf("human output lacks watermark id, asset id or output path: %q", stdout)
		}
		wm, id := detectJSON(t, base, key, out)
		if !wm || id != m[1] {
			t.Fatalf("detect on the CLI's output: watermarked %v id %q, want true %q", wm, id, m[1])
		}
		// The unmarked original is not watermarked (the detection is not vacuous).
		if wm, _ := detectJSON(t, base, key, photo); wm {
			t.Fatal("the unmarked original detected as watermarked")
		}
		// Human detect output.
		code, stdout, _ = runCLI(t, "detect", out, "--url", base, "--key", key)
		if code != exitOK || !strings.Contains(stdout, "watermarked  true") || !strings.Contains(stdout, m[1]) {
			t.Fatalf("human detect: exit %d, %q", code, stdout)
		}
	})

	t.Run("OutputFormatJPEG", func(t *testing.T) {
		out := filepath.Join(dir, "marked.jpg")
		code, stdout, stderr := runCLI(t, "embed", photo, "--url", base, "--key", key, "--output-format", "jpeg", "--json", "-o", out)
		if code != exitOK {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		var r embedResult
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("--json output %q: %v", stdout, err)
		}
		if b, err := os.ReadFile(out); err != nil || !bytes.HasPrefix(b, []byte{0xFF, 0xD8, 0xFF}) {
			t.Fatalf("output %q (%v) is not a JPEG", out, err)
		}
		if wm, id := detectJSON(t, base, key, r.Output); !wm || id != r.WatermarkID {
			t.Fatalf("detect the JPEG output: %v %q, want %q", wm, id, r.WatermarkID)
		}
		code, _, stderr = runCLI(t, "embed", photo, "--url", base, "--key", key, "--output-format", "gif", "-o", filepath.Join(dir, "x.gif"))
		if code == exitOK || !strings.Contains(stderr, "output_format") {
			t.Fatalf("--output-format gif: exit %d, stderr %q", code, stderr)
		}
	})

	t.Run("SignedUploadWithProgressBar", func(t *testing.T) {
		out := filepath.Join(dir, "uploaded.png")
		code, stdout, stderr := runCLI(t, "embed", photo, "--url", base, "--key", key, "-o", out, "--upload", "--progress", "always", "--json")
		if code != exitOK {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		if !strings.Contains(stderr, "signed upload") || !strings.Contains(stderr, "uploading photo.jpg") || !strings.Contains(stderr, "100%") {
			t.Fatalf("stderr shows no upload progress bar: %q", stderr)
		}
		var r embedResult
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("--json output %q: %v", stdout, err)
		}
		if wm, id := detectJSON(t, base, key, out); !wm || id != r.WatermarkID {
			t.Fatalf("detect uploaded output: %v %q, want %q", wm, id, r.WatermarkID)
		}
		// Not a terminal and no --progress always: no bar.
		code, _, stderr = runCLI(t, "embed", photo, "--url", base, "--key", key, "-o", out, "--upload")
		if code != exitOK || strings.Contains(stderr, "100%") {
			t.Fatalf("exit %d; a bar was drawn on a non-terminal stderr: %q", code, stderr)
		}
		// Over --direct-limit, the upload path is taken without --upload.
		code, _, stderr = runCLI(t, "embed", photo, "--url", base, "--key", key, "-o", out, "--direct-limit", "1000")
		if code != exitOK || !strings.Contains(stderr, "through a signed upload") {
			t.Fatalf("over the direct limit: exit %d, stderr %q", code, stderr)
		}
		if wm, _ := detectJSON(t, base, key, out); !wm {
			t.Fatal("output of the automatic upload path carries no watermark")
		}
		// The detect side of an upload (kind detect).
		code, stdout, stderr = runCLI(t, "detect", out, "--url", base, "--key", key, "--upload", "--json", "--quiet")
		if code != exitOK || !strings.Contains(stdout, `"watermarked":true`) || stderr != "" {
			t.Fatalf("detect via upload: exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
	})

	t.Run("AsyncReceiptThenJobsGetWait", func(t *testing.T) {
		code, stdout, stderr := runCLI(t, "embed", photo, "--url", base, "--key", key, "--async", "--json",
			"--idempotency-key", "cli-test-async-1")
		if code != exitOK {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		var r receipt
		if err := json.Unmarshal([]byte(stdout), &r); err != nil || !strings.HasPrefix(r.RequestID, "req_") {
			t.Fatalf("--async --json receipt %q: %v", stdout, err)
		}
		// The same Idempotency-Key returns the same job.
		_, again, _ := runCLI(t, "embed", photo, "--url", base, "--key", key, "--async", "--json", "--idempotency-key", "cli-test-async-1")
		var r2 receipt
		if err := json.Unmarshal([]byte(again), &r2); err != nil || r2.RequestID != r.RequestID {
			t.Fatalf("idempotent replay gave %q, want job %s", again, r.RequestID)
		}
		out := filepath.Join(dir, "async.png")
		code, stdout, stderr = runCLI(t, "jobs", "get", r.RequestID, "--wait", "-o", out, "--url", base, "--key", key, "--poll-max", "200ms")
		if code != exitOK {
			t.Fatalf("jobs get --wait: exit %d, stderr %q", code, stderr)
		}
		m := regexp.MustCompile(`watermark_id ([0-9a-f]+)`).FindStringSubmatch(stdout)
		if m == nil {
			t.Fatalf("jobs get --wait output %q", stdout)
		}
		if wm, id := detectJSON(t, base, key, out); !wm || id != m[1] {
			t.Fatalf("detect job result: %v %q, want %q", wm, id, m[1])
		}
		code, stdout, _ = runCLI(t, "jobs", "get", r.RequestID, "--url", base, "--key", key)
		if code != exitOK || !strings.Contains(stdout, "status       succeeded") {
			t.Fatalf("jobs get: exit %d, %q", code, stdout)
		}
		// An async detection job, followed by jobs get --wait: the detection result is printed.
		code, stdout, stderr = runCLI(t, "detect", out, "--url", base, "--key", key, "--async", "--wait=false", "--json")
		var dr receipt
		if code != exitOK || json.Unmarshal([]byte(stdout), &dr) != nil || dr.RequestID == "" {
			t.Fatalf("detect --async: exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		code, stdout, stderr = runCLI(t, "jobs", "get", dr.RequestID, "--wait", "--json", "--url", base, "--key", key, "--poll-max", "200ms")
		if code != exitOK || !strings.Contains(stdout, `"watermarked":true`) || !strings.Contains(stdout, m[1]) {
			t.Fatalf("jobs get --wait of a detection job: exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		// embed --async --wait in one step.
		out2 := filepath.Join(dir, "async2.png")
		code, stdout, stderr = runCLI(t, "embed", photo, "--url", base, "--key", key, "--async", "--wait", "-o", out2, "--json", "--poll-max", "200ms")
		var res embedResult
		if code != exitOK || json.Unmarshal([]byte(stdout), &res) != nil || res.Output != out2 || !strings.HasPrefix(res.RequestID, "req_") {
			t.Fatalf("embed --async --wait: exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		if wm, id := detectJSON(t, base, key, out2); !wm || id != res.WatermarkID {
			t.Fatalf("detect --async --wait output: %v %q, want %q", wm, id, res.WatermarkID)
		}
	})

	t.Run("ErrorsByClass", func(t *testing.T) {
		notImage := filepath.Join(dir, "fake.png")
		if err := os.WriteFile(notImage, []byte("this is not an image at all"), 0o600); err != nil {
			t.Fatal(err)
		}
		// 4xx: the problem's code and detail on stderr; with --json its body on stdout.
		code, stdout, stderr := runCLI(t, "embed", notImage, "--url", base, "--key", key, "--json")
		if code != exitClient || !regexp.MustCompile(`^filigrane embed: [a-z_]+: .+ \(HTTP 4\d\d, request req_[0-9a-f]+\)\n$`).MatchString(stderr) {
			t.Fatalf("bad image: exit %d, stderr %q", code, stderr)
		}
		var p problemBody
		if err := json.Unmarshal([]byte(stdout), &p); err != nil || p.Code == "" || !strings.Contains(stderr, p.Code+": ") {
			t.Fatalf("--json problem on stdout %q (stderr %q): %v", stdout, stderr, err)
		}
		// 401: exit 3.
		code, _, stderr = runCLI(t, "embed", photo, "--url", base, "--key", "fl_wrong_key_0000000000000000", "-o", filepath.Join(dir, "x.png"))
		if code != exitAuth || !strings.Contains(stderr, "HTTP 401") {
			t.Fatalf("wrong key: exit %d, stderr %q", code, stderr)
		}
		// 404 job: exit 2.
		code, _, stderr = runCLI(t, "jobs", "get", "req_"+strings.Repeat("0", 64), "--url", base, "--key", key)
		if code != exitClient || !strings.Contains(stderr, "HTTP 404") {
			t.Fatalf("unknown job: exit %d, stderr %q", code, stderr)
		}
		// Nothing listening: exit 6.
		code, _, stderr = runCLI(t, "detect", photo, "--url", "http://127.0.0.1:1", "--key", key)
		if code != exitNetwork {
			t.Fatalf("unreachable server: exit %d, stderr %q", code, stderr)
		}
		// Usage: exit 1, nothing sent.
		for _, args := range [][]string{
			{"embed", "--url", base, "--key", key},
			{"embed", photo, "--url", base, "--key", key, "--data", "[1]"},
			{"embed", filepath.Join(dir, "missing.jpg"), "--url", base, "--key", key},
			{"embed", filepath.Join(dir, "noext"), "--url", base, "--key", key},
			{"detect", photo, "--url", "ftp://x", "--key", key},
			{"jobs", "list", "--url", base, "--key", key},
		} {
			if code, _, stderr := runCLI(t, args...); code != exitUsage || stderr == "" {
				t.Errorf("%q: exit %d (want %d), stderr %q", args, code, exitUsage, stderr)
			}
		}
	})
}

// TestClientCLIFromEnvironment: the key and URL from the environment, the default output name in the working
// directory, and a usage error naming the variable when no key is given at all. Not parallel: it sets the
// environment and the working directory.
func TestClientCLIFromEnvironment(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	base, key := spawnNode(t)
	dir := t.TempDir()
	photo := filepath.Join(dir, "photo.jpg")
	writePhoto(t, photo, 640, 480, 7)

	t.Run("EnvKeyAndURLDefaultOutputJSON", func(t *testing.T) {
		t.Setenv(envAPIKey, key)
		t.Setenv(envBaseURL, base)
		t.Chdir(dir)
		code, stdout, stderr := runCLI(t, "embed", "photo.jpg", "--json")
		if code != exitOK {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		var r embedResult
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("--json output %q: %v", stdout, err)
		}
		if r.Output != "photo-watermarked.png" || r.WatermarkID == "" || r.AssetID == "" || r.Bytes == 0 {
			t.Fatalf("--json result %+v", r)
		}
		if wm, id := detectJSON(t, base, key, r.Output); !wm || id != r.WatermarkID {
			t.Fatalf("detect default output: %v %q, want %q", wm, id, r.WatermarkID)
		}
	})

	t.Run("NoKeyIsAUsageError", func(t *testing.T) {
		t.Setenv(envAPIKey, "")
		if code, _, stderr := runCLI(t, "embed", photo, "--url", base); code != exitUsage || !strings.Contains(stderr, envAPIKey) {
			t.Fatalf("no key: exit %d, stderr %q", code, stderr)
		}
	})
}

func TestClientCLIBatches(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a node")
	}
	base, key := spawnNode(t)
	dir := t.TempDir()
	folder := filepath.Join(dir, "in")
	if err := os.Mkdir(folder, 0o700); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"a.jpg", "b.jpg"} {
		writePhoto(t, filepath.Join(folder, name), 480, 360, uint64(20+i))
	}
	if err := os.WriteFile(filepath.Join(folder, "notes.txt"), []byte("skipped"), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("FolderWithArchive", func(t *testing.T) {
		out := filepath.Join(dir, "results.zip")
		code, stdout, stderr := runCLI(t, "batches", "create", folder, "--archive", "--wait", "-o", out,
			"--url", base, "--key", key, "--poll-max", "200ms", "--progress", "always")
		if code != exitOK {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		if !strings.Contains(stdout, "completed: 2 succeeded") || !strings.Contains(stdout, "archive "+out) ||
			!strings.Contains(stderr, "skipping notes.txt") || !strings.Contains(stderr, "2/2") ||
			!strings.Contains(stderr, "  item 0 a.jpg: succeeded\n") || !strings.Contains(stderr, "  item 1 b.jpg: succeeded\n") ||
			!strings.Contains(stderr, "uploading 2/2 b.jpg") {
			t.Fatalf("stdout %q, stderr %q", stdout, stderr)
		}
		zr, err := zip.OpenReader(out)
		if err != nil {
			t.Fatalf("result archive: %v", err)
		}
		defer zr.Close()
		var marked int
		for _, f := range zr.File {
			if !strings.HasSuffix(f.Name, "-watermarked.png") {
				continue
			}
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, f.Name)
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if wm, _ := detectJSON(t, base, key, p); !wm {
				t.Fatalf("%s of the archive carries no watermark", f.Name)
			}
			marked++
		}
		if marked != 2 {
			t.Fatalf("archive holds %d watermarked files, want 2", marked)
		}
	})

	t.Run("OutputFormat", func(t *testing.T) {
		// --output-format reaches the server: the archive holds WebP results that carry the mark.
		out := filepath.Join(dir, "webp.zip")
		code, stdout, stderr := runCLI(t, "batches", "create", folder, "--archive", "--output-format", "webp", "--wait",
			"-o", out, "--url", base, "--key", key, "--poll-max", "200ms", "--quiet")
		if code != exitOK || !strings.Contains(stdout, "completed: 2 succeeded") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		zr, err := zip.OpenReader(out)
		if err != nil {
			t.Fatalf("result archive: %v", err)
		}
		defer zr.Close()
		var names []string
		for _, f := range zr.File {
			names = append(names, f.Name)
		}
		if strings.Join(names, ",") != "000-a-watermarked.webp,001-b-watermarked.webp,manifest.json" {
			t.Fatalf("archive entries %v", names)
		}
		rc, err := zr.File[0].Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		p := filepath.Join(dir, zr.File[0].Name)
		if err != nil || os.WriteFile(p, b, 0o600) != nil {
			t.Fatalf("write %s: %v", p, err)
		}
		if wm, _ := detectJSON(t, base, key, p); !wm {
			t.Fatalf("%s carries no watermark", zr.File[0].Name)
		}
		// A format the server does not know: its problem on stderr, nothing uploaded.
		code, _, stderr = runCLI(t, "batches", "create", folder, "--output-format", "gif", "--url", base, "--key", key, "--quiet")
		if code != exitClient || !strings.Contains(stderr, "output_format") {
			t.Fatalf("--output-format gif: exit %d, stderr %q", code, stderr)
		}
	})

	t.Run("ZipJSON", func(t *testing.T) {
		zpath := filepath.Join(dir, "in.zip")
		zf, err := os.Create(zpath)
		if err != nil {
			t.Fatal(err)
		}
		zw := zip.NewWriter(zf)
		for _, name := range []string{"a.jpg", "b.jpg"} {
			b, err := os.ReadFile(filepath.Join(folder, name))
			if err != nil {
				t.Fatal(err)
			}
			w, err := zw.Create("pics/" + name)
			if err != nil {
				t.Fatal(err)
			}
			w.Write(b)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		zf.Close()
		code, stdout, stderr := runCLI(t, "batches", "create", zpath, "--wait", "--json", "--quiet",
			"--url", base, "--key", key, "--poll-max", "200ms", "--idempotency-key", "cli-zip-batch-1")
		if code != exitOK {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		var b batchView
		if err := json.Unmarshal([]byte(stdout), &b); err != nil || b.Status != "completed" || b.Counts.Succeeded != 2 || len(b.Items) != 2 {
			t.Fatalf("--json batch %q: %v", stdout, err)
		}
		if stderr != "" {
			t.Fatalf("--quiet left stderr %q", stderr)
		}
		code, stdout, _ = runCLI(t, "batches", "get", b.BatchID, "--url", base, "--key", key)
		if code != exitOK || !strings.Contains(stdout, b.BatchID+" completed") {
			t.Fatalf("batches get: exit %d, %q", code, stdout)
		}
		// An unknown batch: the problem on stderr, exit 2.
		code, _, stderr = runCLI(t, "batches", "get", "bat_"+strings.Repeat("0", 32), "--url", base, "--key", key)
		if code != exitClient || !strings.Contains(stderr, "HTTP 404") {
			t.Fatalf("unknown batch: exit %d, stderr %q", code, stderr)
		}
		// A malformed Idempotency-Key is refused before anything is sent.
		code, _, stderr = runCLI(t, "batches", "create", zpath, "--url", base, "--key", key, "--idempotency-key", "short")
		if code != exitUsage || !strings.Contains(stderr, "idempotency-key") {
			t.Fatalf("bad Idempotency-Key: exit %d, stderr %q", code, stderr)
		}
	})

	t.Run("Cancel", func(t *testing.T) {
		var b batchView
		code, stdout, stderr := runCLI(t, "batches", "create", folder, "--json", "--quiet", "--url", base, "--key", key)
		if code != exitOK || json.Unmarshal([]byte(stdout), &b) != nil || b.BatchID == "" {
			t.Fatalf("create: exit %d, %q %q", code, stdout, stderr)
		}
		// Cancelling answers the batch as it is then (items already running finish); followed to its end, it
		// ends cancelled (exit 7, the job-failed class), or completed when everything had finished first.
		code, stdout, stderr = runCLI(t, "batches", "cancel", b.BatchID, "--url", base, "--key", key)
		if code != exitOK || !regexp.MustCompile(`^batch `+b.BatchID+` (processing|cancelled|completed): \d+ succeeded`).MatchString(stdout) {
			t.Fatalf("cancel: exit %d, %q %q", code, stdout, stderr)
		}
		var after batchView
		code, stdout, _ = runCLI(t, "batches", "get", b.BatchID, "--wait", "--json", "--quiet", "--poll-max", "200ms", "--url", base, "--key", key)
		if json.Unmarshal([]byte(stdout), &after) != nil || !(after.Status == "cancelled" && code == exitJobFailed || after.Status == "completed" && code == exitOK) {
			t.Fatalf("after cancel: exit %d, %q", code, stdout)
		}
		code, _, stderr = runCLI(t, "batches", "cancel", "bat_"+strings.Repeat("0", 32), "--url", base, "--key", key)
		if code != exitClient || !strings.Contains(stderr, "HTTP 404") {
			t.Fatalf("cancel unknown: exit %d, %q", code, stderr)
		}
	})
}

func TestClientCLIWebhooks(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a node")
	}
	base, key := spawnNode(t)
	code, stdout, stderr := runCLI(t, "webhooks", "list", "--url", base, "--key", key)
	if code != exitOK || !strings.Contains(stdout, "no webhook endpoints") {
		t.Fatalf("empty list: exit %d, %q %q", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, "webhooks", "create", "https://hooks.example.test/in", "--events", "watermark.embed.succeeded",
		"--description", "cli test", "--url", base, "--key", key)
	m := regexp.MustCompile(`(?m)^(wh_[0-9a-f]{32})  https://hooks.example.test/in  enabled  watermark.embed.succeeded  "cli test"\nsigning_secret whsec_\S+`).FindStringSubmatch(stdout)
	if code != exitOK || m == nil {
		t.Fatalf("create: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, _ = runCLI(t, "webhooks", "list", "--url", base, "--key", key, "--json")
	var list []webhookView
	if code != exitOK || json.Unmarshal([]byte(stdout), &list) != nil || len(list) != 1 || list[0].ID != m[1] || list[0].SigningSecret != "" {
		t.Fatalf("list --json: exit %d, %q", code, stdout)
	}
	// A refused URL: the problem's code on stderr, exit 2.
	code, _, stderr = runCLI(t, "webhooks", "create", "ftp://nope", "--url", base, "--key", key)
	if code != exitClient || !regexp.MustCompile(`^filigrane webhooks: [a-z_]+: .+\(HTTP 4\d\d`).MatchString(stderr) {
		t.Fatalf("bad URL: exit %d, stderr %q", code, stderr)
	}
	// update changes only the named fields.
	id := m[1]
	code, stdout, stderr = runCLI(t, "webhooks", "update", id, "--enabled", "false", "--new-url", "https://hooks.example.test/v2", "--url", base, "--key", key)
	if code != exitOK || !strings.HasPrefix(stdout, id+"  https://hooks.example.test/v2  disabled  watermark.embed.succeeded  \"cli test\"") {
		t.Fatalf("update: exit %d, %q %q", code, stdout, stderr)
	}
	if code, _, _ = runCLI(t, "webhooks", "update", id, "--url", base, "--key", key); code != exitUsage {
		t.Fatalf("update with nothing to change: exit %d", code)
	}
	// rotate-secret shows a new secret once.
	code, stdout, _ = runCLI(t, "webhooks", "rotate-secret", id, "--url", base, "--key", key)
	rot := regexp.MustCompile(`signing_secret (whsec_\S+)`).FindStringSubmatch(stdout)
	old := regexp.MustCompile(`signing_secret (whsec_\S+)`).FindStringSubmatch(m[0])
	if code != exitOK || rot == nil || old == nil || rot[1] == old[1] {
		t.Fatalf("rotate-secret: exit %d, %q", code, stdout)
	}
	// delete removes it; a second delete is the server's 404.
	if code, stdout, _ = runCLI(t, "webhooks", "delete", id, "--url", base, "--key", key); code != exitOK || stdout != "deleted "+id+"\n" {
		t.Fatalf("delete: exit %d, %q", code, stdout)
	}
	if code, _, stderr = runCLI(t, "webhooks", "delete", id, "--url", base, "--key", key); code != exitClient || !strings.Contains(stderr, "HTTP 404") {
		t.Fatalf("delete again: exit %d, %q", code, stderr)
	}
	code, stdout, _ = runCLI(t, "webhooks", "list", "--url", base, "--key", key)
	if code != exitOK || !strings.Contains(stdout, "no webhook endpoints") {
		t.Fatalf("list after delete: exit %d, %q", code, stdout)
	}
}

// TestClientExitCodesByStatus covers the classes a development node does not easily produce (402, 403, 429,
// 503) with a local HTTP server answering problem bodies.
func TestClientExitCodesByStatus(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status int
		code   string
		exit   int
	}{
		{400, "invalid_request", exitClient},
		{401, "unauthorized", exitAuth},
		{402, "insufficient_credits", exitCredits},
		{403, "forbidden", exitAuth},
		{404, "not_found", exitClient},
		{429, "rate_limited", exitServer},
		{500, "internal", exitServer},
		{503, "unavailable", exitServer},
	}
	for _, c := range cases {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(c.status)
			fmt.Fprintf(w, `{"type":"/problems/%s","title":"t","status":%d,"detail":"detail of %s","code":%q,"request_id":"req_1"}`, c.code, c.status, c.code, c.code)
		}))
		code, stdout, stderr := runCLI(t, "jobs", "get", "req_1", "--url", srv.URL, "--key", "k", "--json")
		srv.Close()
		want := fmt.Sprintf("filigrane jobs: %s: detail of %s (HTTP %d, request req_1)\n", c.code, c.code, c.status)
		if code != c.exit || stderr != want || !strings.Contains(stdout, `"code":"`+c.code+`"`) {
			t.Errorf("HTTP %d: exit %d (want %d), stderr %q (want %q), stdout %q", c.status, code, c.exit, stderr, want, stdout)
		}
	}
}

// TestClientCACert: a server whose certificate a private CA signed is reached with --ca-cert, and refused
// (exit 6, network class) without it.
func TestClientCACert(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"request_id":"req_1","status":"succeeded","operation":"embed","credits":3}`)
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, "jobs", "get", "req_1", "--url", srv.URL, "--key", "k"); code != exitNetwork {
		t.Fatalf("without --ca-cert: exit %d, stderr %q", code, stderr)
	}
	code, stdout, stderr := runCLI(t, "jobs", "get", "req_1", "--url", srv.URL, "--key", "k", "--ca-cert", ca)
	if code != exitOK || !strings.Contains(stdout, "status       succeeded") {
		t.Fatalf("with --ca-cert: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, _, _ := runCLI(t, "jobs", "get", "req_1", "--url", srv.URL, "--key", "k", "--ca-cert", filepath.Join(t.TempDir(), "none.pem")); code != exitUsage {
		t.Fatalf("missing CA file: exit %d, want %d", code, exitUsage)
	}
}
