package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// cliJSON runs the CLI with --json against base, expects exit 0 and decodes stdout into v.
func cliJSON(t *testing.T, v any, base, key string, args ...string) {
	t.Helper()
	args = append(args, "--url", base, "--key", key, "--json")
	code, stdout, stderr := runCLI(t, args...)
	if code != exitOK {
		t.Fatalf("%v: exit %d, stderr %q", args, code, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), v); err != nil {
		t.Fatalf("%v: stdout %q: %v", args, stdout, err)
	}
}

// TestClientCLIAssetsAndUploads: the asset library and signed uploads from the CLI against a node: list
// (one page, every page), get, download (the bytes the embed gave), delete one and several, and the refusals.
func TestClientCLIAssetsAndUploads(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	base, key := spawnNode(t)
	dir := t.TempDir()
	photo := filepath.Join(dir, "photo.jpg")
	writePhoto(t, photo, 640, 480, 31)
	var first, second embedResult
	cliJSON(t, &first, base, key, "embed", photo, "-o", filepath.Join(dir, "one.png"), "--data", `{"n":1}`)
	cliJSON(t, &second, base, key, "embed", photo, "-o", filepath.Join(dir, "two.png"), "--data", `{"n":2}`)
	asset := regexp.MustCompile(`^ast_[0-9a-f]{64}$`)
	for _, id := range []string{first.AssetID, first.SourceAssetID, second.AssetID, second.SourceAssetID} {
		if !asset.MatchString(id) {
			t.Fatalf("embed asset id %q", id)
		}
	}

	// Newest first: the second embed's two assets (created together: either order), then the first's.
	var page, next assetPage
	cliJSON(t, &page, base, key, "assets", "list", "--limit", "1")
	if len(page.Items) != 1 || page.NextCursor == nil {
		t.Fatalf("first page %+v", page)
	}
	cliJSON(t, &next, base, key, "assets", "list", "--limit", "1", "--cursor", *page.NextCursor)
	pair := map[string]bool{second.AssetID: true, second.SourceAssetID: true}
	if len(next.Items) != 1 || !pair[page.Items[0].ID] || !pair[next.Items[0].ID] || page.Items[0].ID == next.Items[0].ID {
		t.Fatalf("pages %+v then %+v, want the second embed's assets", page, next)
	}
	var all assetPage
	cliJSON(t, &all, base, key, "assets", "list", "--limit", "1", "--all")
	if len(all.Items) != 4 || all.NextCursor != nil {
		t.Fatalf("--all: %+v", all)
	}
	var marked assetPage
	cliJSON(t, &marked, base, key, "assets", "list", "--kind", "watermarked", "--watermark-id", first.WatermarkID)
	if len(marked.Items) != 1 || marked.Items[0].ID != first.AssetID {
		t.Fatalf("filtered list %+v", marked)
	}
	code, stdout, stderr := runCLI(t, "assets", "list", "--limit", "2", "--url", base, "--key", key)
	if code != exitOK || !strings.Contains(stdout, second.AssetID) || !strings.Contains(stdout, "next page: --cursor ") {
		t.Fatalf("human list: exit %d, %q %q", code, stdout, stderr)
	}

	var got assetView
	cliJSON(t, &got, base, key, "assets", "get", first.AssetID)
	if got.ID != first.AssetID || got.Kind != "watermarked" || got.WatermarkID == nil || *got.WatermarkID != first.WatermarkID {
		t.Fatalf("get %+v", got)
	}
	dl := filepath.Join(dir, "dl.png")
	code, _, stderr = runCLI(t, "assets", "download", first.AssetID, "-o", dl, "--url", base, "--key", key)
	want, _ := os.ReadFile(filepath.Join(dir, "one.png"))
	have, _ := os.ReadFile(dl)
	if code != exitOK || len(want) == 0 || !bytes.Equal(have, want) {
		t.Fatalf("download: exit %d, %d bytes (want the embed's %d), stderr %q", code, len(have), len(want), stderr)
	}
	// Without -o the file takes the server's name, in the current directory.
	t.Chdir(dir)
	code, stdout, _ = runCLI(t, "assets", "download", first.SourceAssetID, "--url", base, "--key", key)
	src, _ := os.ReadFile(photo)
	m := regexp.MustCompile(`^output (\S+) \(\d+ bytes\)\n$`).FindStringSubmatch(stdout)
	if code != exitOK || m == nil {
		t.Fatalf("download without -o: exit %d, %q", code, stdout)
	}
	if b, err := os.ReadFile(filepath.Join(dir, m[1])); err != nil || !bytes.Equal(b, src) || filepath.Base(m[1]) != m[1] {
		t.Fatalf("downloaded source %s: %v (%d bytes, want %d)", m[1], err, len(b), len(src))
	}

	// Delete one, then two at once (all or none).
	if code, stdout, stderr = runCLI(t, "assets", "delete", first.AssetID, "--url", base, "--key", key); code != exitOK || stdout != "deleted 1 asset(s)\n" {
		t.Fatalf("delete: exit %d, %q %q", code, stdout, stderr)
	}
	code, _, stderr = runCLI(t, "assets", "get", first.AssetID, "--url", base, "--key", key)
	if code != exitClient || !strings.Contains(stderr, "asset_not_found") {
		t.Fatalf("get deleted: exit %d, %q", code, stderr)
	}
	code, _, stderr = runCLI(t, "assets", "delete", second.AssetID, "ast_"+strings.Repeat("0", 64), "--url", base, "--key", key)
	if code != exitClient || !strings.Contains(stderr, "asset_not_found") {
		t.Fatalf("bulk delete with an unknown id: exit %d, %q", code, stderr)
	}
	if code, _, stderr = runCLI(t, "assets", "delete", second.AssetID, second.SourceAssetID, "--url", base, "--key", key); code != exitOK {
		t.Fatalf("bulk delete: exit %d, %q", code, stderr)
	}
	cliJSON(t, &all, base, key, "assets", "list", "--all")
	if len(all.Items) != 1 || all.Items[0].ID != first.SourceAssetID {
		t.Fatalf("left after deletes: %+v", all)
	}
	// Not an asset id: a usage error before any request.
	if code, _, stderr = runCLI(t, "assets", "get", "ast_123", "--url", base, "--key", key); code != exitUsage {
		t.Fatalf("bad id: exit %d, %q", code, stderr)
	}

	// Uploads: create sends the file through its signed URL; get shows it received.
	var up uploadView
	cliJSON(t, &up, base, key, "uploads", "create", photo, "--quiet")
	if !strings.HasPrefix(up.UploadID, "upl_") || up.Status != "received" || up.Kind != "image" || up.Size != int64(len(src)) {
		t.Fatalf("uploads create: %+v", up)
	}
	code, stdout, _ = runCLI(t, "uploads", "get", up.UploadID, "--url", base, "--key", key)
	if code != exitOK || !strings.Contains(stdout, "status    received") {
		t.Fatalf("uploads get: exit %d, %q", code, stdout)
	}
	cliJSON(t, &up, base, key, "uploads", "create", photo, "--kind", "detect", "--quiet")
	if up.Kind != "detect" || up.Status != "received" {
		t.Fatalf("detect upload: %+v", up)
	}
	notes := filepath.Join(dir, "notes.txt")
	os.WriteFile(notes, []byte("x"), 0o600)
	if code, _, _ = runCLI(t, "uploads", "create", notes, "--url", base, "--key", key); code != exitUsage {
		t.Fatalf("upload of no media kind: exit %d", code)
	}
}

