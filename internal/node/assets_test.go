package node_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"filigrane/actors"
	"filigrane/internal/admin"
	"filigrane/persistence"
)

// assetView is an asset as the API shows it; pointer fields tell null from absent values apart where it matters.
type assetView struct {
	ID            string          `json:"id"`
	Name          string          `json:"name"`
	Version       int64           `json:"version"`
	Kind          string          `json:"kind"`
	ParentAssetID *string         `json:"parent_asset_id"`
	MediaType     string          `json:"media_type"`
	Format        string          `json:"format"`
	ContentType   string          `json:"content_type"`
	SizeBytes     int64           `json:"size_bytes"`
	SHA256        string          `json:"sha256"`
	RequestID     string          `json:"request_id"`
	WatermarkID   *string         `json:"watermark_id"`
	CreatedAt     string          `json:"created_at"`
	UpdatedAt     string          `json:"updated_at"`
	FileExpiresAt *string         `json:"file_expires_at"`
	FileAvailable bool            `json:"file_available"`
	DownloadURL   *string         `json:"download_url"`
	Metadata      json.RawMessage `json:"metadata"`
}

type assetList struct {
	Items      []assetView `json:"items"`
	NextCursor *string     `json:"next_cursor"`
}

// embedded is one successful sync embed: the watermarked output and its source.
type embedded struct {
	out, src, wm, requestID string
	body, input             []byte
}

// assetEmbed runs a real sync embed of a small photo and returns the assets it created.
func assetEmbed(t *testing.T, f *fixture, key string, seed uint64, data string) embedded {
	t.Helper()
	img := photo(t, 320, 320, seed)
	r := post(t, f.base+"/watermarks/images", key, "", img, data)
	if r.status != 200 {
		t.Fatalf("embed: %d %s", r.status, r.body)
	}
	e := embedded{out: r.header.Get("X-Asset-ID"), src: r.header.Get("X-Source-Asset-ID"), wm: r.header.Get("X-Watermark-ID"),
		body: r.body, input: img}
	if !actors.ValidAssetID(e.out) || !actors.ValidAssetID(e.src) || len(e.wm) != 64 {
		t.Fatalf("embed headers %v", r.header)
	}
	return e
}

// assetSend is call with a JSON body.
func assetSend(t *testing.T, method, u, key, body string) response {
	t.Helper()
	return call(t, method, u, key, strings.NewReader(body))
}

func getAsset(t *testing.T, f *fixture, key, id string) (assetView, response) {
	t.Helper()
	r := call(t, "GET", f.base+"/assets/"+id, key, nil)
	var v assetView
	if r.status == 200 {
		if err := json.Unmarshal(r.body, &v); err != nil {
			t.Fatalf("asset %s: %v", r.body, err)
		}
	}
	return v, r
}

func listAssets(t *testing.T, f *fixture, key, query string) (assetList, response) {
	t.Helper()
	r := call(t, "GET", f.base+"/assets?"+query, key, nil)
	var l assetList
	if r.status == 200 {
		if err := json.Unmarshal(r.body, &l); err != nil {
			t.Fatalf("list %s: %v", r.body, err)
		}
	}
	return l, r
}

// assetProblem asserts a problem answer with status and code.
func assetProblem(t *testing.T, what string, r response, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d, want %d: %s", what, r.status, status, r.body)
	}
	if p := decodeProblem(t, r); p.Code != code {
		t.Fatalf("%s: code %q, want %q (%s)", what, p.Code, code, p.Detail)
	}
}

// storedAsset reads the record behind the API, to check what deletion and retention did to it.
func storedAsset(t *testing.T, f *fixture, id string) *actors.Asset {
	t.Helper()
	as, _, err := actors.Assets{Store: f.n.Store()}.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("stored asset %s: %v", id, err)
	}
	return as
}

func assetBlobExists(t *testing.T, f *fixture, key string) bool {
	t.Helper()
	_, err := f.n.Blobs().Stat(context.Background(), key)
	if err != nil && !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("stat %s: %v", key, err)
	}
	return err == nil
}

func assetIndexHas(t *testing.T, f *fixture, prefix, part string) bool {
	t.Helper()
	items, err := f.n.Store().Scan(context.Background(), []byte(prefix), []byte(prefix), 10_000)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if strings.Contains(string(it.Key), part) {
			return true
		}
	}
	return false
}

// assetMemberKey restarts the fixture's node with one more member of the development organization, of role
// member, holding a key with every scope: the scopes allow deletion, the role does not.
func assetMemberKey(t *testing.T, f *fixture) string {
	t.Helper()
	stopNode(t, f.n)
	var secret string
	offline(t, f.dataDir, f.clk, func(a admin.Admin) {
		ctx := context.Background()
		m, err := a.AddMember(ctx, f.dev.OrgID, "plain member", actors.RoleMember)
		if err != nil {
			t.Fatal(err)
		}
		secret, _, err = a.CreateKey(ctx, actors.NewKeySpec{OrgID: f.dev.OrgID, MemberID: m, Scopes: actors.AllScopes()})
		if err != nil {
			t.Fatal(err)
		}
	})
	f.n = startNode(t, f.dataDir, f.clk)
	f.base = "http://" + f.n.APIAddr()
	return secret
}

