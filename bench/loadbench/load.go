// Package loadbench is the load and chaos harness of `filigrane bench load` and `filigrane bench chaos`: a mix
// of user operations (synchronous and asynchronous embeds, detections, job status reads, signed uploads, batches) sent
// open-loop at a target rate or closed-loop by N clients to one or more nodes, with a report of throughput,
// latency percentiles and failures by problem code, per operation and per second, and the credits the
// organization's ledger charged compared with the successes the client saw. It can start a local cluster
// (StartLocal: N node processes of this binary and versitygw) and, for chaos runs, kill, stop and restart
// them on a schedule while counting lost, stuck and doubly charged jobs (RunChaos).
//
// It owns the generator, the accounting and the reports; the pieces it shares with `bench api` (histogram,
// generated image, multipart bodies, plan catalog) live in bench/apibench. It never changes the service:
// everything it learns comes through the API, except the ledger, read from the shared store as
// `filigrane admin --s3-endpoint` does.
package loadbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"filigrane/actors/mediakind"
	"filigrane/bench/apibench"
)

// LateThreshold is how far behind its scheduled time an open-loop arrival may start before it counts as late
// (the generator itself fell behind, so the offered rate was not the one asked for).
const LateThreshold = 10 * time.Millisecond

// Config is one load run.
type Config struct {
	// Targets are node base URLs; operations go round-robin and retry on the next node.
	Targets []string
	// Key is the API key (every scope the mix needs).
	Key string
	// Rate > 0 runs open-loop: arrivals at Rate per second whatever the answers take. Rate == 0 runs closed-loop
	// with Clients clients, each with one operation in flight.
	Rate    float64
	Clients int
	// Duration is how long operations start; the run then waits up to Drain for those in flight.
	Duration time.Duration
	Drain    time.Duration
	// MaxInFlight bounds open-loop operations in flight; an arrival beyond it is dropped and counted.
	MaxInFlight int
	Mix         Mix
	// Image is the file embedded (nil generates a 1024x1024 photo-like JPEG); Data the embed's data field.
	Image     []byte
	ImageName string
	Data      string
	// Timeout bounds one HTTP request; RetryFor one operation's retries (on any node) after failures that
	// may pass (no answer, 429, 5xx).
	Timeout  time.Duration
	RetryFor time.Duration
	// PollInterval is the pause between two status reads of a job being followed.
	PollInterval time.Duration
	// Seed makes the sequence of operations reproducible.
	Seed uint64
	// Ledger, when set, reads the organization's ledger before and after, for the credit check.
	Ledger Ledger
	// Progress is called about once a second with the run so far (nil: nothing).
	Progress func(Progress)
	// Log receives set-up lines (nil discards them).
	Log io.Writer

	// Dest is the storage destination of embed_storage operations (a local cluster gives one).
	Dest *StorageDest
	// VideoSeconds is the length of the video operations' clip (0: VideoSeconds); over a minute, a video embed
	// is charged more than one minute.
	VideoSeconds int
	// Prices are the cluster's catalog prices, for the charges of embed_pdf and embed_video (a local cluster
	// gives them; nil: those charges are compared by request id only).
	Prices *mediakind.Rates

	// webhooks is the receiver a chaos run started (its schedule may make it fail); nil: Run starts one when
	// the mix has embed_webhook.
	webhooks *webhookReceiver

	// onBook and onStart tell a chaos run the run's job book and when the load starts.
	onBook  func(*jobBook)
	onStart func(time.Time)
}

