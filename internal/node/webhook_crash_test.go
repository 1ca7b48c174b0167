package node_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"filigrane/internal/admin"
	"filigrane/internal/clock"
	"filigrane/internal/whsign"
)

// holdingReceiver holds the first request it gets until that request's connection goes away (the sender was
// killed), telling the test through held; every later request is answered 200. It records every request.
type holdingReceiver struct {
	held    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	headers []http.Header
	bodies  [][]byte
}

func (h *holdingReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	h.headers, h.bodies = append(h.headers, r.Header.Clone()), append(h.bodies, b)
	first := len(h.bodies) == 1
	h.mu.Unlock()
	if first {
		h.once.Do(func() { close(h.held) })
		<-r.Context().Done() // never answered: the sender dies holding this request
		return
	}
	w.WriteHeader(200)
}

func (h *holdingReceiver) snapshot() ([]http.Header, [][]byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]http.Header(nil), h.headers...), append([][]byte(nil), h.bodies...)
}

// TestWebhookSurvivesKillMidDelivery (issue 16 item 4): a `filigrane serve` process is killed with SIGKILL
// while a receiver holds its first delivery of a job's final event (the request sent, no answer yet). After
// a restart on the same data directory the event is delivered again: the same event id and the same body,
// signed validly in both schemes, and the delivery log shows it delivered. The receiver sees it twice in
// all (at least once; the cut attempt was not recorded, so it is repeated, not lost).
func TestWebhookSurvivesKillMidDelivery(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("multi-process test")
	}
	dir := t.TempDir()
	var secret string
	offline(t, dir, clock.System{}, func(a admin.Admin) { _, secret = newOwnerKey(t, a, "Hooks") })
	rc := &holdingReceiver{held: make(chan struct{})}
	srv := httptest.NewServer(rc)
	defer srv.Close()

	procs, base := startSolo(t, dir, append([]string{"--allow-private-targets"}, quickRecovery...)...)

	r := jsonCall(t, "POST", base+"/webhooks", secret, map[string]any{"url": srv.URL + "/hook"})
	if r.status != 201 {
		t.Fatalf("create endpoint: %d %s", r.status, r.body)
	}
	epID, signing := decodeJSONField(t, r.body, "id"), decodeJSONField(t, r.body, "signing_secret")
	r = post(t, base+"/watermarks/images/async?webhook_id="+epID, secret, "", photo(t, 400, 300, 77), `{"k":1}`)
	if r.status != 202 {
		t.Fatalf("async embed: %d %s", r.status, r.body)
	}
	reqID := decodeReceipt(t, r).RequestID

	select {
	case <-rc.held:
	case <-time.After(2 * time.Minute):
		t.Fatalf("no delivery reached the receiver\n%s", procs.List[0].Tail(30))
	}
	if err := procs.List[0].Kill(); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer rcancel()
	if err := procs.List[0].Restart(rctx); err != nil {
		t.Fatal(err)
	}
	// The restarted node's sweeper takes the lease over once the dead holder's lapses (4 s: quickRecovery), then repeats the
	// cut attempt; the delivery log says when it succeeded.
	var log struct {
		Data []struct {
			ID        string  `json:"id"`
			RequestID *string `json:"request_id"`
			Status    string  `json:"status"`
			Attempts  int     `json:"attempts"`
		} `json:"data"`
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		res := call(t, "GET", base+"/webhooks/"+epID+"/deliveries", secret, nil)
		if res.status == 200 && json.Unmarshal(res.body, &log) == nil && len(log.Data) == 1 && log.Data[0].Status == "delivered" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not delivered after the restart: %d %s\n%s", res.status, res.body, procs.List[0].Tail(30))
		}
		time.Sleep(200 * time.Millisecond)
	}
	headers, bodies := rc.snapshot()
	if len(bodies) != 2 {
		t.Fatalf("receiver saw %d requests, want 2 (the cut one and its repeat)", len(bodies))
	}
	var ev struct {
		ID, Type string
		Data     struct {
			RequestID string `json:"request_id"`
		}
	}
	if err := json.Unmarshal(bodies[1], &ev); err != nil {
		t.Fatal(err)
	}
	if string(bodies[0]) != string(bodies[1]) || ev.Type != "watermark.embed.succeeded" || ev.Data.RequestID != reqID ||
		log.Data[0].ID != ev.ID || log.Data[0].Attempts != 1 || log.Data[0].RequestID == nil || *log.Data[0].RequestID != reqID {
		t.Fatalf("repeat differs or log wrong: %s / %s; log %+v", bodies[0], bodies[1], log.Data[0])
	}
	for i, h := range headers {
		sec, _ := strconv.ParseInt(h.Get("webhook-timestamp"), 10, 64)
		at := time.Unix(sec, 0)
		if h.Get("webhook-id") != ev.ID || h.Get("X-Etchv-Event-ID") != ev.ID ||
			whsign.VerifyStandard(signing, h.Get, bodies[i], at) != nil || whsign.VerifyEtchv(signing, h.Get, bodies[i], at) != nil {
			t.Fatalf("request %d: wrong id or signature: %v", i, h)
		}
	}
	sctx, scancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer scancel()
	if err := procs.List[0].Stop(sctx); err != nil {
		t.Fatal(err)
	}
}