func TestAssetRecordsAndGet(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	key := f.dev.Secret
	e := assetEmbed(t, f, key, 1, `{"customer":"c-1"}`)

	out, r := getAsset(t, f, key, e.out)
	if r.status != 200 {
		t.Fatalf("get output: %d %s", r.status, r.body)
	}
	sum := sha256.Sum256(e.body)
	created, err := time.Parse(time.RFC3339, out.CreatedAt)
	if err != nil || !strings.HasSuffix(out.CreatedAt, "Z") {
		t.Fatalf("created_at %q: %v", out.CreatedAt, err)
	}
	if out.ID != e.out || out.Kind != "watermarked" || out.ParentAssetID == nil || *out.ParentAssetID != e.src ||
		out.WatermarkID == nil || *out.WatermarkID != e.wm || out.MediaType != "image" || out.Format != "PNG" ||
		out.ContentType != "image/png" || out.SizeBytes != int64(len(e.body)) || out.SHA256 != hex.EncodeToString(sum[:]) ||
		!strings.HasPrefix(out.RequestID, "req_") || out.Version != 1 || out.Name != "holiday_photo-watermarked.png" ||
		!out.FileAvailable || out.DownloadURL == nil || *out.DownloadURL != "/assets/"+e.out+"/content" ||
		out.UpdatedAt != out.CreatedAt || string(out.Metadata) != "{}" {
		t.Fatalf("output asset %s", r.body)
	}
	// The development organization is on a paid plan: files stay a year.
	if out.FileExpiresAt == nil || *out.FileExpiresAt != created.Add(365*24*time.Hour).Format(time.RFC3339) {
		t.Fatalf("file_expires_at %v for created_at %s", out.FileExpiresAt, out.CreatedAt)
	}

	src, r := getAsset(t, f, key, e.src)
	inSum := sha256.Sum256(e.input)
	if r.status != 200 || src.Kind != "source" || src.ParentAssetID != nil || src.WatermarkID != nil ||
		src.Format != "JPEG" || src.ContentType != "image/jpeg" || src.SizeBytes != int64(len(e.input)) ||
		src.SHA256 != hex.EncodeToString(inSum[:]) || src.RequestID != out.RequestID || src.Name != "holiday_photo.jpg" {
		t.Fatalf("source asset %d %s", r.status, r.body)
	}
	// null, not absent, for a source's parent and watermark.
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &raw); err != nil {
		t.Fatal(err)
	}
	if string(raw["watermark_id"]) != "null" || string(raw["parent_asset_id"]) != "null" {
		t.Fatalf("source nulls: %s", r.body)
	}

	r = call(t, "GET", f.base+"/assets/"+e.out+"?include_metadata=false", key, nil)
	raw = nil
	if err := json.Unmarshal(r.body, &raw); err != nil || r.status != 200 {
		t.Fatalf("without metadata: %d %s", r.status, r.body)
	}
	if _, ok := raw["metadata"]; ok {
		t.Fatalf("include_metadata=false still shows metadata: %s", r.body)
	}
	assetProblem(t, "bad include_metadata", call(t, "GET", f.base+"/assets/"+e.out+"?include_metadata=perhaps", key, nil), 422, "invalid_request")

	// Unknown, malformed and other organizations' ids are all the same 404.
	assetProblem(t, "unknown", call(t, "GET", f.base+"/assets/ast_00000000000000000000000000000000", key, nil), 404, "asset_not_found")
	assetProblem(t, "malformed id", call(t, "GET", f.base+"/assets/not-an-asset", key, nil), 404, "asset_not_found")
	assetProblem(t, "other organization", call(t, "GET", f.base+"/assets/"+e.out, f.keyA, nil), 404, "asset_not_found")
	assetProblem(t, "other organization content", call(t, "GET", f.base+"/assets/"+e.out+"/content", f.keyA, nil), 404, "asset_not_found")
	// Scopes: a detect-only key reads no assets; an assets:read-only key cannot edit or delete.
	assetProblem(t, "detect-only key", call(t, "GET", f.base+"/assets", f.keyB, nil), 403, "insufficient_scope")
	assetProblem(t, "read-only key patches", assetSend(t, "PATCH", f.base+"/assets/"+e.out, f.keyNoScopes, `{"version":1,"name":"x"}`), 403, "insufficient_scope")
	assetProblem(t, "read-only key deletes", call(t, "DELETE", f.base+"/assets/"+e.out, f.keyNoScopes, nil), 403, "insufficient_scope")
	assetProblem(t, "read-only key bulk deletes", assetSend(t, "POST", f.base+"/assets/bulk-delete", f.keyNoScopes, `{"asset_ids":["`+e.out+`"]}`), 403, "insufficient_scope")
	if r := call(t, "GET", f.base+"/assets/"+e.out, "", nil); r.status != 401 {
		t.Fatalf("no key: %d", r.status)
	}

	// A trial organization keeps files 30 days.
	ea := assetEmbed(t, f, f.keyA, 2, `{"customer":"c-2"}`)
	a, r := getAsset(t, f, f.keyA, ea.out)
	createdA, _ := time.Parse(time.RFC3339, a.CreatedAt)
	if r.status != 200 || a.FileExpiresAt == nil || *a.FileExpiresAt != createdA.Add(30*24*time.Hour).Format(time.RFC3339) {
		t.Fatalf("trial asset %d %s", r.status, r.body)
	}
}

