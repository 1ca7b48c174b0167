package node_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"filigrane/internal/node"
	"filigrane/internal/whsign"
)

// TestBatchWebhookEvents: a batch naming an enabled endpoint of the organization sends exactly one signed
// watermark.batch.completed when it completes (the batch without its items: counts, credits, links), a
// cancelled one exactly one watermark.batch.cancelled, and a batch without webhook sends nothing. Further
// sweeps send nothing again. An unknown endpoint is refused with 404 before anything is created.
func TestBatchWebhookEvents(t *testing.T) {
	t.Parallel()
	f := newBatchFixture(t, "growth", 50, func(c *node.Config) { c.AllowPrivateTargets = true })
	rc := &hookReceiver{stop: make(chan struct{})}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	defer close(rc.stop)
	ctx := context.Background()

	r := jsonCall(t, "POST", f.base+"/webhooks", f.key, map[string]any{"url": srv.URL + "/hook"})
	var ep map[string]any
	_ = json.Unmarshal(r.body, &ep)
	id, _ := ep["id"].(string)
	secret, _ := ep["signing_secret"].(string)
	if r.status != 201 || id == "" || secret == "" {
		t.Fatalf("create endpoint: %d %s", r.status, r.body)
	}
	unknown := `{"webhook_id":"wh_` + strings.Repeat("0", 32) + `","items":[` + itemsJSON([]string{"a.jpg"}, []int{100}) + `]}`
	if r := sendBatch(t, "POST", f.base+"/watermarks/batches", f.key, "wh-unknown-1", unknown); r.status != 404 || decodeProblem(t, r).Code != "webhook_not_found" {
		t.Fatalf("unknown webhook: %d %s", r.status, r.body)
	}
	if r := sendBatch(t, "GET", f.base+"/watermarks/batches", f.key, "", ""); r.status != 200 || strings.Contains(string(r.body), "batch_id") {
		t.Fatalf("a refused batch was created: %d %s", r.status, r.body)
	}

	// Completed, with webhook.
	files := map[string][]byte{"a.jpg": photo(t, 300, 300, 11), "b.jpg": photo(t, 280, 300, 12)}
	manifest := `{"webhook_id":"` + id + `","items":[{"filename":"a.jpg","data":{"n":1}},{"filename":"b.jpg","data":{"n":2}}]}`
	r = postZip(t, f, "wh-batch-done-1", zipOf(t, files, []string{"a.jpg", "b.jpg"}), manifest)
	if r.status != 202 {
		t.Fatalf("zip batch with webhook: %d %s", r.status, r.body)
	}
	done := waitBatch(t, f, decodeBatch(t, r).BatchID, "completed", "failed")
	if done.Status != "completed" {
		t.Fatalf("batch ended %s", done.Status)
	}
	// Cancelled, with webhook (one file at a time on growth: the cancel finds files not started).
	cb := zipBatchWith(t, f, "wh-batch-cancel-1", 6, id)
	if r := sendBatch(t, "POST", f.base+"/watermarks/batches/"+cb.BatchID+"/cancel", f.key, "", ""); r.status != 200 {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	if c := waitBatch(t, f, cb.BatchID, "cancelled", "completed", "failed"); c.Status != "cancelled" {
		t.Fatalf("cancelled batch ended %s", c.Status)
	}
	// No webhook.
	plain := zipBatchWith(t, f, "wh-batch-plain-1", 1, "")
	waitBatch(t, f, plain.BatchID, "completed", "failed")

	for range 3 {
		if _, _, err := f.n.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		f.clk.Advance(time.Hour)
	}
	if n := rc.count(); n != 2 {
		t.Fatalf("receiver saw %d events, want 2 (completed, cancelled)", n)
	}
	// The endpoint's delivery log lists batch events too (request_id null), and any of them can be
	// redelivered: the receiver gets the same body once more.
	dl := call(t, "GET", f.base+"/webhooks/"+id+"/deliveries", f.key, nil)
	var page struct {
		Data []struct {
			ID        string          `json:"id"`
			RequestID *string         `json:"request_id"`
			Status    string          `json:"status"`
			Attempts  int             `json:"attempts"`
			Payload   json.RawMessage `json:"payload"`
		} `json:"data"`
		NextCursor *string `json:"next_cursor"`
	}
	if err := json.Unmarshal(dl.body, &page); err != nil || dl.status != 200 || len(page.Data) != 2 || page.NextCursor != nil {
		t.Fatalf("deliveries: %d %s", dl.status, dl.body)
	}
	types := map[string]string{}
	for _, d := range page.Data {
		var ev struct{ ID, Type string }
		_ = json.Unmarshal(d.Payload, &ev)
		if d.RequestID != nil || d.Status != "delivered" || d.Attempts != 1 || ev.ID != d.ID {
			t.Fatalf("batch delivery %s", dl.body)
		}
		types[ev.Type] = d.ID
	}
	if len(types) != 2 || types["watermark.batch.cancelled"] == "" || types["watermark.batch.completed"] == "" {
		t.Fatalf("delivery log types %v", types)
	}
	if r := call(t, "GET", f.base+"/webhooks/"+id+"/deliveries?limit=1", f.key, nil); r.status != 200 || !strings.Contains(string(r.body), `"next_cursor":"`+page.Data[0].ID+`"`) {
		t.Fatalf("first page of one: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", f.base+"/webhooks/"+id+"/deliveries?limit=1&after="+page.Data[0].ID, f.key, nil); r.status != 200 ||
		!strings.Contains(string(r.body), `"id":"`+page.Data[1].ID+`"`) || !strings.Contains(string(r.body), `"next_cursor":null`) {
		t.Fatalf("second page of one: %d %s", r.status, r.body)
	}
	cancelled := types["watermark.batch.cancelled"]
	if r := call(t, "POST", f.base+"/webhooks/"+id+"/deliveries/"+cancelled+"/redeliver", f.key, nil); r.status != 202 ||
		!strings.Contains(string(r.body), `"status":"queued"`) {
		t.Fatalf("redeliver a batch event: %d %s", r.status, r.body)
	}
	if _, _, err := f.n.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.bodies) != 3 || !strings.Contains(string(rc.bodies[2]), `"id":"`+cancelled+`"`) || rc.headers[2].Get("webhook-id") != cancelled {
		t.Fatalf("receiver saw %d events after the redelivery, want 3 (the last the cancelled one again)", len(rc.bodies))
	}
	byType := map[string]map[string]any{}
	for i, b := range rc.bodies {
		get := rc.headers[i].Get
		var sec int64
		_ = json.Unmarshal([]byte(get("webhook-timestamp")), &sec)
		at := time.Unix(sec, 0)
		if whsign.VerifyStandard(secret, get, b, at) != nil || whsign.VerifyEtchv(secret, get, b, at) != nil {
			t.Fatalf("event %d does not verify: %v", i, rc.headers[i])
		}
		var ev map[string]any
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		if ev["id"] != get("X-Etchv-Event-ID") || ev["api_version"] == nil {
			t.Fatalf("event %s", b)
		}
		data, _ := ev["data"].(map[string]any)
		byType[ev["type"].(string)] = data
	}
	c := byType["watermark.batch.completed"]
	counts, _ := c["counts"].(map[string]any)
	if c == nil || c["batch_id"] != done.BatchID || c["status"] != "completed" || c["webhook_id"] != id ||
		counts["succeeded"] != float64(2) || c["credits"] == nil || c["status_url"] != "/watermarks/batches/"+done.BatchID || c["items"] != nil {
		t.Fatalf("completed event data: %v", c)
	}
	x := byType["watermark.batch.cancelled"]
	if x == nil || x["batch_id"] != cb.BatchID || x["status"] != "cancelled" || x["cancel_requested"] != true {
		t.Fatalf("cancelled event data: %v", x)
	}
}

// zipBatchWith posts a zip batch of n photos naming webhook (none when empty).
func zipBatchWith(t *testing.T, f *batchFixture, idem string, n int, webhook string) batchRes {
	t.Helper()
	files := map[string][]byte{}
	var order, items []string
	for i := 0; i < n; i++ {
		name := "w" + string(rune('a'+i)) + ".jpg"
		files[name] = photo(t, 300, 260, uint64(70+i))
		order = append(order, name)
		items = append(items, `{"filename":"`+name+`","data":{"i":`+string(rune('0'+i))+`}}`)
	}
	wh := ""
	if webhook != "" {
		wh = `"webhook_id":"` + webhook + `",`
	}
	r := postZip(t, f, idem, zipOf(t, files, order), `{`+wh+`"items":[`+strings.Join(items, ",")+`]}`)
	if r.status != 202 {
		t.Fatalf("zip batch: %d %s", r.status, r.body)
	}
	return decodeBatch(t, r)
}