func (c *Config) defaults() error {
	if len(c.Targets) == 0 {
		return errors.New("no target given")
	}
	if err := apibench.NormalizeTargets(c.Targets); err != nil {
		return err
	}
	if c.Key == "" {
		return errors.New("no API key given")
	}
	if c.Rate < 0 {
		return errors.New("the rate must not be negative")
	}
	if c.Rate == 0 && c.Clients < 1 {
		c.Clients = 1
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Drain <= 0 {
		c.Drain = 2 * time.Minute
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 512
	}
	if c.Mix == nil {
		c.Mix, _ = ParseMix(DefaultMix)
	}
	if c.Data == "" {
		c.Data = `{"benchmark":"load"}`
	}
	if c.Timeout <= 0 {
		c.Timeout = time.Minute
	}
	if c.RetryFor <= 0 {
		c.RetryFor = time.Minute
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 250 * time.Millisecond
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return nil
}

// runner is one run's shared state.
type runner struct {
	cfg        Config
	http       *httpClient
	embedBody  *bodyParts
	detectBody *bodyParts
	batchFile  []byte     // each batch item's file
	pdfFile    []byte     // embed_pdf's and batch_media's document
	clipFile   []byte     // embed_video's and batch_media's clip
	pdfBody    *bodyParts // embed_pdf's request
	videoBody  *bodyParts // embed_video's request
	// markedPDF and markedClip are detect_pdf's and detect_video's requests: the files marked at set-up.
	markedPDF  *bodyParts
	markedClip *bodyParts
	runID      string
	seq        atomic.Uint64
	rr         atomic.Uint64
	jobs       *jobBook
	rec        *recorder
	inFlight   atomic.Int64
	giveUpMu   sync.Mutex
	gaveUp     []*replay // charged requests with no answer known to the client (no receipt either)
	webhooks   *webhookReceiver
	whMu       sync.Mutex
	whJobs     map[string]time.Time // embed_webhook jobs -> when the client saw them end (zero: not seen)
	destID     string               // the run's storage destination (embed_storage)
	stJobs     map[string]bool      // embed_storage jobs (guarded by whMu)
	// unkeyedLost counts charged requests without an Idempotency-Key (detect_nokey) that got no answer.
	unkeyedLost atomic.Int64
}

// Run runs the load and returns the report. It fails only when the run cannot start; failed operations are
// counted in the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if cfg.Image == nil {
		img, err := apibench.PhotoJPEG(apibench.DefaultImageSide, apibench.DefaultImageSide, 1)
		if err != nil {
			return nil, err
		}
		cfg.Image, cfg.ImageName = img, fmt.Sprintf("generated-%dx%d.jpg", apibench.DefaultImageSide, apibench.DefaultImageSide)
	}
	if cfg.ImageName == "" {
		cfg.ImageName = "bench.jpg"
	}
	conns := cfg.MaxInFlight + 8
	if cfg.Rate == 0 {
		conns = cfg.Clients + 8
	}
	r := &runner{cfg: cfg, http: newHTTPClient(conns, cfg.Timeout), jobs: newJobBook(),
		runID: fmt.Sprintf("bench-%d", time.Now().UnixNano()), webhooks: cfg.webhooks, whJobs: map[string]time.Time{}, stJobs: map[string]bool{}}
	defer r.http.c.CloseIdleConnections()
	if cfg.Mix[OpEmbedWebhook] > 0 {
		if r.webhooks == nil {
			w, err := startWebhookReceiver()
			if err != nil {
				return nil, err
			}
			defer w.close()
			r.webhooks = w
		}
		a := &attempt{r: r, giveUp: time.Now().Add(cfg.RetryFor)}
		if err := r.webhooks.register(ctx, a); err != nil {
			return nil, err
		}
	}
	if cfg.Mix[OpEmbedStorage] > 0 || cfg.Mix[OpVideoStorage] > 0 {
		if cfg.Dest == nil {
			return nil, errors.New("embed_storage and video_storage need a storage destination bucket (a local cluster: --nodes)")
		}
		if err := r.registerDest(ctx); err != nil {
			return nil, err
		}
	}
	eb, err := apibench.MultipartBody(cfg.Image, filepath.Base(cfg.ImageName), cfg.Data)
	if err != nil {
		return nil, err
	}
	r.embedBody = &bodyParts{ContentType: eb.ContentType, Data: eb.Data}
	if cfg.Mix[OpBatch] > 0 || cfg.Mix[OpBatchCancel] > 0 || cfg.Mix[OpBatchMedia] > 0 || cfg.Mix[OpBatchMediaCancel] > 0 {
		if r.batchFile, err = apibench.PhotoJPEG(BatchImageSide, BatchImageSide, 2); err != nil {
			return nil, err
		}
	}

	if err := r.mediaInputs(ctx); err != nil {
		return nil, err
	}

	rep := &Report{Started: time.Now().UTC(), Targets: cfg.Targets, Rate: cfg.Rate, Clients: cfg.Clients,
		Mix: cfg.Mix.String(), DurationS: cfg.Duration.Seconds(), NumCPU: runtime.NumCPU(), Image: cfg.ImageName,
		ImageBytes: len(cfg.Image)}
	if cfg.Rate > 0 {
		rep.Mode, rep.Clients = "open", 0
	} else {
		rep.Mode = "closed"
	}
	rep.Host, _ = os.Hostname()

	var mark LedgerMark
	if cfg.Ledger != nil {
		if mark, err = cfg.Ledger.Mark(ctx); err != nil {
			return nil, fmt.Errorf("read the ledger before the run: %w", err)
		}
	}
	// Set-up, recorded like any operation: the marked copy that detections send and a first job for status
	// reads.
	r.rec = newRecorder(time.Now())
	fmt.Fprintf(cfg.Log, "bench load: set-up on %s: one embed (the detection input) and one async job (for status reads)\n", cfg.Targets[0])
	marked, err := r.setupEmbed(ctx)
	if err != nil {
		return nil, err
	}
	db, err := apibench.MultipartBody(marked, "marked.png", "")
	if err != nil {
		return nil, err
	}
	r.detectBody = &bodyParts{ContentType: db.ContentType, Data: db.Data}
	if o := r.one(ctx, OpEmbedAsync, time.Now()); !o.ok {
		return nil, fmt.Errorf("set-up: an async embed failed: %s %s", o.failure, o.sample)
	}
	if err := r.setupMarkedMedia(ctx); err != nil {
		return nil, err
	}

	start := time.Now()
	r.rec = newRecorder(start)
	if cfg.onBook != nil {
		cfg.onBook(r.jobs)
	}
	if cfg.onStart != nil {
		cfg.onStart(start)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopProgress := r.progress(runCtx, start)
	var wg sync.WaitGroup
	if cfg.Rate > 0 {
		r.openLoop(runCtx, start, &wg)
	} else {
		r.closedLoop(runCtx, start, &wg)
	}
	issued := time.Now()
	// Drain: operations in flight finish (or their retry budget ends); after Drain they are cancelled.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(cfg.Drain):
		fmt.Fprintf(cfg.Log, "bench load: %d operations still in flight after the %s drain; cancelling them\n", r.inFlight.Load(), cfg.Drain)
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d operations were still in flight %s after the last start and were cancelled", r.inFlight.Load(), cfg.Drain))
		cancel()
		<-done
	}
	stopProgress()
	rep.ElapsedS = time.Since(start).Seconds()
	rep.DrainS = time.Since(issued).Seconds()
	r.rec.fill(rep)

	// Final check of every job the service accepted: still unknown or not finished is a lost or stuck job.
	r.finalCheck(ctx, rep)
	r.slowReceipts(ctx, rep)
	if r.webhooks != nil {
		rep.Webhooks = r.checkWebhooks(ctx, DeliveryWait)
	}
	if r.destID != "" {
		rep.Storage = r.checkStorage(ctx, DeliveryWait)
	}

	if cfg.Ledger != nil {
		// Read even after an interrupt: the report of an interrupted run still says what was charged.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		c, err := r.credits(lctx, mark)
		cancel()
		if err != nil {
			rep.Notes = append(rep.Notes, "credit check: "+err.Error())
		}
		if c != nil {
			rep.Notes = append(rep.Notes, c.UnseenNotes...)
		}
		rep.Credits = c
	} else {
		rep.Notes = append(rep.Notes, "credits were not checked: no access to the cluster's store (use --nodes, or --s3-* flags with --url)")
	}
	return rep, nil
}