func TestAssetContentAndRanges(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	key := f.dev.Secret
	e := assetEmbed(t, f, key, 3, `{"c":3}`)
	size := len(e.body)
	base := f.base + "/assets/" + e.out + "/content"
	get := func(hdr ...string) response {
		t.Helper()
		req, _ := http.NewRequest("GET", base, nil)
		req.Header.Set("X-API-Key", key)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return response{status: res.StatusCode, header: res.Header, body: b}
	}

	r := get()
	if r.status != 200 || !bytes.Equal(r.body, e.body) || r.header.Get("Content-Type") != "image/png" ||
		r.header.Get("Content-Disposition") != `attachment; filename="holiday_photo-watermarked.png"` ||
		r.header.Get("Accept-Ranges") != "bytes" || r.header.Get("Content-Length") != fmt.Sprint(size) {
		t.Fatalf("whole download: %d %v", r.status, r.header)
	}
	etag := r.header.Get("ETag")
	if src := call(t, "GET", f.base+"/assets/"+e.src+"/content", key, nil); src.status != 200 || !bytes.Equal(src.body, e.input) ||
		src.header.Get("Content-Type") != "image/jpeg" {
		t.Fatalf("source download: %d %v", src.status, src.header)
	}

	ranges := []struct {
		h          string
		start, end int
	}{
		{"bytes=0-99", 0, 99},
		{"bytes=100-", 100, size - 1},
		{"bytes=-10", size - 10, size - 1},
		{fmt.Sprintf("bytes=%d-%d", size-5, size+1000), size - 5, size - 1},
	}
	for _, c := range ranges {
		r := get("Range", c.h)
		want := fmt.Sprintf("bytes %d-%d/%d", c.start, c.end, size)
		if r.status != 206 || r.header.Get("Content-Range") != want || !bytes.Equal(r.body, e.body[c.start:c.end+1]) {
			t.Fatalf("%s: %d Content-Range %q (want %q), %d bytes", c.h, r.status, r.header.Get("Content-Range"), want, len(r.body))
		}
	}
	for _, h := range []string{fmt.Sprintf("bytes=%d-", size), "bytes=9-3", "bytes=abc", "bytes=-0"} {
		r := get("Range", h)
		assetProblem(t, h, r, 416, "range_not_satisfiable")
		if r.header.Get("Content-Range") != fmt.Sprintf("bytes */%d", size) {
			t.Fatalf("%s: Content-Range %q", h, r.header.Get("Content-Range"))
		}
	}
	// Several ranges, or a partial copy of another version of the file: the whole file.
	if r := get("Range", "bytes=0-1,5-6"); r.status != 200 || len(r.body) != size {
		t.Fatalf("multi-range: %d", r.status)
	}
	if r := get("Range", "bytes=0-9", "If-Range", `"other"`); r.status != 200 || len(r.body) != size {
		t.Fatalf("stale If-Range: %d", r.status)
	}
	if r := get("Range", "bytes=0-9", "If-Range", etag); r.status != 206 || len(r.body) != 10 {
		t.Fatalf("current If-Range: %d", r.status)
	}

	// HEAD answers the headers of the download without its body.
	if h := call(t, "HEAD", base, key, nil); h.status != 200 || h.header.Get("Content-Length") != fmt.Sprint(size) || len(h.body) != 0 {
		t.Fatalf("HEAD: %d %v", h.status, h.header)
	}

	// A renamed asset downloads under its new name, reduced to safe characters.
	if r := assetSend(t, "PATCH", f.base+"/assets/"+e.out, key, `{"version":1,"name":"Été/../\"quoted\" photo.png"}`); r.status != 200 {
		t.Fatalf("rename: %d %s", r.status, r.body)
	}
	if cd := get().header.Get("Content-Disposition"); cd != `attachment; filename="t_.._quoted_photo.png"` {
		t.Fatalf("renamed Content-Disposition %q", cd)
	}
}

