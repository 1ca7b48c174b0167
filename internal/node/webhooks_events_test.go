package node_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"filigrane/internal/node"
)

// TestJobEventsOncePerJob (issue 16 item 2, spec 6.2): every async job that named an endpoint sends exactly
// one final event: an embed's watermark.embed.succeeded (watermark id), a detection's
// watermark.detect.succeeded carrying its result (watermarked, confidence, watermark_id, units), a broken
// file's watermark.embed.failed (error code, no watermark id). Result downloads, an Idempotency-Key replay
// and later sweeps send nothing more. An endpoint whose filter leaves a type out receives nothing and lists
// nothing.
func TestJobEventsOncePerJob(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *node.Config) { c.AllowPrivateTargets = true })
	all := &hookReceiver{stop: make(chan struct{})}
	only := &hookReceiver{stop: make(chan struct{})}
	defer close(all.stop)
	defer close(only.stop)
	ctx := context.Background()
	key := f.dev.Secret
	mk := func(url string, events []string) string {
		body := map[string]any{"url": url}
		if events != nil {
			body["events"] = events
		}
		r := jsonCall(t, "POST", f.base+"/webhooks", key, body)
		if r.status != 201 {
			t.Fatalf("create endpoint: %d %s", r.status, r.body)
		}
		return decodeJSONField(t, r.body, "id")
	}
	srvAll, srvOnly := httptest.NewServer(all), httptest.NewServer(only)
	defer srvAll.Close()
	defer srvOnly.Close()
	epAll := mk(srvAll.URL+"/hook", nil)
	epOnly := mk(srvOnly.URL+"/hook", []string{"watermark.embed.failed"})

	img := photo(t, 400, 300, 31)
	r := post(t, f.base+"/watermarks/images/async?webhook_id="+epAll, key, "events-embed-0001", img, `{"e":1}`)
	if r.status != 202 {
		t.Fatalf("async embed: %d %s", r.status, r.body)
	}
	embed := decodeReceipt(t, r)
	marked := waitResult(t, f, key, embed.ResultURL)
	if marked.status != 200 {
		t.Fatalf("embed result: %d", marked.status)
	}
	wm := marked.header.Get("X-Watermark-ID")
	if again := call(t, "GET", f.base+embed.ResultURL, key, nil); again.status != 200 {
		t.Fatalf("second download: %d", again.status)
	}
	if replay := post(t, f.base+"/watermarks/images/async?webhook_id="+epAll, key, "events-embed-0001", img, `{"e":1}`); decodeReceipt(t, replay).RequestID != embed.RequestID {
		t.Fatalf("replay: %d %s", replay.status, replay.body)
	}
	r = post(t, f.base+"/watermarks/images/detect/async?webhook_id="+epAll, key, "", marked.body, "")
	if r.status != 202 {
		t.Fatalf("async detect: %d %s", r.status, r.body)
	}
	detect := decodeReceipt(t, r)
	if res := waitResult(t, f, key, detect.ResultURL); res.status != 200 {
		t.Fatalf("detect result: %d %s", res.status, res.body)
	}
	r = post(t, f.base+"/watermarks/images/async?webhook_id="+epAll, key, "", img[:len(img)/3], `{"e":2}`)
	if r.status != 202 {
		t.Fatalf("async embed of a broken file: %d %s", r.status, r.body)
	}
	broken := decodeReceipt(t, r)
	if res := waitResult(t, f, key, broken.ResultURL); res.status != 422 {
		t.Fatalf("broken file result: %d %s", res.status, res.body)
	}
	r = post(t, f.base+"/watermarks/images/async?webhook_id="+epOnly, key, "", photo(t, 400, 300, 32), `{"e":3}`)
	if r.status != 202 {
		t.Fatalf("async embed to the filtered endpoint: %d %s", r.status, r.body)
	}
	if res := waitResult(t, f, key, decodeReceipt(t, r).ResultURL); res.status != 200 {
		t.Fatalf("filtered endpoint's job: %d %s", res.status, res.body)
	}
	for range 4 {
		if _, _, err := f.n.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		f.clk.Advance(time.Hour)
	}
	if all.count() != 3 || only.count() != 0 {
		t.Fatalf("receivers saw %d and %d events, want 3 and 0", all.count(), only.count())
	}
	type event struct {
		ID, Type string
		Data     struct {
			RequestID   string  `json:"request_id"`
			Status      string  `json:"status"`
			ErrorCode   *string `json:"error_code"`
			WatermarkID *string `json:"watermark_id"`
			Result      *struct {
				Watermarked bool    `json:"watermarked"`
				Confidence  float64 `json:"confidence"`
				WatermarkID *string `json:"watermark_id"`
				Units       []struct {
					Index       int  `json:"index"`
					Watermarked bool `json:"watermarked"`
				} `json:"units"`
				UnitsTotal int `json:"units_total"`
			} `json:"result"`
		}
	}
	byReq := map[string]event{}
	for _, b := range all.bodies {
		var ev event
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		byReq[ev.Data.RequestID] = ev
	}
	e := byReq[embed.RequestID]
	if e.Type != "watermark.embed.succeeded" || e.Data.WatermarkID == nil || *e.Data.WatermarkID != wm || e.Data.Result != nil {
		t.Fatalf("embed event %+v", e)
	}
	d := byReq[detect.RequestID]
	if d.Type != "watermark.detect.succeeded" || d.Data.WatermarkID == nil || *d.Data.WatermarkID != wm || d.Data.Result == nil ||
		!d.Data.Result.Watermarked || d.Data.Result.Confidence <= 0 || d.Data.Result.WatermarkID == nil || *d.Data.Result.WatermarkID != wm ||
		len(d.Data.Result.Units) != 1 || d.Data.Result.UnitsTotal != 1 || !d.Data.Result.Units[0].Watermarked {
		t.Fatalf("detect event %+v", d)
	}
	x := byReq[broken.RequestID]
	if x.Type != "watermark.embed.failed" || x.Data.Status != "failed" || x.Data.ErrorCode == nil || *x.Data.ErrorCode != "invalid_image" ||
		x.Data.WatermarkID != nil {
		t.Fatalf("failed embed event %+v", x)
	}
	if dl := call(t, "GET", f.base+"/webhooks/"+epOnly+"/deliveries", key, nil); dl.status != 200 || !strings.Contains(string(dl.body), `"data":[]`) {
		t.Fatalf("filtered endpoint's log: %d %s", dl.status, dl.body)
	}
	if dl := call(t, "GET", f.base+"/webhooks/"+epAll+"/deliveries", key, nil); dl.status != 200 || strings.Count(string(dl.body), `"status":"delivered"`) != 3 {
		t.Fatalf("endpoint's log: %d %s", dl.status, dl.body)
	}
	m := call(t, "GET", f.base+"/metrics", "", nil)
	if !strings.Contains(string(m.body), `filigrane_webhook_deliveries_total{outcome="filtered"} 1`) {
		t.Fatal("metrics do not count the filtered event")
	}
}