// setupEmbed embeds the image once and returns the marked PNG.
func (r *runner) setupEmbed(ctx context.Context) ([]byte, error) {
	a := &attempt{r: r, op: OpEmbed, idem: r.runID + "-setup", giveUp: time.Now().Add(r.cfg.RetryFor)}
	res, ok := a.send(ctx, "POST", "/watermarks/images", r.embedBody.ContentType, r.embedBody.Data, true)
	if !ok || res.status != 200 || !strings.HasPrefix(res.contentType, "image/png") {
		msg := a.out.failure
		if res != nil {
			msg = fmt.Sprintf("%d %s: %s", res.status, res.contentType, snippet(res.body))
		}
		return nil, fmt.Errorf("set-up: the first embed failed: %s", msg)
	}
	r.jobs.success(res.requestID, OpEmbed)
	r.jobs.answered(res.requestID, 0, OpEmbed)
	r.rec.record(outcome{op: OpEmbed, ok: true, requestID: res.requestID, retries: a.out.retries, end: time.Now()})
	return res.body, nil
}

// one runs one operation that was due at due, and records it.
func (r *runner) one(ctx context.Context, op Op, due time.Time) outcome {
	n := r.seq.Add(1)
	a := &attempt{r: r, op: op, giveUp: time.Now().Add(r.cfg.RetryFor)}
	if op.Charged() {
		if op != OpDetectNoKey {
			a.idem = fmt.Sprintf("%s-%d", r.runID, n)
		}
		r.jobs.opStarted(n, time.Now())
	}
	a.out.op, a.out.start = op, time.Now()
	a.run(ctx)
	a.out.end = time.Now()
	// Latency runs from when the operation was due, not when it started: an open-loop arrival that waited for
	// the generator counts its wait (no coordinated omission).
	a.out.latency = a.out.end.Sub(due)
	if !a.out.ok && a.out.failure == "" {
		a.out.failure = "unknown"
	}
	if a.out.ok && !op.isBatch() { // a batch books its items' successes itself
		r.jobs.success(a.out.requestID, op)
		if op.Charged() {
			r.jobs.answered(a.out.requestID, n, op)
		}
	}
	if op.Charged() {
		r.jobs.opEnded(n, a.out.end, a.out.ok)
		if !a.out.ok && strings.HasPrefix(a.out.failure, "gave up") && a.charged != nil && a.out.requestID == "" {
			r.giveUpMu.Lock()
			r.gaveUp = append(r.gaveUp, a.charged)
			r.giveUpMu.Unlock()
		}
	}
	r.rec.record(a.out)
	return a.out
}