func TestAssetListPagingFiltersAndCursors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	key := f.dev.Secret
	// Six embeds, a second apart so that newest-first order is by time; two watermark ids.
	var es []embedded
	for i := 0; i < 6; i++ {
		data := `{"campaign":"x"}`
		if i%2 == 1 {
			data = `{"campaign":"y"}`
		}
		es = append(es, assetEmbed(t, f, key, uint64(10+i), data))
		f.clk.Advance(time.Second)
	}
	other := assetEmbed(t, f, f.keyA, 99, `{"campaign":"x"}`) // same watermark id, another organization
	if other.wm != es[0].wm {
		t.Fatal("same data gave another watermark id")
	}

	// Walk every page of a query and return the ids in order; every page but the last is full.
	walk := func(k, query string, limit int) []string {
		t.Helper()
		var ids []string
		cursor := ""
		for pages := 0; ; pages++ {
			q := query + "&limit=" + fmt.Sprint(limit)
			if cursor != "" {
				q += "&cursor=" + url.QueryEscape(cursor)
			}
			l, r := listAssets(t, f, k, q)
			if r.status != 200 {
				t.Fatalf("list %s: %d %s", q, r.status, r.body)
			}
			if bytes.Contains(r.body, []byte(`"metadata"`)) {
				t.Fatalf("list items carry metadata: %s", r.body)
			}
			for _, it := range l.Items {
				ids = append(ids, it.ID)
			}
			if l.NextCursor == nil {
				return ids
			}
			if len(l.Items) != limit || pages > 20 {
				t.Fatalf("page %d of %s: %d items with a next cursor", pages, query, len(l.Items))
			}
			cursor = *l.NextCursor
		}
	}
	var newestFirst, sources, outputsX []string
	for i := len(es) - 1; i >= 0; i-- {
		// Source and output of one embed share their creation time; ties go by id.
		pair := []string{es[i].out, es[i].src}
		if es[i].src < es[i].out {
			pair = []string{es[i].src, es[i].out}
		}
		newestFirst = append(newestFirst, pair...)
		sources = append(sources, es[i].src)
		if i%2 == 0 {
			outputsX = append(outputsX, es[i].out)
		}
	}
	check := func(what string, got, want []string) {
		t.Helper()
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("%s:\n got  %v\n want %v", what, got, want)
		}
	}
	check("all, 5 per page", walk(key, "", 5), newestFirst)
	check("all, 12 per page", walk(key, "", 12), newestFirst)
	check("all, 100 per page", walk(key, "", 100), newestFirst)
	check("sources", walk(key, "kind=source", 2), sources)
	check("images", walk(key, "media_type=image", 7), newestFirst)
	check("watermark x", walk(key, "watermark_id="+es[0].wm, 2), outputsX)
	check("watermark x, upper case", walk(key, "watermark_id="+strings.ToUpper(es[0].wm)+"&kind=watermarked", 1), outputsX)
	check("watermark x sources", walk(key, "watermark_id="+es[0].wm+"&kind=source", 2), nil)
	check("videos", walk(key, "media_type=video", 3), nil)
	check("other organization", walk(f.keyA, "", 25), []string{min(other.out, other.src), max(other.out, other.src)})
	check("other organization, watermark x", walk(f.keyA, "watermark_id="+es[0].wm, 25), []string{other.out})
	if l, r := listAssets(t, f, key, ""); r.status != 200 || len(l.Items) != 12 || l.NextCursor != nil {
		t.Fatalf("default page: %d %d items", r.status, len(l.Items))
	}
	// A parameter sent empty is not sent (what clients write for an unset value), on every list endpoint.
	for _, q := range []string{"limit=", "kind=", "media_type=", "watermark_id=", "cursor=", "limit=&kind=&media_type=&watermark_id=&cursor="} {
		if l, r := listAssets(t, f, key, q); r.status != 200 || len(l.Items) != 12 || l.NextCursor != nil {
			t.Fatalf("%s: %d %s, want the default page", q, r.status, r.body)
		}
	}
	if l, r := listAssets(t, f, key, "kind=source&limit=2&cursor="); r.status != 200 || len(l.Items) != 2 || l.Items[0].ID != sources[0] {
		t.Fatalf("sources, empty cursor: %d %s, want the first page", r.status, r.body)
	}

	// A cursor works only with the filters and organization that produced it.
	l, _ := listAssets(t, f, key, "kind=source&limit=2")
	if l.NextCursor == nil {
		t.Fatal("no cursor")
	}
	cur := url.QueryEscape(*l.NextCursor)
	if l2, r := listAssets(t, f, key, "kind=source&limit=3&cursor="+cur); r.status != 200 || len(l2.Items) != 3 || l2.Items[0].ID != sources[2] {
		t.Fatalf("same filters, other limit: %d %s", r.status, r.body)
	}
	for _, q := range []string{"kind=watermarked&cursor=" + cur, "cursor=" + cur, "kind=source&media_type=image&cursor=" + cur,
		"kind=source&cursor=" + cur + "x", "kind=source&cursor=bm90IGEgY3Vyc29y"} {
		_, r := listAssets(t, f, key, q)
		assetProblem(t, q, r, 422, "invalid_cursor")
	}
	_, r := listAssets(t, f, f.keyA, "kind=source&cursor="+cur)
	assetProblem(t, "cursor of another organization", r, 422, "invalid_cursor")

	for _, q := range []string{"limit=0", "limit=101", "limit=ten", "limit=1.5", "kind=both", "media_type=audio",
		"watermark_id=abc", "watermark_id=" + strings.Repeat("g", 64), "watermark_id=" + es[0].wm + "0"} {
		_, r := listAssets(t, f, key, q)
		assetProblem(t, q, r, 422, "invalid_request")
		if p := decodeProblem(t, r); strings.HasPrefix(q, "limit=") && p.Detail != "limit must be an integer from 1 to 100" {
			t.Fatalf("%s: detail %q", q, p.Detail)
		}
	}

	// Deleted assets leave the listing at once.
	if r := call(t, "DELETE", f.base+"/assets/"+es[5].out, key, nil); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	var left []string
	for _, id := range newestFirst {
		if id != es[5].out {
			left = append(left, id)
		}
	}
	check("after a delete", walk(key, "", 4), left)
}

func TestAssetPatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	key := f.dev.Secret
	e := assetEmbed(t, f, key, 4, `{"c":4}`)
	u := f.base + "/assets/" + e.out
	before, _ := getAsset(t, f, key, e.out)

	f.clk.Advance(90 * time.Second)
	r := assetSend(t, "PATCH", u, key, `{"version":1,"name":"Summer campaign – hero"}`)
	var v assetView
	if err := json.Unmarshal(r.body, &v); err != nil || r.status != 200 {
		t.Fatalf("rename: %d %s", r.status, r.body)
	}
	if v.Version != 2 || v.Name != "Summer campaign – hero" || v.UpdatedAt == before.UpdatedAt || v.CreatedAt != before.CreatedAt ||
		string(v.Metadata) != "{}" {
		t.Fatalf("renamed %s", r.body)
	}
	meta := `{"client":{"id":9223372036854775807,"tags":["a","b"],"ratio":0.25},"ok":true,"none":null}`
	r = assetSend(t, "PATCH", u, key, `{"version":2,"metadata":`+meta+`}`)
	if r.status != 200 {
		t.Fatalf("metadata: %d %s", r.status, r.body)
	}
	got, _ := getAsset(t, f, key, e.out)
	var want, have any
	json.Unmarshal([]byte(meta), &want)
	json.Unmarshal(got.Metadata, &have)
	if got.Version != 3 || got.Name != "Summer campaign – hero" || fmt.Sprint(want) != fmt.Sprint(have) ||
		!bytes.Contains(got.Metadata, []byte("9223372036854775807")) {
		t.Fatalf("after metadata: %+v %s", got, got.Metadata)
	}
	if l, _ := listAssets(t, f, key, ""); len(l.Items) != 2 || l.Items[0].Metadata != nil || l.Items[1].Metadata != nil {
		t.Fatalf("list shows metadata")
	}
	// Both at once, and an empty object clears the metadata.
	if r := assetSend(t, "PATCH", u, key, `{"version":3,"name":"n","metadata":{}}`); r.status != 200 {
		t.Fatalf("both: %d %s", r.status, r.body)
	}
	if got, _ := getAsset(t, f, key, e.out); got.Version != 4 || got.Name != "n" || string(got.Metadata) != "{}" {
		t.Fatalf("after both: %+v", got)
	}

	assetProblem(t, "stale version", assetSend(t, "PATCH", u, key, `{"version":3,"name":"late"}`), 409, "asset_version_conflict")
	assetProblem(t, "future version", assetSend(t, "PATCH", u, key, `{"version":5,"name":"early"}`), 409, "asset_version_conflict")
	bad := []struct {
		body   string
		status int
		code   string
	}{
		{`{"name":"no version"}`, 422, "invalid_request"},
		{`{"version":4}`, 422, "invalid_request"},
		{`{"version":4,"name":"x","color":"red"}`, 422, "invalid_request"},
		{`{"version":4,"name":""}`, 422, "invalid_request"},
		{`{"version":4,"name":"` + strings.Repeat("x", 201) + `"}`, 422, "invalid_request"},
		{`{"version":4,"name":"tab\there"}`, 422, "invalid_request"},
		{`{"version":4,"metadata":"text"}`, 422, "invalid_request"},
		{`{"version":4,"metadata":{"a.b":1}}`, 422, "invalid_request"},
		{`{"version":4,"metadata":{"$where":1}}`, 422, "invalid_request"},
		{`{"version":4,"metadata":{"` + strings.Repeat("k", 101) + `":1}}`, 422, "invalid_request"},
		{`{"version":4,"metadata":` + strings.Repeat(`{"a":`, 9) + `1` + strings.Repeat(`}`, 9) + `}`, 422, "invalid_request"},
		{`{"version":4,"metadata":{"big":"` + strings.Repeat("x", 8200) + `"}}`, 422, "invalid_request"},
		{`{"version":4,"metadata":{"n":9223372036854775808}}`, 422, "invalid_request"},
		{`{"version":4,"metadata":{"n":1e999}}`, 422, "invalid_request"},
		{`{"version":4,"name":"x"`, 400, "malformed_json"},
		{`not json`, 400, "malformed_json"},
	}
	for _, c := range bad {
		assetProblem(t, c.body[:min(len(c.body), 60)], assetSend(t, "PATCH", u, key, c.body), c.status, c.code)
	}
	// A right-to-left override in a name is refused in the words every refused name uses (internal/hiddenchar).
	if r := assetSend(t, "PATCH", u, key, `{"version":4,"name":"hero\u202egnp.exe"}`); r.status != 422 ||
		!strings.Contains(decodeProblem(t, r).Detail, "U+202E, a character that shows nothing or reorders the text around it") {
		t.Fatalf("a name with U+202E: %d %s", r.status, r.body)
	}
	// Eight levels are fine.
	if r := assetSend(t, "PATCH", u, key, `{"version":4,"metadata":`+strings.Repeat(`{"a":`, 8)+`1`+strings.Repeat(`}`, 8)+`}`); r.status != 200 {
		t.Fatalf("8 levels: %d %s", r.status, r.body)
	}
	// Body limits and type.
	huge := `{"version":5,"name":"x","metadata":{"k":"` + strings.Repeat("x", 70<<10) + `"}}`
	assetProblem(t, "65 KB body", assetSend(t, "PATCH", u, key, huge), 413, "payload_too_large")
	// The same without a Content-Length: the body streams in chunks and is cut at the limit.
	chunked, _ := http.NewRequest("PATCH", u, io.MultiReader(strings.NewReader(huge)))
	chunked.Header.Set("X-API-Key", key)
	res, err := http.DefaultClient.Do(chunked)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 413 {
		t.Fatalf("chunked 70 KB body: %d", res.StatusCode)
	}
	req, _ := http.NewRequest("PATCH", u, strings.NewReader(`{"version":5,"name":"x"}`))
	req.Header.Set("X-API-Key", key)
	req.Header.Set("Content-Type", "text/plain")
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 415 {
		t.Fatalf("text/plain: %d", res.StatusCode)
	}
	// Nothing above changed the record.
	if got, _ := getAsset(t, f, key, e.out); got.Version != 5 || got.Name != "n" {
		t.Fatalf("refused edits changed the asset: %+v", got)
	}
	assetProblem(t, "other organization", assetSend(t, "PATCH", u, f.keyA, `{"version":5,"name":"mine"}`), 404, "asset_not_found")
	assetProblem(t, "unknown", assetSend(t, "PATCH", f.base+"/assets/ast_00000000000000000000000000000000", key, `{"version":1,"name":"x"}`), 404, "asset_not_found")
}

