package node_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"filigrane/actors"
	"filigrane/actors/batchstate"
	"filigrane/internal/admin"
	"filigrane/internal/clock"
	"filigrane/internal/node"
	"filigrane/persistence"
)

// batchFixture is a node with one organization on a plan of `plan` holding `credits` credits.
type batchFixture struct {
	n    *node.Node
	base string
	clk  *clock.Manual
	key  string
	org  string
	dir  string
}

func newBatchFixture(t *testing.T, plan string, credits int64, tweaks ...func(*node.Config)) *batchFixture {
	t.Helper()
	f := &batchFixture{dir: t.TempDir(), clk: clock.NewManual(time.Date(2026, 5, 4, 10, 0, 30, 0, time.UTC))}
	offline(t, f.dir, f.clk, func(a admin.Admin) {
		ctx := context.Background()
		st, err := a.CreateOrg(ctx, "Batcher", plan, credits)
		if err != nil {
			t.Fatal(err)
		}
		m, err := a.AddMember(ctx, st.ID, "owner", actors.RoleOwner)
		if err != nil {
			t.Fatal(err)
		}
		f.org = st.ID
		if f.key, _, err = a.CreateKey(ctx, actors.NewKeySpec{OrgID: st.ID, MemberID: m, Scopes: actors.AllScopes()}); err != nil {
			t.Fatal(err)
		}
	})
	f.n = startNode(t, f.dir, f.clk, append([]func(*node.Config){inMemory(t)}, tweaks...)...)
	t.Cleanup(func() { stopNode(t, f.n) })
	f.base = "http://" + f.n.APIAddr()
	return f
}

type batchItemRes struct {
	Index          int     `json:"index"`
	Filename       string  `json:"filename"`
	UploadID       string  `json:"upload_id"`
	RequestID      *string `json:"request_id"`
	Status         string  `json:"status"`
	ErrorCode      *string `json:"error_code"`
	Credits        *int64  `json:"credits"`
	UploadReceived bool    `json:"upload_received"`
	ResultURL      string  `json:"result_url"`
	Upload         *struct {
		Method, URL string
		ExpiresAt   string `json:"expires_at"`
	} `json:"upload"`
}

type batchRes struct {
	BatchID         string           `json:"batch_id"`
	Status          string           `json:"status"`
	ItemCount       int              `json:"item_count"`
	CancelRequested bool             `json:"cancel_requested"`
	Counts          map[string]int   `json:"counts"`
	Credits         map[string]int64 `json:"credits"`
	ArchiveStatus   *string          `json:"archive_status"`
	ArchiveURL      string           `json:"archive_url"`
	Items           []batchItemRes   `json:"items"`
}

func sendBatch(t *testing.T, method, url, key, idem, body string) response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-API-Key", key)
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

func decodeBatch(t *testing.T, r response) batchRes {
	t.Helper()
	var b batchRes
	if err := json.Unmarshal(r.body, &b); err != nil {
		t.Fatalf("batch body %s: %v", r.body, err)
	}
	return b
}

func itemsJSON(names []string, sizes []int) string {
	var parts []string
	for i, n := range names {
		parts = append(parts, fmt.Sprintf(`{"filename":%q,"size":%d,"data":{"order":%d}}`, n, sizes[i], i))
	}
	return strings.Join(parts, ",")
}

// waitBatch polls the batch until its status is one of want (the batch runs on the node's workers).
func waitBatch(t *testing.T, f *batchFixture, id string, want ...string) batchRes {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		r := sendBatch(t, "GET", f.base+"/watermarks/batches/"+id, f.key, "", "")
		if r.status != 200 {
			t.Fatalf("GET batch: %d %s", r.status, r.body)
		}
		b := decodeBatch(t, r)
		for _, w := range want {
			if b.Status == w {
				return b
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch still %s after 90 s: %s", b.Status, r.body)
		}
		time.Sleep(100 * time.Millisecond) // polling a condition with a deadline, as a client does
	}
}