// pick returns the operation of arrival n: a pure function of the seed and n, so that a run's sequence does
// not depend on scheduling. (A PCG seeded with n per arrival gives correlated first outputs for consecutive
// n; a splitmix64 step decorrelates them.)
func (r *runner) pick(n uint64) Op {
	z := r.cfg.Seed*0x9e3779b97f4a7c15 + (n+1)*0xbf58476d1ce4e5b9
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return r.cfg.Mix.pick(int(z % uint64(r.cfg.Mix.total())))
}

// openLoop starts operations at cfg.Rate per second until cfg.Duration has passed. Arrivals are computed from
// the start time, so a generator that falls behind catches up (and counts those arrivals late) rather than
// lowering the rate; an arrival finding MaxInFlight operations in flight is dropped.
func (r *runner) openLoop(ctx context.Context, start time.Time, wg *sync.WaitGroup) {
	interval := time.Duration(float64(time.Second) / r.cfg.Rate)
	total := int64(r.cfg.Duration.Seconds() * r.cfg.Rate)
	var i int64
	for i < total && ctx.Err() == nil {
		now := time.Now()
		for ; i < total; i++ {
			due := start.Add(time.Duration(i) * interval)
			if due.After(now) {
				break
			}
			if now.Sub(due) > LateThreshold {
				r.rec.late.Add(1)
			}
			if r.inFlight.Load() >= int64(r.cfg.MaxInFlight) {
				r.rec.dropped.Add(1)
				continue
			}
			r.inFlight.Add(1)
			wg.Add(1)
			op := r.pick(uint64(i))
			go func() {
				defer wg.Done()
				defer r.inFlight.Add(-1)
				r.one(ctx, op, due)
			}()
		}
		if i < total {
			wait := time.Until(start.Add(time.Duration(i) * interval))
			select {
			case <-ctx.Done():
			case <-time.After(max(wait, 0)):
			}
		}
	}
}