func TestAssetConcurrentPatchOneWins(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	key := f.dev.Secret
	e := assetEmbed(t, f, key, 5, `{"c":5}`)
	const n = 10
	statuses := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			req, _ := http.NewRequest("PATCH", f.base+"/assets/"+e.out, strings.NewReader(fmt.Sprintf(`{"version":1,"name":"writer %d"}`, i)))
			req.Header.Set("X-API-Key", key)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			statuses[i] = res.StatusCode
		}(i)
	}
	close(start)
	wg.Wait()
	won, lost, winner := 0, 0, -1
	for i, s := range statuses {
		if errs[i] != nil {
			t.Fatalf("writer %d: %v", i, errs[i])
		}
		switch s {
		case 200:
			won++
			winner = i
		case 409:
			lost++
		default:
			t.Fatalf("writer %d: status %d", i, s)
		}
	}
	if won != 1 || lost != n-1 {
		t.Fatalf("%d won, %d lost; want 1 and %d", won, lost, n-1)
	}
	if got, _ := getAsset(t, f, key, e.out); got.Version != 2 || got.Name != fmt.Sprintf("writer %d", winner) {
		t.Fatalf("after the race: version %d name %q, winner %d", got.Version, got.Name, winner)
	}
}

func TestAssetDelete(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	key := f.dev.Secret
	idem := "asset-delete-replay"
	img := photo(t, 320, 320, 6)
	first := post(t, f.base+"/watermarks/images", key, idem, img, `{"c":6}`)
	if first.status != 200 {
		t.Fatalf("embed: %d %s", first.status, first.body)
	}
	out, src := first.header.Get("X-Asset-ID"), first.header.Get("X-Source-Asset-ID")
	if r := assetSend(t, "PATCH", f.base+"/assets/"+out, key, `{"version":1,"metadata":{"secret":"x"}}`); r.status != 200 {
		t.Fatalf("annotate: %d", r.status)
	}
	outKey, srcKey := storedAsset(t, f, out).BlobKey, storedAsset(t, f, src).BlobKey
	// The job's result is readable until the output is deleted.
	rc := decodeReceipt(t, post(t, f.base+"/watermarks/images/async", key, idem, img, `{"c":6}`))
	if r := call(t, "GET", f.base+rc.ResultURL, key, nil); r.status != 200 {
		t.Fatalf("result before delete: %d", r.status)
	}

	// A member's key has the scope but not the role; other organizations and unknown ids are 404.
	plain := assetMemberKey(t, f)
	assetProblem(t, "member role", call(t, "DELETE", f.base+"/assets/"+out, plain, nil), 403, "role_forbidden")
	assetProblem(t, "member role bulk", assetSend(t, "POST", f.base+"/assets/bulk-delete", plain, `{"asset_ids":["`+out+`"]}`), 403, "role_forbidden")
	assetProblem(t, "other organization", call(t, "DELETE", f.base+"/assets/"+out, f.keyA, nil), 404, "asset_not_found")
	assetProblem(t, "unknown", call(t, "DELETE", f.base+"/assets/ast_00000000000000000000000000000000", key, nil), 404, "asset_not_found")
	if _, r := getAsset(t, f, key, out); r.status != 200 {
		t.Fatalf("refused deletes deleted: %d", r.status)
	}

	balanceBefore, _ := balance(t, f, f.dev.OrgID)
	// Deleted a minute after the job completed, so that the deletion time differs from every recorded time.
	f.clk.Advance(time.Minute)
	deletedAt := f.clk.Now().UTC().Format(time.RFC3339)
	if rc.ResultExpiresAt == nil || *rc.ResultExpiresAt <= deletedAt {
		t.Fatalf("receipt before delete: result_expires_at %v, want after %s", rc.ResultExpiresAt, deletedAt)
	}
	if r := call(t, "DELETE", f.base+"/assets/"+out, key, nil); r.status != 204 || len(r.body) != 0 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	// The job's receipt agrees with its result's 410: the result ended at the deletion (it used to show the
	// 24 h expiry still ahead); the asset id stays, as the job's history.
	gone := decodeReceipt(t, call(t, "GET", f.base+rc.StatusURL, key, nil))
	if gone.Status != "succeeded" || gone.ResultExpiresAt == nil || *gone.ResultExpiresAt != deletedAt || gone.AssetID == nil || *gone.AssetID != out {
		t.Fatalf("receipt after delete: %s, want result_expires_at %s and asset_id %s", gone.raw, deletedAt, out)
	}
	// Reads, downloads and edits stop at once.
	assetProblem(t, "get deleted", call(t, "GET", f.base+"/assets/"+out, key, nil), 404, "asset_not_found")
	assetProblem(t, "download deleted", call(t, "GET", f.base+"/assets/"+out+"/content", key, nil), 404, "asset_not_found")
	assetProblem(t, "patch deleted", assetSend(t, "PATCH", f.base+"/assets/"+out, key, `{"version":2,"name":"x"}`), 404, "asset_not_found")
	// Repeating is safe.
	if r := call(t, "DELETE", f.base+"/assets/"+out, key, nil); r.status != 204 {
		t.Fatalf("repeat delete: %d %s", r.status, r.body)
	}
	// The job result and a replay of the request answer 410, and nothing is charged.
	assetProblem(t, "result of deleted output", call(t, "GET", f.base+rc.ResultURL, key, nil), 410, "result_gone")
	assetProblem(t, "replay of deleted output", post(t, f.base+"/watermarks/images", key, idem, img, `{"c":6}`), 410, "result_gone")
	if after, held := balance(t, f, f.dev.OrgID); after != balanceBefore || held != 0 {
		t.Fatalf("balance %d (held %d) after replays, was %d", after, held, balanceBefore)
	}
	// The record stays, cleared; its file and listing entries are gone.
	as := storedAsset(t, f, out)
	if as.DeletedAt == nil || as.Name != "" || as.Metadata != nil {
		t.Fatalf("deleted record %+v", as)
	}
	if assetBlobExists(t, f, outKey) || assetIndexHas(t, f, "assetidx/", out) || assetIndexHas(t, f, "assetwm/", out) || assetIndexHas(t, f, "assetexp/", out) {
		t.Fatal("deleted output left its file or index entries")
	}
	// The source is deleted separately.
	if r := call(t, "GET", f.base+"/assets/"+src+"/content", key, nil); r.status != 200 || !bytes.Equal(r.body, img) {
		t.Fatalf("source after output delete: %d", r.status)
	}
	if r := call(t, "DELETE", f.base+"/assets/"+src, key, nil); r.status != 204 {
		t.Fatalf("delete source: %d", r.status)
	}
	assetProblem(t, "download deleted source", call(t, "GET", f.base+"/assets/"+src+"/content", key, nil), 404, "asset_not_found")
	if assetBlobExists(t, f, srcKey) {
		t.Fatal("deleted source kept its file")
	}
	if l, _ := listAssets(t, f, key, ""); len(l.Items) != 0 {
		t.Fatalf("list after deletes: %+v", l.Items)
	}
}

