package loadbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"sync"
	"time"

	"filigrane/internal/whsign"
)

// DeliveryWait bounds how long the final check waits, after the jobs' check, for the events of the
// embed_webhook operations' jobs and the embed_storage operations' deliveries: the outbox retries a failed
// delivery after 30 s and then 2 minutes (docs/webhooks.md, docs/storage.md), so a receiver or bucket that
// failed for a while during the run still gets everything within it.
const DeliveryWait = 3 * time.Minute

// WebhookTarget is the schedule target of the run's webhook receiver: `stop` makes it answer 500 to every
// delivery (a customer endpoint that fails), `cont` makes it accept them again; `kill` closes its listener and
// every open connection at once (a receiver process killed -9: deliveries in flight get no answer, new ones
// are refused) and `restart` listens again on the same address.
const WebhookTarget = "webhook"

// webhookReceiver is the run's webhook endpoint: an HTTP server on 127.0.0.1 inside the harness, registered
// through the API (POST /webhooks), that verifies each delivery's signatures (both schemes) and records the
// events by the job's request id. The nodes reach it only with --allow-private-targets, which a local
// cluster of the harness sets.
type webhookReceiver struct {
	srvMu sync.Mutex
	srv   *http.Server // nil while killed
	addr  string
	url   string
	id    string // the endpoint's wh_ id

	mu         sync.Mutex
	secret     string
	failing    bool
	events     map[string]*webhookEvent // by request id
	refused    int                      // deliveries answered 500 while failing
	badSig     int                      // deliveries whose signatures did not verify
	malformed  int                      // deliveries that were not an event of a job
	deliveries int
}

// webhookEvent is what the receiver saw of one job's event.
type webhookEvent struct {
	eventID string
	typ     string
	status  string // data.status
	count   int    // accepted deliveries (more than one: duplicates)
	first   time.Time
	other   bool // another event id for the same request id arrived too
}

// startWebhookReceiver listens on 127.0.0.1 (any port) and serves deliveries until close.
func startWebhookReceiver() (*webhookReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("webhook receiver: %w", err)
	}
	w := &webhookReceiver{addr: ln.Addr().String(), events: map[string]*webhookEvent{}}
	w.url = "http://" + w.addr + "/hook"
	w.serveOn(ln)
	return w, nil
}

// serveOn serves deliveries on ln until close or kill. The caller holds srvMu or owns w alone.
func (w *webhookReceiver) serveOn(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(w.serve), ReadHeaderTimeout: 10 * time.Second}
	w.srv = srv
	go func() { _ = srv.Serve(ln) }() // ends with Close: ErrServerClosed
}

func (w *webhookReceiver) close() { _ = w.kill() }

// kill closes the listener and every connection at once, as the death of a receiver process would: a delivery
// in flight gets no answer, a new one finds the port closed.
func (w *webhookReceiver) kill() error {
	w.srvMu.Lock()
	defer w.srvMu.Unlock()
	if w.srv == nil {
		return nil
	}
	err := w.srv.Close()
	w.srv = nil
	return err
}

// restart listens again on the receiver's address after kill, accepting deliveries.
func (w *webhookReceiver) restart() error {
	w.srvMu.Lock()
	defer w.srvMu.Unlock()
	if w.srv != nil {
		return errors.New("webhook receiver: restart while it runs")
	}
	ln, err := net.Listen("tcp", w.addr)
	if err != nil {
		return fmt.Errorf("webhook receiver: listen again on %s: %w", w.addr, err)
	}
	w.serveOn(ln)
	// A new process: a receiver stopped (answering 500) before it was killed accepts again.
	w.setFailing(false)
	return nil
}

// setFailing makes the receiver answer 500 to every delivery (true) or accept them again (false).
func (w *webhookReceiver) setFailing(on bool) {
	w.mu.Lock()
	w.failing = on
	w.mu.Unlock()
}

// register creates the endpoint through the API (an owner key with webhooks:write) and keeps its secret.
func (w *webhookReceiver) register(ctx context.Context, a *attempt) error {
	body, _ := json.Marshal(map[string]any{"url": w.url, "description": "bench " + a.r.runID})
	res, ok := a.send(ctx, "POST", "/webhooks", "application/json", body, true)
	if !ok {
		return fmt.Errorf("create the webhook endpoint: %s %s", a.out.failure, a.out.sample)
	}
	var ep struct {
		ID     string `json:"id"`
		Secret string `json:"signing_secret"`
	}
	if res.status != 201 || json.Unmarshal(res.body, &ep) != nil || ep.ID == "" || ep.Secret == "" {
		return fmt.Errorf("create the webhook endpoint: %d %s", res.status, snippet(res.body))
	}
	w.mu.Lock()
	w.id, w.secret = ep.ID, ep.Secret
	w.mu.Unlock()
	return nil
}