// TestClientCLIAssetUpdate: `assets update` against a node: a rename and metadata with --version, the 409 of a
// stale version (exit 2, the server's code and a hint, nothing changed), an edit that reads the current
// version first, the server's 422 for metadata it refuses, and the usage errors found before any request.
func TestClientCLIAssetUpdate(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a node")
	}
	base, key := spawnNode(t)
	dir := t.TempDir()
	photo := filepath.Join(dir, "photo.jpg")
	writePhoto(t, photo, 400, 300, 7)
	var emb embedResult
	cliJSON(t, &emb, base, key, "embed", photo, "-o", filepath.Join(dir, "out.png"))
	id := emb.AssetID
	var before assetView
	cliJSON(t, &before, base, key, "assets", "get", id)
	v := before.Version
	if v < 1 {
		t.Fatalf("asset before the edit: %+v", before)
	}

	// With --version: the name and metadata change, the version moves on, and an integer beyond float64's
	// exact range comes back as sent.
	meta := `{"customer":"c-42","order":9007199254740993}`
	var after assetView
	cliJSON(t, &after, base, key, "assets", "update", id, "--name", "renamed.jpg", "--metadata", meta,
		"--version", strconv.FormatInt(v, 10))
	if after.ID != id || after.Name != "renamed.jpg" || after.Version != v+1 || string(after.Metadata) != meta {
		t.Fatalf("update: %+v (metadata %s), want name renamed.jpg, version %d, metadata %s", after, after.Metadata, v+1, meta)
	}

	// The same stale version again: 409, exit 2, the problem's code and a hint; the asset is as it was.
	code, stdout, stderr := runCLI(t, "assets", "update", id, "--name", "other.jpg", "--version", strconv.FormatInt(v, 10),
		"--url", base, "--key", key)
	if code != exitClient || stdout != "" ||
		!regexp.MustCompile(`^filigrane assets: asset_version_conflict: .+ \(HTTP 409, request req_\w+\); `+
			"`filigrane assets get "+id+"` shows its current version\n$").MatchString(stderr) {
		t.Fatalf("stale version: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, _ = runCLI(t, "assets", "update", id, "--name", "other.jpg", "--version", strconv.FormatInt(v, 10),
		"--url", base, "--key", key, "--json")
	var prob problemBody
	if code != exitClient || json.Unmarshal([]byte(stdout), &prob) != nil || prob.Code != "asset_version_conflict" || prob.Status != 409 {
		t.Fatalf("stale version --json: exit %d, stdout %q", code, stdout)
	}
	var still assetView
	cliJSON(t, &still, base, key, "assets", "get", id)
	if still.Name != "renamed.jpg" || still.Version != v+1 || string(still.Metadata) != meta {
		t.Fatalf("after refused edits: %+v (metadata %s)", still, still.Metadata)
	}

	// Without --version: the current version is read first (said on stderr), then edited; the human output
	// is the asset's line and its metadata.
	metaFile := filepath.Join(dir, "meta.json")
	if err := os.WriteFile(metaFile, []byte("{\n  \"customer\": \"c-43\"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runCLI(t, "assets", "update", id, "--metadata-file", metaFile, "--url", base, "--key", key)
	wantInfo := fmt.Sprintf("editing version %d of %s, its current one", v+1, id)
	if code != exitOK || !strings.HasPrefix(stdout, id+"  watermarked ") || !strings.Contains(stdout, fmt.Sprintf("  v%d  ", v+2)) ||
		!strings.HasSuffix(stdout, "\"renamed.jpg\"\n  metadata {\"customer\":\"c-43\"}\n") || !strings.Contains(stderr, wantInfo) {
		t.Fatalf("update without --version: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, _ = runCLI(t, "assets", "get", id, "--url", base, "--key", key)
	if code != exitOK || !strings.HasSuffix(stdout, "\n  metadata {\"customer\":\"c-43\"}\n") {
		t.Fatalf("get after update: exit %d, %q", code, stdout)
	}

	// The server's rules: metadata that is not an object, an empty name: 422 invalid_request, exit 2.
	for _, args := range [][]string{{"--metadata", "[1,2]"}, {"--name", ""}, {"--metadata", `{"a.b":1}`}} {
		code, _, stderr = runCLI(t, append([]string{"assets", "update", id, "--url", base, "--key", key}, args...)...)
		if code != exitClient || !strings.Contains(stderr, "invalid_request: ") || !strings.Contains(stderr, "(HTTP 422") {
			t.Fatalf("update %v: exit %d, stderr %q", args, code, stderr)
		}
	}
	// An unknown asset: the version read answers 404.
	code, _, stderr = runCLI(t, "assets", "update", "ast_"+strings.Repeat("0", 64), "--name", "x", "--url", base, "--key", key)
	if code != exitClient || !strings.Contains(stderr, "asset_not_found") {
		t.Fatalf("update of an unknown asset: exit %d, %q", code, stderr)
	}
	// Usage errors, before any request.
	for _, args := range [][]string{
		{},                                 // nothing to change
		{"--metadata", "{", "--name", "x"}, // not JSON
		{"--metadata", "{}", "--metadata-file", metaFile},       // two sources
		{"--name", "x", "--version", "0"},                       // not a version
		{"--metadata-file", filepath.Join(dir, "missing.json")}, // unreadable file
	} {
		code, _, stderr = runCLI(t, append([]string{"assets", "update", id, "--url", base, "--key", key}, args...)...)
		if code != exitUsage {
			t.Fatalf("update %v: exit %d, want %d; stderr %q", args, code, exitUsage, stderr)
		}
	}
	var last assetView
	cliJSON(t, &last, base, key, "assets", "get", id)
	if last.Version != v+2 || last.Name != "renamed.jpg" {
		t.Fatalf("refused edits changed the asset: %+v", last)
	}
}