func TestAssetBulkDelete(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	key := f.dev.Secret
	var ids []string
	for i := 0; i < 3; i++ {
		e := assetEmbed(t, f, key, uint64(20+i), fmt.Sprintf(`{"c":%d}`, i))
		ids = append(ids, e.out, e.src)
	}
	foreign := assetEmbed(t, f, f.keyA, 30, `{"c":30}`)
	u := f.base + "/assets/bulk-delete"
	quoted := func(ids ...string) string {
		b, _ := json.Marshal(map[string]any{"asset_ids": ids})
		return string(b)
	}
	var fifty []string
	for i := 0; i < 51; i++ {
		fifty = append(fifty, ids[0])
	}
	bad := []struct {
		body   string
		status int
		code   string
	}{
		{`{}`, 422, "invalid_request"},
		{`{"asset_ids":[]}`, 422, "invalid_request"},
		{quoted(fifty...), 422, "invalid_request"},
		{`{"asset_ids":[1]}`, 422, "invalid_request"},
		{`{"asset_ids":[""]}`, 422, "invalid_request"},
		{`{"asset_ids":"` + ids[0] + `"}`, 422, "invalid_request"},
		{`{"asset_ids":["` + ids[0] + `"],"force":true}`, 422, "invalid_request"},
		{`{"asset_ids":[`, 400, "malformed_json"},
		// All or nothing: one unknown or foreign id and nothing is deleted.
		{quoted(ids[0], ids[1], "ast_00000000000000000000000000000000"), 404, "asset_not_found"},
		{quoted(ids[0], "not-an-id"), 404, "asset_not_found"},
		{quoted(ids[0], ids[1], foreign.out), 404, "asset_not_found"},
	}
	for _, c := range bad {
		assetProblem(t, c.body[:min(len(c.body), 80)], assetSend(t, "POST", u, key, c.body), c.status, c.code)
	}
	for _, id := range append(ids, foreign.out) {
		k := key
		if id == foreign.out {
			k = f.keyA
		}
		if _, r := getAsset(t, f, k, id); r.status != 200 {
			t.Fatalf("refused bulk delete deleted %s: %d", id, r.status)
		}
	}

	// Delete one first: an already deleted id of one's own counts as present, as does a repeated id.
	if r := call(t, "DELETE", f.base+"/assets/"+ids[0], key, nil); r.status != 204 {
		t.Fatalf("single delete: %d", r.status)
	}
	if r := assetSend(t, "POST", u, key, quoted(append(ids[:4:4], ids[1])...)); r.status != 204 {
		t.Fatalf("bulk delete: %d %s", r.status, r.body)
	}
	for i, id := range ids {
		_, r := getAsset(t, f, key, id)
		if (i < 4) != (r.status == 404) {
			t.Fatalf("asset %d after bulk delete: %d", i, r.status)
		}
	}
	if l, _ := listAssets(t, f, key, ""); len(l.Items) != 2 {
		t.Fatalf("%d assets left, want 2", len(l.Items))
	}
	if _, r := getAsset(t, f, f.keyA, foreign.out); r.status != 200 {
		t.Fatalf("foreign asset: %d", r.status)
	}
}