// serve takes one delivery: 500 while failing; 400 for a signature that does not verify or a body that is
// not a job event; else the event is recorded (a duplicate too: at least once allows them) and 204 answered.
func (w *webhookReceiver) serve(rw http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deliveries++
	if w.failing {
		w.refused++
		http.Error(rw, "failing on schedule", http.StatusInternalServerError)
		return
	}
	if err != nil {
		w.malformed++
		http.Error(rw, "body", http.StatusBadRequest)
		return
	}
	if whsign.VerifyStandard(w.secret, req.Header.Get, body, now) != nil || whsign.VerifyEtchv(w.secret, req.Header.Get, body, now) != nil {
		w.badSig++
		http.Error(rw, "signature", http.StatusBadRequest)
		return
	}
	var ev struct {
		ID   string `json:"id"`
		Type string `json:"type"`
		Data struct {
			RequestID string `json:"request_id"`
			Status    string `json:"status"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &ev) != nil || ev.ID == "" || ev.ID != req.Header.Get(whsign.HeaderID) || ev.Data.RequestID == "" {
		w.malformed++
		http.Error(rw, "not a job event", http.StatusBadRequest)
		return
	}
	e := w.events[ev.Data.RequestID]
	if e == nil {
		e = &webhookEvent{eventID: ev.ID, typ: ev.Type, status: ev.Data.Status, first: now}
		w.events[ev.Data.RequestID] = e
	} else if e.eventID != ev.ID {
		e.other = true
	}
	e.count++
	rw.WriteHeader(http.StatusNoContent)
}

// WebhookReport is the check of the embed_webhook operations' events: every job of theirs that ended must
// have had its final event delivered at least once, signed, and naming the job's final status.
type WebhookReport struct {
	Endpoint string `json:"endpoint"`
	// Jobs is the embed_webhook jobs that ended (succeeded or failed); Delivered those whose event arrived and
	// matches (type watermark.embed.<status>, data.status the job's). Missing have none, Mismatched one that
	// names another outcome or two different event ids.
	Jobs          int      `json:"jobs"`
	Delivered     int      `json:"delivered"`
	Missing       int      `json:"missing"`
	MissingIDs    []string `json:"missing_ids,omitempty"`
	Mismatched    int      `json:"mismatched"`
	MismatchedIDs []string `json:"mismatched_ids,omitempty"`
	// NotEnded is embed_webhook jobs not ended or not readable at the check (the jobs' check counts them).
	NotEnded int `json:"not_ended"`
	// Duplicates is deliveries of an event beyond its first (allowed: at least once).
	Duplicates int `json:"duplicates"`
	// Deliveries is every POST the receiver got; Refused those answered 500 while it failed on schedule,
	// BadSignature those whose signature did not verify, Malformed those that were not a job's event.
	Deliveries   int `json:"deliveries"`
	Refused      int `json:"refused"`
	BadSignature int `json:"bad_signature"`
	Malformed    int `json:"malformed"`
	// MaxDelayS is the longest time from when the client saw a job end to its event's first delivery (0 when
	// the event came first); WaitS how long the check waited after the jobs' check for missing events.
	MaxDelayS float64 `json:"max_delay_s"`
	P50DelayS float64 `json:"p50_delay_s"`
	WaitS     float64 `json:"wait_s"`
	// Late is events first delivered more than LateEvent after the client saw their job end, LateIDs their
	// jobs (a held-back or retried delivery).
	Late    int      `json:"late"`
	LateIDs []string `json:"late_ids,omitempty"`
}

// LateEvent is how long after its job's end an event may arrive before the report counts it late: an
// attempt at once and one outbox pass (a few seconds) on a loaded machine.
const LateEvent = 10 * time.Second

// OK says whether every ended job's event arrived, matching, with valid signatures.
func (w *WebhookReport) OK() bool {
	return w.Missing == 0 && w.Mismatched == 0 && w.BadSignature == 0 && w.Malformed == 0
}

// webhookJob notes a job of an embed_webhook operation and when the client saw it end.
func (r *runner) webhookJob(id string, ended time.Time) {
	r.whMu.Lock()
	defer r.whMu.Unlock()
	if _, ok := r.whJobs[id]; !ok || r.whJobs[id].IsZero() {
		r.whJobs[id] = ended
	}
}

// checkWebhooks reads each embed_webhook job's final status and waits, up to wait, until the receiver got
// every ended job's event; then it compares them.
func (r *runner) checkWebhooks(ctx context.Context, wait time.Duration) *WebhookReport {
	w := r.webhooks
	rep := &WebhookReport{Endpoint: w.id}
	r.whMu.Lock()
	ids := make([]string, 0, len(r.whJobs))
	seen := map[string]time.Time{}
	for id, t := range r.whJobs {
		ids, seen[id] = append(ids, id), t
	}
	r.whMu.Unlock()
	sort.Strings(ids)
	final := map[string]string{}
	var mu sync.Mutex
	parallel(len(ids), func(i int) {
		a := &attempt{r: r, giveUp: time.Now().Add(r.cfg.RetryFor)}
		res, ok := a.send(ctx, "GET", "/watermarks/jobs/"+url.PathEscape(ids[i]), "", nil, true)
		var rc receipt
		if !ok || res.status != 200 || json.Unmarshal(res.body, &rc) != nil || !terminal(rc.Status) {
			return
		}
		mu.Lock()
		final[ids[i]] = rc.Status
		if seen[ids[i]].IsZero() {
			seen[ids[i]] = time.Now()
		}
		mu.Unlock()
	})
	began := time.Now()
	missing := func() int {
		w.mu.Lock()
		defer w.mu.Unlock()
		n := 0
		for id := range final {
			if w.events[id] == nil {
				n++
			}
		}
		return n
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for missing() > 0 && time.Since(began) < wait && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	rep.WaitS = time.Since(began).Seconds()
	w.mu.Lock()
	defer w.mu.Unlock()
	var delays []float64
	for _, id := range ids {
		status, ok := final[id]
		if !ok {
			rep.NotEnded++
			continue
		}
		rep.Jobs++
		e := w.events[id]
		switch {
		case e == nil:
			rep.Missing++
			rep.MissingIDs = append(rep.MissingIDs, id)
			continue
		case e.typ != "watermark.embed."+status || e.status != status || e.other:
			rep.Mismatched++
			rep.MismatchedIDs = append(rep.MismatchedIDs, id)
		default:
			rep.Delivered++
		}
		rep.Duplicates += e.count - 1
		d := max(e.first.Sub(seen[id]), 0)
		delays = append(delays, d.Seconds())
		if d > LateEvent {
			rep.Late++
			rep.LateIDs = append(rep.LateIDs, id)
		}
	}
	if len(delays) > 0 {
		sort.Float64s(delays)
		rep.P50DelayS, rep.MaxDelayS = delays[len(delays)/2], delays[len(delays)-1]
	}
	rep.Deliveries, rep.Refused, rep.BadSignature, rep.Malformed = w.deliveries, w.refused, w.badSig, w.malformed
	return rep
}

func (w *WebhookReport) writeMarkdown(out io.Writer) {
	verdict := "all delivered"
	if !w.OK() {
		verdict = "**NOT ALL DELIVERED**"
	}
	fmt.Fprintf(out, "\nWebhooks (endpoint %s): %d embed_webhook jobs ended, **%d events delivered and matching, %d missing, %d mismatched** (%s); %d not ended at the check; duplicates %d; deliveries %d, of which %d answered 500 on schedule, %d with a bad signature, %d malformed; delay from a job's end to its event p50 %.1f s, longest %.1f s, %d later than %s; waited %.1f s after the jobs' check.\n",
		w.Endpoint, w.Jobs, w.Delivered, w.Missing, w.Mismatched, verdict, w.NotEnded, w.Duplicates, w.Deliveries,
		w.Refused, w.BadSignature, w.Malformed, w.P50DelayS, w.MaxDelayS, w.Late, LateEvent, w.WaitS)
	if len(w.MissingIDs) > 0 {
		fmt.Fprintf(out, "\nMissing events: %v\n", w.MissingIDs)
	}
	if len(w.MismatchedIDs) > 0 {
		fmt.Fprintf(out, "\nMismatched events: %v\n", w.MismatchedIDs)
	}
}

var errNoReceiver = errors.New("the schedule names the webhook receiver but the mix has no embed_webhook")