func TestBatchFromUploads(t *testing.T) {
	t.Parallel()
	f := newBatchFixture(t, "scale", 100)
	a, b := photo(t, 320, 320, 1), photo(t, 300, 280, 2)
	names, sizes := []string{"a.jpg", "b.jpg", "never.jpg"}, []int{len(a), len(b), 1000}
	url := f.base + "/watermarks/batches"

	// The whole request is checked first: one bad item, no batch.
	r := sendBatch(t, "POST", url, f.key, "", `{"items":[`+itemsJSON(names, sizes)+`]}`)
	if p := decodeProblem(t, r); r.status != 422 || p.Code != "invalid_idempotency_key" {
		t.Fatalf("no key: %d %+v", r.status, p)
	}
	r = sendBatch(t, "POST", url, f.key, "batch-key-1", `{"items":[`+itemsJSON([]string{"a.jpg", "song.mp3"}, []int{10, 10})+`]}`)
	if p := decodeProblem(t, r); r.status != 422 || p.Code != "unsupported_file_type" {
		t.Fatalf("bad item: %d %+v", r.status, p)
	}
	r = sendBatch(t, "POST", url, f.key, "batch-key-1", `{"items":[`+itemsJSON([]string{"a.jpg", "big.png"}, []int{10, 50_000_001})+`]}`)
	if p := decodeProblem(t, r); r.status != 413 || p.Code != "file_too_large" {
		t.Fatalf("oversize item: %d %+v", r.status, p)
	}
	if r := sendBatch(t, "GET", url, f.key, "", ""); r.status != 200 || !strings.Contains(string(r.body), `"data":[]`) {
		t.Fatalf("a refused request created a batch: %s", r.body)
	}

	body := `{"archive":true,"items":[` + itemsJSON(names, sizes) + `]}`
	r = sendBatch(t, "POST", url, f.key, "batch-key-1", body)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	draft := decodeBatch(t, r)
	if !strings.HasPrefix(draft.BatchID, "bat_") || len(draft.BatchID) != 36 || draft.Status != "draft" || draft.ItemCount != 3 {
		t.Fatalf("draft %+v", draft)
	}
	for i, it := range draft.Items {
		if it.Upload == nil || it.Upload.Method != "PUT" || it.UploadReceived || it.RequestID != nil || it.Status != "pending" {
			t.Fatalf("draft item %d: %+v", i, it)
		}
	}
	f.clk.Advance(time.Second)
	r = sendBatch(t, "POST", url, f.key, "batch-key-1", body)
	replay := decodeBatch(t, r)
	if r.status != 200 || replay.BatchID != draft.BatchID || replay.Items[0].Upload.URL == draft.Items[0].Upload.URL {
		t.Fatalf("replay: %d, same batch %v, fresh URL %v", r.status, replay.BatchID == draft.BatchID, replay.Items[0].Upload.URL != draft.Items[0].Upload.URL)
	}
	r = sendBatch(t, "POST", url, f.key, "batch-key-1", `{"archive":true,"items":[`+itemsJSON(names[:2], sizes[:2])+`]}`)
	if p := decodeProblem(t, r); r.status != 409 || p.Code != "idempotency_conflict" {
		t.Fatalf("other items: %d %+v", r.status, p)
	}
	// The item uploads belong to the batch: a direct request cannot use them.
	if r := putFile(t, replay.Items[0].Upload.URL, a, putOpts{}); r.status != 200 {
		t.Fatalf("PUT item 0 (fresh URL): %d %s", r.status, r.body)
	}
	if r := putFile(t, draft.Items[1].Upload.URL, b, putOpts{}); r.status != 200 {
		t.Fatalf("PUT item 1 (first URL): %d %s", r.status, r.body)
	}
	got := decodeBatch(t, sendBatch(t, "GET", url+"/"+draft.BatchID, f.key, "", ""))
	if !got.Items[0].UploadReceived || got.Items[0].Upload != nil || got.Items[2].UploadReceived || got.Items[2].Upload == nil {
		t.Fatalf("upload_received: %+v", got.Items)
	}
	if r := sendBatch(t, "GET", url+"/"+draft.BatchID+"/archive", f.key, "", ""); r.status != 409 || decodeProblem(t, r).Code != "batch_not_started" {
		t.Fatalf("archive of a draft: %d %s", r.status, r.body)
	}

	r = sendBatch(t, "POST", url+"/"+draft.BatchID+"/start", f.key, "", "")
	if r.status != 202 || decodeBatch(t, r).BatchID != draft.BatchID {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	if r := sendBatch(t, "POST", url+"/"+draft.BatchID+"/start", f.key, "", ""); r.status != 200 {
		t.Fatalf("second start: %d %s", r.status, r.body)
	}
	done := waitBatch(t, f, draft.BatchID, "completed", "failed")
	if done.Status != "completed" || done.Counts["succeeded"] != 2 || done.Counts["rejected"] != 1 || done.Credits["charged"] != 2 {
		t.Fatalf("ended: %s counts %v credits %v", done.Status, done.Counts, done.Credits)
	}
	if it := done.Items[2]; it.Status != "rejected" || it.ErrorCode == nil || *it.ErrorCode != "upload_not_received" || *it.Credits != 0 {
		t.Fatalf("item never uploaded: %+v", it)
	}
	it := done.Items[0]
	if it.Status != "succeeded" || it.RequestID == nil || *it.Credits != 1 {
		t.Fatalf("item 0: %+v", it)
	}
	if r := call(t, "GET", f.base+it.ResultURL, f.key, nil); r.status != 200 || r.header.Get("Content-Type") != "image/png" {
		t.Fatalf("item result: %d %s", r.status, r.header.Get("Content-Type"))
	}
	if *done.ArchiveStatus != "ready" {
		t.Fatalf("archive status %v", *done.ArchiveStatus)
	}
	r = sendBatch(t, "GET", f.base+done.ArchiveURL, f.key, "", "")
	if r.status != 200 || r.header.Get("Content-Type") != "application/zip" {
		t.Fatalf("archive: %d %s", r.status, r.body)
	}
	zr, err := zip.NewReader(bytes.NewReader(r.body), int64(len(r.body)))
	if err != nil {
		t.Fatal(err)
	}
	var entries []string
	for _, zf := range zr.File {
		entries = append(entries, zf.Name)
	}
	if strings.Join(entries, ",") != "000-a-watermarked.png,001-b-watermarked.png,manifest.json" {
		t.Fatalf("archive entries %v", entries)
	}
	mf, _ := zr.File[2].Open()
	var manifest struct {
		Files  []map[string]any `json:"files"`
		Failed []map[string]any `json:"failed"`
	}
	if err := json.NewDecoder(mf).Decode(&manifest); err != nil || len(manifest.Files) != 2 || len(manifest.Failed) != 1 ||
		manifest.Failed[0]["error_code"] != "upload_not_received" || manifest.Files[0]["request_id"] != *it.RequestID {
		t.Fatalf("manifest %+v (%v)", manifest, err)
	}
	// The archive is kept 24 hours.
	f.clk.Advance(24*time.Hour + time.Minute)
	if r := sendBatch(t, "GET", f.base+done.ArchiveURL, f.key, "", ""); r.status != 410 || decodeProblem(t, r).Code != "archive_expired" {
		t.Fatalf("archive after 24 h: %d %s", r.status, r.body)
	}

	// Listing: newest first, limit and the SDKs' `before`.
	r2 := sendBatch(t, "POST", url, f.key, "batch-key-2", `{"archive":true,"items":[`+itemsJSON([]string{"x.jpg"}, []int{len(a)})+`]}`)
	second := decodeBatch(t, r2)
	if r := putFile(t, second.Items[0].Upload.URL, a, putOpts{}); r.status != 200 {
		t.Fatalf("PUT the second batch's file: %d %s", r.status, r.body)
	}
	var page struct {
		Data       []batchRes `json:"data"`
		NextCursor *string    `json:"next_cursor"`
	}
	lr := sendBatch(t, "GET", url+"?limit=1", f.key, "", "")
	if err := json.Unmarshal(lr.body, &page); err != nil || len(page.Data) != 1 || page.Data[0].BatchID != second.BatchID ||
		page.NextCursor == nil || *page.NextCursor != second.BatchID || page.Data[0].Items != nil {
		t.Fatalf("page 1: %s", lr.body)
	}
	lr = sendBatch(t, "GET", url+"?limit=1&before="+*page.NextCursor, f.key, "", "")
	page.NextCursor = nil
	if err := json.Unmarshal(lr.body, &page); err != nil || len(page.Data) != 1 || page.Data[0].BatchID != draft.BatchID || page.NextCursor != nil {
		t.Fatalf("page 2: %s", lr.body)
	}
	// Parameters sent empty are not sent; a bad limit is worded as on every list.
	lr = sendBatch(t, "GET", url+"?limit=&cursor=&before=", f.key, "", "")
	page.NextCursor = nil
	if err := json.Unmarshal(lr.body, &page); err != nil || lr.status != 200 || len(page.Data) != 2 || page.NextCursor != nil {
		t.Fatalf("empty parameters: %d %s", lr.status, lr.body)
	}
	if r := sendBatch(t, "GET", url+"?limit=51", f.key, "", ""); r.status != 422 ||
		decodeProblem(t, r).Detail != "limit must be an integer from 1 to 50" {
		t.Fatalf("limit 51: %d %s", r.status, r.body)
	}
	if r := sendBatch(t, "GET", url+"?cursor=bat_"+strings.Repeat("0", 32), f.key, "", ""); r.status != 422 || decodeProblem(t, r).Code != "invalid_cursor" {
		t.Fatalf("unknown cursor: %d %s", r.status, r.body)
	}

	// A draft cancelled: at once, nothing charged; its items end rejected `cancelled` (spec 3.3 has no
	// item status cancelled, and nothing stays pending in an ended batch) and its archive `empty` (spec 3.5);
	// starting it again changes nothing.
	r = sendBatch(t, "POST", url+"/"+second.BatchID+"/cancel", f.key, "", "")
	if c := decodeBatch(t, r); r.status != 200 || c.Status != "cancelled" || !c.CancelRequested {
		t.Fatalf("cancel draft: %d %s", r.status, r.body)
	}
	c := decodeBatch(t, sendBatch(t, "GET", url+"/"+second.BatchID, f.key, "", ""))
	if len(c.Items) != 1 || c.Items[0].Status != "rejected" || c.Items[0].ErrorCode == nil || *c.Items[0].ErrorCode != "cancelled" ||
		c.Items[0].Credits == nil || *c.Items[0].Credits != 0 || c.Items[0].Upload != nil || !c.Items[0].UploadReceived ||
		c.Counts["rejected"] != 1 || c.Counts["pending"] != 0 || c.Credits["charged"] != 0 ||
		c.ArchiveStatus == nil || *c.ArchiveStatus != "empty" {
		t.Fatalf("cancelled draft: %+v", c)
	}
	if r := sendBatch(t, "POST", url+"/"+second.BatchID+"/start", f.key, "", ""); r.status != 200 || decodeBatch(t, r).Status != "cancelled" {
		t.Fatalf("start after cancel: %d %s", r.status, r.body)
	}
	// A draft not started within 24 hours expires: 410.
	r3 := sendBatch(t, "POST", url, f.key, "batch-key-3", `{"items":[`+itemsJSON([]string{"y.png"}, []int{10})+`]}`)
	third := decodeBatch(t, r3)
	f.clk.Advance(24 * time.Hour)
	if r := sendBatch(t, "POST", url+"/"+third.BatchID+"/start", f.key, "", ""); r.status != 410 || decodeProblem(t, r).Code != "batch_expired" {
		t.Fatalf("late start: %d %s", r.status, r.body)
	}
	if g := decodeBatch(t, sendBatch(t, "GET", url+"/"+third.BatchID, f.key, "", "")); g.Status != "expired" {
		t.Fatalf("expired draft reads %s", g.Status)
	}

	// Records are kept 30 days; afterwards the batch reads 404 and its key answers 409 (spec 7).
	f.clk.Advance(30 * 24 * time.Hour)
	if _, _, err := f.n.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := sendBatch(t, "GET", url+"/"+draft.BatchID, f.key, "", ""); r.status != 404 {
		t.Fatalf("batch after 30 days: %d %s", r.status, r.body)
	}
	if r := sendBatch(t, "POST", url, f.key, "batch-key-1", body); r.status != 409 || decodeProblem(t, r).Code != "idempotency_conflict" {
		t.Fatalf("key after 30 days: %d %s", r.status, r.body)
	}
	if r := sendBatch(t, "GET", url, f.key, "", ""); r.status != 200 || !strings.Contains(string(r.body), `"data":[]`) {
		t.Fatalf("list after 30 days: %s", r.body)
	}
}

func zipOf(t *testing.T, files map[string][]byte, order []string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	for _, n := range order {
		fw, err := w.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = fw.Write(files[n])
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func postZip(t *testing.T, f *batchFixture, idem string, z []byte, manifest string) response {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("manifest", manifest)
	fw, _ := mw.CreateFormFile("archive", "batch.zip")
	_, _ = fw.Write(z)
	_ = mw.Close()
	req, _ := http.NewRequest("POST", f.base+"/watermarks/batches/zip", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("X-API-Key", f.key)
	req.Header.Set("Idempotency-Key", idem)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

func TestBatchFromZip(t *testing.T) {
	t.Parallel()
	f := newBatchFixture(t, "scale", 100)
	files := map[string][]byte{"pics/one.jpg": photo(t, 300, 300, 3), "two.jpg": photo(t, 280, 300, 4), "__MACOSX/._two.jpg": []byte("fork")}
	z := zipOf(t, files, []string{"pics/one.jpg", "two.jpg", "__MACOSX/._two.jpg"})
	manifest := `{"archive":false,"items":[{"filename":"pics/one.jpg","data":{"n":1}},{"filename":"two.jpg","data":{"n":2}}]}`

	bad := `{"items":[{"filename":"pics/one.jpg","data":{"n":1}}]}` // two.jpg is in the zip but not listed
	if r := postZip(t, f, "zip-key-0001", z, bad); r.status != 422 || decodeProblem(t, r).Code != "invalid_zip" {
		t.Fatalf("unlisted member: %d %s", r.status, r.body)
	}
	r := postZip(t, f, "zip-key-0001", z, manifest)
	if r.status != 202 {
		t.Fatalf("zip batch: %d %s", r.status, r.body)
	}
	first := decodeBatch(t, r)
	if first.Status != "starting" && first.Status != "processing" {
		t.Fatalf("zip batch status %s", first.Status)
	}
	// Every file came in the zip: spec 2.4 shows such an item with upload_received true and no upload.
	if len(first.Items) != 2 || !first.Items[0].UploadReceived || !first.Items[1].UploadReceived || first.Items[0].Upload != nil {
		t.Fatalf("zip items: %s", r.body)
	}
	if r := postZip(t, f, "zip-key-0001", z, manifest); r.status != 200 || decodeBatch(t, r).BatchID != first.BatchID {
		t.Fatalf("zip replay: %d %s", r.status, r.body)
	}
	done := waitBatch(t, f, first.BatchID, "completed", "failed")
	if done.Status != "completed" || done.Counts["succeeded"] != 2 || done.Credits["charged"] != 2 {
		t.Fatalf("zip batch ended %s %v %v: %v", done.Status, done.Counts, done.Credits, done.Items)
	}
	if r := sendBatch(t, "GET", f.base+"/watermarks/batches/"+first.BatchID+"/archive", f.key, "", ""); r.status != 409 || decodeProblem(t, r).Code != "archive_not_requested" {
		t.Fatalf("archive not requested: %d %s", r.status, r.body)
	}
}

func zipBatch(t *testing.T, f *batchFixture, idem string, n int) batchRes {
	t.Helper()
	files := map[string][]byte{}
	var order, items []string
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("p%02d.jpg", i)
		files[name] = photo(t, 300, 260, uint64(40+i))
		order = append(order, name)
		items = append(items, fmt.Sprintf(`{"filename":%q,"data":{"i":%d}}`, name, i))
	}
	r := postZip(t, f, idem, zipOf(t, files, order), `{"items":[`+strings.Join(items, ",")+`]}`)
	if r.status != 202 {
		t.Fatalf("zip batch: %d %s", r.status, r.body)
	}
	return decodeBatch(t, r)
}

// TestBatchCreditsRunOut: an organization with 2 credits and a batch of 4 files: the first two run, the
// other two are rejected with insufficient_credits, and the batch still ends (completed, 2 charged).
func TestBatchCreditsRunOut(t *testing.T) {
	t.Parallel()
	f := newBatchFixture(t, "scale", 2)
	b := zipBatch(t, f, "credits-batch-1", 4)
	done := waitBatch(t, f, b.BatchID, "completed", "failed")
	if done.Status != "completed" || done.Counts["succeeded"] != 2 || done.Counts["rejected"] != 2 || done.Credits["charged"] != 2 {
		t.Fatalf("%s counts %v credits %v", done.Status, done.Counts, done.Credits)
	}
	for _, i := range []int{2, 3} {
		if it := done.Items[i]; it.Status != "rejected" || *it.ErrorCode != "insufficient_credits" || it.RequestID != nil {
			t.Fatalf("item %d: %+v", i, it)
		}
	}
}

// TestBatchCancelWhileRunning: a growth plan runs one batch file at a time (one of its two slots stays free
// for direct requests); a cancel right after the start rejects the files not started with `cancelled`,
// cancels or lets finish the running one, charges only succeeded files, and the batch ends `cancelled`. A
// cancelled file's job result answers 409 cancelled.
func TestBatchCancelWhileRunning(t *testing.T) {
	t.Parallel()
	f := newBatchFixture(t, "growth", 50)
	b := zipBatch(t, f, "cancel-batch-1", 6)
	r := sendBatch(t, "POST", f.base+"/watermarks/batches/"+b.BatchID+"/cancel", f.key, "", "")
	if c := decodeBatch(t, r); r.status != 200 || !c.CancelRequested {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	done := waitBatch(t, f, b.BatchID, "cancelled", "completed", "failed")
	if done.Status != "cancelled" || !done.CancelRequested {
		t.Fatalf("ended %s", done.Status)
	}
	var succeeded, rejected int
	for _, it := range done.Items {
		switch {
		case it.Status == "succeeded":
			succeeded++
		case it.Status == "rejected" && *it.ErrorCode == "cancelled" && it.RequestID == nil:
			rejected++
		case it.Status == "failed" && *it.ErrorCode == "cancelled":
			if r := call(t, "GET", f.base+it.ResultURL, f.key, nil); r.status != 409 || !strings.Contains(string(r.body), `"cancelled"`) {
				t.Fatalf("result of a cancelled file: %d %s", r.status, r.body)
			}
		default:
			t.Fatalf("item %d: %+v", it.Index, it)
		}
	}
	if rejected < 4 || done.Credits["charged"] != int64(succeeded) || done.Credits["reserved"] != 0 {
		t.Fatalf("rejected %d, succeeded %d, credits %v", rejected, succeeded, done.Credits)
	}
	// Cancelling an ended batch changes nothing.
	if r := sendBatch(t, "POST", f.base+"/watermarks/batches/"+b.BatchID+"/cancel", f.key, "", ""); r.status != 200 || decodeBatch(t, r).Status != "cancelled" {
		t.Fatalf("second cancel: %d %s", r.status, r.body)
	}
}

// TestBatchAssemblyResumesAfterCrash: a node that died while assembling leaves the batch record `assembling`
// (the archive is written to a fresh key and recorded only once stored). The record is put back in exactly
// that state on a stopped node's store; the restarted node's sweep resumes the batch, builds the archive and
// completes it, and no item is charged again.
func TestBatchAssemblyResumesAfterCrash(t *testing.T) {
	t.Parallel()
	f := newBatchFixture(t, "scale", 20)
	files := map[string][]byte{"a.jpg": photo(t, 300, 300, 8), "b.jpg": photo(t, 300, 280, 9)}
	r := postZip(t, f, "assemble-crash-1", zipOf(t, files, []string{"a.jpg", "b.jpg"}),
		`{"archive":true,"items":[{"filename":"a.jpg","data":{"n":1}},{"filename":"b.jpg","data":{"n":2}}]}`)
	if r.status != 202 {
		t.Fatalf("zip batch: %d %s", r.status, r.body)
	}
	id := decodeBatch(t, r).BatchID
	done := waitBatch(t, f, id, "completed", "failed")
	if done.Status != "completed" || *done.ArchiveStatus != "ready" {
		t.Fatalf("first run: %s %v", done.Status, done.ArchiveStatus)
	}
	stopNode(t, f.n)
	var chargesBefore int
	offline(t, f.dir, f.clk, func(a admin.Admin) {
		ctx := context.Background()
		it, err := a.Store.Get(ctx, []byte("batch/"+id))
		if err != nil {
			t.Fatal(err)
		}
		var rec batchstate.Record
		if err := persistence.Unmarshal(it.Value, &rec); err != nil {
			t.Fatal(err)
		}
		// The state a crash during assembly leaves: no archive recorded, no event, still started.
		rec.Status, rec.ArchiveStatus, rec.ArchiveBlobKey, rec.ArchiveSize = batchstate.StatusAssembling, batchstate.ArchiveAssembling, "", 0
		rec.ArchiveExpiresAt, rec.CompletedAt, rec.Events = time.Time{}, time.Time{}, nil
		b, err := persistence.Marshal(&rec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Store.CompareAndSet(ctx, []byte("batch/"+id), it.Version, b); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Store.CompareAndSet(ctx, []byte("batches/active/"+id), persistence.NoVersion, []byte(f.org)); err != nil {
			t.Fatal(err)
		}
		_, entries, err := a.Balance(ctx, f.org, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Kind == "charge" {
				chargesBefore++
			}
		}
	})
	f.n = startNode(t, f.dir, f.clk, inMemory(t))
	f.base = "http://" + f.n.APIAddr()
	if g := decodeBatch(t, sendBatch(t, "GET", f.base+"/watermarks/batches/"+id, f.key, "", "")); g.Status != "assembling" {
		t.Fatalf("after the restart the batch reads %s, want assembling", g.Status)
	}
	if _, _, err := f.n.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	again := waitBatch(t, f, id, "completed", "failed")
	if again.Status != "completed" || *again.ArchiveStatus != "ready" || again.Credits["charged"] != 2 {
		t.Fatalf("resumed: %s %v %v", again.Status, again.ArchiveStatus, again.Credits)
	}
	if r := sendBatch(t, "GET", f.base+again.ArchiveURL, f.key, "", ""); r.status != 200 || !bytes.HasPrefix(r.body, []byte("PK")) {
		t.Fatalf("archive after resuming: %d", r.status)
	}
	stopNode(t, f.n)
	offline(t, f.dir, f.clk, func(a admin.Admin) {
		_, entries, err := a.Balance(context.Background(), f.org, 1000)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range entries {
			if e.Kind == "charge" {
				n++
			}
		}
		if chargesBefore != 2 || n != 2 {
			t.Fatalf("charges: %d before the crash, %d after; want 2 and 2", chargesBefore, n)
		}
	})
	f.n = startNode(t, f.dir, f.clk, inMemory(t)) // the fixture's cleanup stops it
}