func TestAssetFileRetention(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	trial := assetEmbed(t, f, f.keyA, 40, `{"c":40}`) // 30 days
	paid := assetEmbed(t, f, f.dev.Secret, 41, `{"c":41}`)
	trialKey, paidKey := storedAsset(t, f, trial.out).BlobKey, storedAsset(t, f, paid.out).BlobKey

	// A day before the end nothing changes, and a sweep deletes nothing.
	f.clk.Advance(29 * 24 * time.Hour)
	if _, purged, err := f.n.Sweep(context.Background()); err != nil || purged != 0 {
		t.Fatalf("early sweep: purged %d, %v", purged, err)
	}
	if v, _ := getAsset(t, f, f.keyA, trial.out); !v.FileAvailable || v.DownloadURL == nil {
		t.Fatalf("trial file unavailable before its end: %+v", v)
	}

	f.clk.Advance(24*time.Hour + time.Minute)
	// Past the end the file is unavailable at once, before any sweep; the record stays.
	v, r := getAsset(t, f, f.keyA, trial.out)
	if r.status != 200 || v.FileAvailable || v.DownloadURL != nil || v.FileExpiresAt == nil {
		t.Fatalf("expired asset: %d %s", r.status, r.body)
	}
	var raw map[string]json.RawMessage
	json.Unmarshal(r.body, &raw)
	if string(raw["download_url"]) != "null" {
		t.Fatalf("download_url %s", raw["download_url"])
	}
	assetProblem(t, "expired download", call(t, "GET", f.base+"/assets/"+trial.out+"/content", f.keyA, nil), 410, "asset_file_expired")
	if l, _ := listAssets(t, f, f.keyA, ""); len(l.Items) != 2 || l.Items[0].FileAvailable || l.Items[1].FileAvailable {
		t.Fatalf("expired assets in the list: %+v", l.Items)
	}
	if !assetBlobExists(t, f, trialKey) {
		t.Fatal("file gone before the sweep")
	}

	// The sweep deletes the trial organization's two files and keeps the paid one's.
	if _, purged, err := f.n.Sweep(context.Background()); err != nil || purged != 2 {
		t.Fatalf("sweep: purged %d, %v", purged, err)
	}
	if assetBlobExists(t, f, trialKey) || assetBlobExists(t, f, storedAsset(t, f, trial.src).BlobKey) {
		t.Fatal("expired files survived the sweep")
	}
	if !assetBlobExists(t, f, paidKey) {
		t.Fatal("the sweep deleted a file within its year")
	}
	if v, _ := getAsset(t, f, f.dev.Secret, paid.out); !v.FileAvailable {
		t.Fatal("paid file unavailable after 30 days")
	}
	if _, purged, err := f.n.Sweep(context.Background()); err != nil || purged != 0 {
		t.Fatalf("second sweep: purged %d, %v", purged, err)
	}
	// The expired record can still be renamed and deleted.
	if r := assetSend(t, "PATCH", f.base+"/assets/"+trial.out, f.keyA, `{"version":1,"name":"kept"}`); r.status != 200 {
		t.Fatalf("rename expired: %d %s", r.status, r.body)
	}
	if r := call(t, "DELETE", f.base+"/assets/"+trial.out, f.keyA, nil); r.status != 204 {
		t.Fatalf("delete expired: %d %s", r.status, r.body)
	}

	// A year after completion the paid files go too.
	f.clk.Advance(336 * 24 * time.Hour)
	if _, purged, err := f.n.Sweep(context.Background()); err != nil || purged != 2 {
		t.Fatalf("sweep after a year: purged %d, %v", purged, err)
	}
	if assetBlobExists(t, f, paidKey) {
		t.Fatal("paid file kept past a year")
	}
	assetProblem(t, "expired paid download", call(t, "GET", f.base+"/assets/"+paid.out+"/content", f.dev.Secret, nil), 410, "asset_file_expired")
}