// closedLoop runs cfg.Clients clients, each starting its next operation when the last one ended.
func (r *runner) closedLoop(ctx context.Context, start time.Time, wg *sync.WaitGroup) {
	deadline := start.Add(r.cfg.Duration)
	var n atomic.Uint64
	for c := 0; c < r.cfg.Clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && time.Now().Before(deadline) {
				r.inFlight.Add(1)
				r.one(ctx, r.pick(n.Add(1)), time.Now())
				r.inFlight.Add(-1)
			}
		}()
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(deadline)):
	}
}

// finalCheck learns the outcome of everything the run left open, within one RetryFor (16 at a time): charged
// requests given up without an answer are replayed, and every accepted job not seen ended is read: 404 is a
// lost job, a job not finished a stuck one. What ends now counts as seen by the client (it can see it too).
func (r *runner) finalCheck(ctx context.Context, rep *Report) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.RetryFor)
	defer cancel()
	var mu sync.Mutex // guards rep.Jobs
	// A charged request that never got a final answer may still have been done: the client learns its
	// outcome by sending it again with the same Idempotency-Key, which answers the stored result (or runs
	// it now if the service never took it).
	r.giveUpMu.Lock()
	replays := r.gaveUp
	r.giveUpMu.Unlock()
	rep.Jobs.Replayed = len(replays)
	parallel(len(replays), func(i int) {
		rp := replays[i]
		a := &attempt{r: r, op: rp.op, idem: rp.idem, giveUp: time.Now().Add(r.cfg.RetryFor)}
		if rp.op.isBatch() {
			r.resumeBatch(ctx, a, rep, &mu)
			return
		}
		res, ok := a.send(ctx, "POST", rp.path, rp.body.ContentType, rp.body.Data, true)
		success := false
		switch {
		case !ok:
		case res.status == 200:
			r.jobs.success(res.requestID, rp.op)
			success = true
		case res.status == 202:
			a.accepted(ctx, res)
			if a.out.ok {
				r.jobs.success(a.out.requestID, rp.op)
				success = true
			}
			if rp.op == OpEmbedWebhook && a.out.requestID != "" {
				r.webhookJob(a.out.requestID, time.Time{})
			}
			if (rp.op == OpEmbedStorage || rp.op == OpVideoStorage) && a.out.requestID != "" {
				r.storageJob(a.out.requestID)
			}
		}
		if success {
			mu.Lock()
			rep.Jobs.ReplayedOK++
			mu.Unlock()
		}
	})

	open := r.jobs.open()
	rep.Jobs.Accepted = r.jobs.count()
	parallel(len(open), func(i int) {
		id := open[i]
		a := &attempt{r: r, giveUp: time.Now().Add(r.cfg.RetryFor)}
		var rc receipt
		res, ok := a.send(ctx, "GET", "/watermarks/jobs/"+url.PathEscape(id), "", nil, true)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case !ok:
			rep.Jobs.Unchecked++
		case res.status == 404:
			rep.Jobs.Lost++
			rep.Jobs.LostIDs = append(rep.Jobs.LostIDs, id)
		case res.status != 200 || jsonUnmarshal(res.body, &rc) != nil:
			rep.Jobs.Unchecked++
		case terminal(rc.Status):
			r.jobs.ended(id, rc.Status, time.Now())
			rep.Jobs.EndedAfterRun++
			if rc.Status == "succeeded" {
				r.jobs.lateSuccess(id)
			}
		default:
			rep.Jobs.Stuck++
			rep.Jobs.StuckIDs = append(rep.Jobs.StuckIDs, id)
		}
	})
	rep.Jobs.Terminal = r.jobs.terminalCount()
	rep.Jobs.Batches, rep.Jobs.BatchesEnded, rep.Jobs.BatchesCancelled = r.jobs.batchCounts()
}

// resumeBatch learns the outcome of a batch operation given up during the run, as its user would: the same
// create request (same Idempotency-Key: the same batch, or a new one if the first never arrived), the files
// the service has not received, start, and a wait for its end within one RetryFor. A batch the service no
// longer knows counts as lost, one that does not end as stuck, one not reached as not checked.
func (r *runner) resumeBatch(ctx context.Context, a *attempt, rep *Report, mu *sync.Mutex) {
	out := a.batch(ctx)
	mu.Lock()
	defer mu.Unlock()
	switch {
	case a.out.ok:
		rep.Jobs.ReplayedOK++
	case out == batchLost:
		rep.Jobs.Lost++
		rep.Jobs.LostIDs = append(rep.Jobs.LostIDs, a.batchID)
	case out == batchStuck:
		rep.Jobs.Stuck++
		rep.Jobs.StuckIDs = append(rep.Jobs.StuckIDs, a.batchID)
	case out == batchOther && strings.HasPrefix(a.out.failure, "gave up"):
		rep.Jobs.Unchecked++
	}
}

// slowReceipts reads the job receipts of the slowest operations (a request id, or a batch's items), once
// each, for the report.
func (r *runner) slowReceipts(ctx context.Context, rep *Report) {
	for i := range rep.Slowest {
		o := &rep.Slowest[i]
		ids := o.Items
		if len(ids) == 0 && strings.HasPrefix(o.ID, "req_") {
			ids = []string{o.ID}
		}
		for _, id := range ids {
			res, err := r.http.do("GET", r.cfg.Targets[0]+"/watermarks/jobs/"+url.PathEscape(id), r.cfg.Key, "", nil, nil, true)
			if err == nil && res.status == 200 && ctx.Err() == nil {
				o.Receipts = append(o.Receipts, res.body)
			}
		}
	}
}

// parallel runs fn(0..n-1), 16 at a time.
func parallel(n int, fn func(i int)) {
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i)
		}()
	}
	wg.Wait()
}

// describeUnseen says, for each of the first few operations charged that the client did not see succeed, what
// the service answers about it as a job: a job record (its status, operation, batch and attempts) or not
// found (a key-less synchronous detection has none), so that a charge the run cannot explain can be traced.
// It returns the sentences and how many had no job record (an id not described counts as having one).
func (r *runner) describeUnseen(ctx context.Context, ids []string) (out []string, noRecord int) {
	for i, id := range ids {
		if i == 10 {
			out = append(out, fmt.Sprintf("charged but not seen: %d more not described", len(ids)-i))
			break
		}
		a := &attempt{r: r, giveUp: time.Now().Add(10 * time.Second)}
		res, ok := a.send(ctx, "GET", "/watermarks/jobs/"+url.PathEscape(id), "", nil, true)
		var rc struct {
			Status      string `json:"status"`
			Operation   string `json:"operation"`
			BatchID     string `json:"batch_id"`
			Attempts    int    `json:"attempts"`
			ErrorCode   string `json:"error_code"`
			CreatedAt   string `json:"created_at"`
			CompletedAt string `json:"completed_at"`
		}
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("charged but not seen: %s: no answer (%s)", id, a.out.failure))
		case res.status == 404:
			noRecord++
			out = append(out, fmt.Sprintf("charged but not seen: %s: no job record (a key-less detection whose answer was lost, or a job the service forgot)", id))
		case res.status != 200 || jsonUnmarshal(res.body, &rc) != nil:
			out = append(out, fmt.Sprintf("charged but not seen: %s: %d %s", id, res.status, snippet(res.body)))
		default:
			out = append(out, fmt.Sprintf("charged but not seen: %s: job %s %s (batch %q, %d attempts, error_code %q, created %s, completed %s)",
				id, rc.Operation, rc.Status, rc.BatchID, rc.Attempts, rc.ErrorCode, rc.CreatedAt, rc.CompletedAt))
		}
	}
	return out, noRecord
}
