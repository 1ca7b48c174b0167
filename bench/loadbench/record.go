package loadbench

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"filigrane/actors"
	"filigrane/bench/apibench"
	"filigrane/internal/admin"
	"filigrane/internal/node"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func snippet(b []byte) string { return apibench.Snippet(b) }

// jobBook tracks the jobs the service accepted (a receipt seen) and the charged operations the client saw
// succeed, for the whole run, set-up included.
type jobBook struct {
	mu   sync.Mutex
	jobs map[string]*jobEntry
	ids  []string      // accepted, in order (status reads pick from them)
	seen map[string]Op // charged operations seen succeeding, by request id
	// ops are the charged operations, by sequence number: when each started and ended (chaos timings).
	ops map[uint64]*opSpan
	// batches are the batches the service created, by batch id.
	batches map[string]*batchEntry
	// accelerators are the accelerator that ran each embed_gpu job, by request id, from its final receipt.
	accelerators map[string]string
	// answeredTo is the operation (sequence number) whose success named each request id, and shared what
	// answered two operations with one request id: each operation has its own Idempotency-Key, so that is an
	// answer delivered to the wrong request (a client or server mixing up connections), which would otherwise
	// show only as a charge "not seen".
	answeredTo map[string]uint64
	shared     []string
}

type opSpan struct {
	start, end time.Time
	ok         bool
}

type jobEntry struct {
	accepted, ended time.Time
	status          string
	op              Op // the operation that submitted it
}

func newJobBook() *jobBook {
	return &jobBook{jobs: map[string]*jobEntry{}, seen: map[string]Op{}, ops: map[uint64]*opSpan{}, batches: map[string]*batchEntry{},
		accelerators: map[string]string{}, answeredTo: map[string]uint64{}}
}

// ranOn notes the accelerator an embed_gpu job's final receipt names.
func (b *jobBook) ranOn(id, accelerator string) {
	b.mu.Lock()
	b.accelerators[id] = accelerator
	b.mu.Unlock()
}

func (b *jobBook) accepted(id string, op Op, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.jobs[id]; !ok {
		b.jobs[id] = &jobEntry{accepted: at, op: op}
		b.ids = append(b.ids, id)
	}
}

func (b *jobBook) ended(id, status string, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if j, ok := b.jobs[id]; ok && j.ended.IsZero() {
		j.ended, j.status = at, status
	}
}

func (b *jobBook) success(id string, op Op) {
	if id == "" || !op.Charged() {
		return
	}
	b.mu.Lock()
	b.seen[id] = op
	b.mu.Unlock()
}

// answered notes that operation n (its sequence number; 0 for the set-up's) succeeded with request id id.
func (b *jobBook) answered(id string, n uint64, op Op) {
	if id == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if m, ok := b.answeredTo[id]; ok && m != n {
		b.shared = append(b.shared, fmt.Sprintf("operations %d and %d (%s) were both answered with request id %s", m, n, op, id))
		return
	}
	b.answeredTo[id] = n
}

// lateSuccess records a job found succeeded by the final check: the client sees it through the status API.
// A document or video job keeps its operation, so that the credits check prices it as one.
func (b *jobBook) lateSuccess(id string) {
	op := OpEmbedAsync
	b.mu.Lock()
	if j, ok := b.jobs[id]; ok && j.op.isMedia() {
		op = j.op
	}
	b.mu.Unlock()
	b.success(id, op)
}

// sample returns an accepted job's id, spread over them by n.
func (b *jobBook) sample(n uint64) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.ids) == 0 {
		return "req_unknown"
	}
	return b.ids[n%uint64(len(b.ids))]
}

func (b *jobBook) open() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, id := range b.ids {
		if b.jobs[id].ended.IsZero() {
			out = append(out, id)
		}
	}
	return out
}

func (b *jobBook) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.ids)
}

func (b *jobBook) terminalCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, j := range b.jobs {
		if !j.ended.IsZero() {
			n++
		}
	}
	return n
}

func (b *jobBook) opStarted(n uint64, at time.Time) {
	b.mu.Lock()
	b.ops[n] = &opSpan{start: at}
	b.mu.Unlock()
}

func (b *jobBook) opEnded(n uint64, at time.Time, ok bool) {
	b.mu.Lock()
	if o := b.ops[n]; o != nil {
		o.end, o.ok = at, ok
	}
	b.mu.Unlock()
}

// opsAcross returns the charged operations started before t and not ended at t: how many, how many of them
// ended (at all, and successfully), and when the last one ended.
func (b *jobBook) opsAcross(t time.Time) (n, ended, ok int, last time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, o := range b.ops {
		if !o.start.Before(t) || (!o.end.IsZero() && !o.end.After(t)) {
			continue
		}
		n++
		if !o.end.IsZero() {
			ended++
			if o.ok {
				ok++
			}
			if o.end.After(last) {
				last = o.end
			}
		}
	}
	return n, ended, ok, last
}

// firstSuccessAfter returns when the first charged operation started after t succeeded (zero: none did).
func (b *jobBook) firstSuccessAfter(t time.Time) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	var first time.Time
	for _, o := range b.ops {
		if o.ok && o.start.After(t) && (first.IsZero() || o.end.Before(first)) {
			first = o.end
		}
	}
	return first
}

// endOf returns when job id was seen ended (zero: not seen).
func (b *jobBook) endOf(id string) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	if j, ok := b.jobs[id]; ok {
		return j.ended
	}
	return time.Time{}
}

// inFlightAt returns the jobs accepted before t and not ended at t, with when each ended (zero: never).
func (b *jobBook) inFlightAt(t time.Time) map[string]time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]time.Time{}
	for id, j := range b.jobs {
		if j.accepted.Before(t) && (j.ended.IsZero() || j.ended.After(t)) {
			out[id] = j.ended
		}
	}
	return out
}

// recorder tallies finished operations per kind and per second of the run.
type recorder struct {
	start   time.Time
	late    atomic.Int64
	dropped atomic.Int64

	mu      sync.Mutex
	ops     map[Op]*opStats
	seconds []*second
	book    *jobBook
	slowest []SlowOp // slowest first, at most SlowestKept
}

type opStats struct {
	count, ok int
	failures  map[string]int
	samples   map[string]string
	retries   map[string]int
	hist      apibench.Histogram
}

type second struct {
	ok, failed int
	hist       apibench.Histogram
}

func newRecorder(start time.Time) *recorder {
	return &recorder{start: start, ops: map[Op]*opStats{}}
}

func (r *recorder) record(o outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.ops[o.op]
	if st == nil {
		st = &opStats{failures: map[string]int{}, samples: map[string]string{}, retries: map[string]int{}}
		r.ops[o.op] = st
	}
	st.count++
	for k, v := range o.retries {
		st.retries[k] += v
	}
	i := max(0, int(o.end.Sub(r.start)/time.Second))
	for len(r.seconds) <= i {
		r.seconds = append(r.seconds, &second{})
	}
	sec := r.seconds[i]
	r.keepSlow(o)
	if o.ok {
		st.ok++
		st.hist.Record(o.latency)
		sec.ok++
		sec.hist.Record(o.latency)
	} else {
		st.failures[o.failure]++
		if _, ok := st.samples[o.failure]; !ok {
			st.samples[o.failure] = o.sample
		}
		sec.failed++
	}
}

// keepSlow keeps o if it is among the SlowestKept slowest operations so far.
func (r *recorder) keepSlow(o outcome) {
	took := float64(o.latency) / float64(time.Millisecond)
	if len(r.slowest) == SlowestKept && took <= r.slowest[SlowestKept-1].TookMs {
		return
	}
	s := SlowOp{Op: o.op, ID: o.requestID, StartS: o.start.Sub(r.start).Seconds(), TookMs: took, Failure: o.failure}
	if o.batchID != "" {
		s.ID, s.Items = o.batchID, append([]string(nil), o.items...)
	}
	r.slowest = append(r.slowest, s)
	sort.SliceStable(r.slowest, func(i, j int) bool { return r.slowest[i].TookMs > r.slowest[j].TookMs })
	r.slowest = r.slowest[:min(len(r.slowest), SlowestKept)]
}

// snapshot returns the totals so far and the last complete second's successes and p95.
func (r *recorder) snapshot(now time.Time) (ok, failed int, lastOK int, lastP95 time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, st := range r.ops {
		ok += st.ok
		failed += st.count - st.ok
	}
	if i := int(now.Sub(r.start)/time.Second) - 1; i >= 0 && i < len(r.seconds) {
		lastOK, lastP95 = r.seconds[i].ok, r.seconds[i].hist.Quantile(0.95)
	}
	return
}

// fill writes the tallies into rep.
func (r *recorder) fill(rep *Report) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var all apibench.Histogram
	rep.Errors = map[string]int{}
	for _, op := range orderedOps {
		st := r.ops[op]
		if st == nil {
			continue
		}
		or := OpReport{Op: op, Count: st.count, OK: st.ok, Failed: st.count - st.ok, Latency: apibench.LatencyOf(&st.hist)}
		if len(st.failures) > 0 {
			or.Failures, or.FailureSamples = st.failures, st.samples
		}
		if len(st.retries) > 0 {
			or.Retries = st.retries
		}
		if rep.ElapsedS > 0 {
			or.OKPerS = float64(st.ok) / rep.ElapsedS
		}
		rep.Ops = append(rep.Ops, or)
		rep.Total.Count += st.count
		rep.Total.OK += st.ok
		rep.Total.Failed += st.count - st.ok
		for k, v := range st.failures {
			rep.Errors[k] += v
		}
		for _, v := range st.retries {
			rep.Total.Retries += v
		}
		all.Merge(&st.hist)
	}
	rep.Total.Latency = apibench.LatencyOf(&all)
	if rep.ElapsedS > 0 {
		rep.Total.OKPerS = float64(rep.Total.OK) / rep.ElapsedS
	}
	rep.Slowest = append([]SlowOp(nil), r.slowest...)
	rep.Total.Late = int(r.late.Load())
	rep.Total.Dropped = int(r.dropped.Load())
	for i, s := range r.seconds {
		l := apibench.LatencyOf(&s.hist)
		rep.Series = append(rep.Series, SecondReport{T: i, OK: s.ok, Failed: s.failed, P50Ms: l.P50Ms, P95Ms: l.P95Ms, P99Ms: l.P99Ms})
	}
}

// Progress is the run so far, for a live display.
type Progress struct {
	Elapsed, Duration time.Duration
	OK, Failed        int
	InFlight          int
	// LastOKPerS and LastP95 are of the last complete second.
	LastOKPerS int
	LastP95    time.Duration
	Late       int
	Dropped    int
	// Done is set on the last call, when no operation starts any more.
	Done bool
}

// progress calls cfg.Progress every second until the returned stop is called.
func (r *runner) progress(ctx context.Context, start time.Time) (stop func()) {
	if r.cfg.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	emit := func(now time.Time, done bool) {
		ok, failed, lastOK, p95 := r.rec.snapshot(now)
		r.cfg.Progress(Progress{Elapsed: now.Sub(start), Duration: r.cfg.Duration, OK: ok, Failed: failed,
			InFlight: int(r.inFlight.Load()), LastOKPerS: lastOK, LastP95: p95,
			Late: int(r.rec.late.Load()), Dropped: int(r.rec.dropped.Load()), Done: done})
	}
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case now := <-t.C:
				emit(now, false)
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
		emit(time.Now(), true)
	}
}

// LedgerMark is a point in an organization's ledger.
type LedgerMark struct {
	Seq  uint64
	Held int64
}

// Ledger reads an organization's ledger.
type Ledger interface {
	Mark(ctx context.Context) (LedgerMark, error)
	// Since returns the entries after mark and the mark now.
	Since(ctx context.Context, mark LedgerMark) ([]actors.LedgerEntry, LedgerMark, error)
}

// StoreLedger reads the ledger from a cluster's shared store (as `filigrane admin credits show` does).
type StoreLedger struct {
	S3    *node.S3Config
	OrgID string
}

// Mark implements Ledger.
func (l StoreLedger) Mark(ctx context.Context) (LedgerMark, error) {
	var m LedgerMark
	err := OpenAdmin(ctx, l.S3, func(a admin.Admin) error {
		st, _, err := a.Balance(ctx, l.OrgID, 1)
		if err != nil {
			return err
		}
		m = LedgerMark{Seq: st.Seq, Held: st.Held()}
		return nil
	})
	return m, err
}

// Since implements Ledger.
func (l StoreLedger) Since(ctx context.Context, from LedgerMark) ([]actors.LedgerEntry, LedgerMark, error) {
	var out []actors.LedgerEntry
	var now LedgerMark
	err := OpenAdmin(ctx, l.S3, func(a admin.Admin) error {
		st, _, err := a.Balance(ctx, l.OrgID, 1)
		if err != nil {
			return err
		}
		now = LedgerMark{Seq: st.Seq, Held: st.Held()}
		if st.Seq <= from.Seq {
			return nil
		}
		_, entries, err := a.Balance(ctx, l.OrgID, int(st.Seq-from.Seq))
		for _, e := range entries {
			if e.Seq > from.Seq {
				out = append(out, e)
			}
		}
		return err
	})
	return out, now, err
}

// credits compares the ledger's charges since mark with the charged operations the client saw succeed.
func (r *runner) credits(ctx context.Context, mark LedgerMark) (*Credits, error) {
	entries, now, err := r.cfg.Ledger.Since(ctx, mark)
	if err != nil {
		return nil, err
	}
	c := &Credits{HeldBefore: mark.Held, HeldAfter: now.Held, LedgerEntries: len(entries)}
	charges := map[string]int{}
	amounts := map[string]int64{}
	for _, e := range entries {
		if e.Kind != "charge" {
			continue
		}
		charges[e.Operation]++
		amounts[e.Operation] += e.Amount
		c.ChargedCredits += e.Amount
	}
	c.ChargedOps = len(charges)
	r.jobs.mu.Lock()
	seen := make(map[string]Op, len(r.jobs.seen))
	for id, op := range r.jobs.seen {
		seen[id] = op
	}
	r.jobs.mu.Unlock()
	c.ClientSuccesses = len(seen)
	for id, n := range charges {
		if n > 1 {
			c.ChargedTwice++
		}
		if _, ok := seen[id]; !ok {
			c.ChargedNotSeen = append(c.ChargedNotSeen, id)
		}
	}
	for id := range seen {
		if _, ok := charges[id]; !ok {
			c.SeenNotCharged = append(c.SeenNotCharged, id)
		}
	}
	sort.Strings(c.ChargedNotSeen)
	sort.Strings(c.SeenNotCharged)
	c.GPUOnCPU, c.GPUChargedWrong = r.gpuCharges(seen, amounts)
	c.MediaChecked, c.MediaChargedWrong = r.mediaCharges(seen, amounts)
	// A key-less request whose answer was lost may have been charged; the client cannot learn its id. Only a
	// charge with no job record can be one (a key-less detection has none): a job's charge is always explained.
	c.UnkeyedLost = int(r.unkeyedLost.Load())
	var noRecord int
	c.UnseenNotes, noRecord = r.describeUnseen(ctx, c.ChargedNotSeen)
	r.jobs.mu.Lock()
	c.UnseenNotes = append(c.UnseenNotes, r.jobs.shared...)
	r.jobs.mu.Unlock()
	c.Equal = c.ChargedOps-len(c.ChargedNotSeen) == c.ClientSuccesses &&
		len(c.ChargedNotSeen) == noRecord && noRecord <= c.UnkeyedLost &&
		len(c.SeenNotCharged) == 0 && c.ChargedTwice == 0 && len(c.GPUChargedWrong) == 0 &&
		len(c.MediaChargedWrong) == 0 && c.HeldAfter == c.HeldBefore
	if !c.Equal {
		return c, fmt.Errorf("the ledger charged %d operations, the client saw %d succeed (%d charged but not seen, of which %d without a job record, %d key-less requests lost their answer; %d seen but not charged, %d charged twice, %d gpu jobs run on a CPU not charged the plain price, %d document or video embeds not charged the catalog's price); credits held before %d, after %d",
			c.ChargedOps, c.ClientSuccesses, len(c.ChargedNotSeen), noRecord, c.UnkeyedLost, len(c.SeenNotCharged), c.ChargedTwice, len(c.GPUChargedWrong), len(c.MediaChargedWrong), c.HeldBefore, c.HeldAfter)
	}
	return c, nil
}

// gpuCharges checks the embed_gpu jobs the client saw succeed on a CPU: each must be charged what a plain
// image embed of the run was (the same image every time), not the three times held. It returns how many were
// checked and those charged otherwise.
func (r *runner) gpuCharges(seen map[string]Op, amounts map[string]int64) (checked int, wrong []string) {
	var plain int64
	for id, op := range seen {
		if op == OpEmbed || op == OpEmbedAsync || op == OpEmbedWebhook || op == OpEmbedStorage {
			if a, ok := amounts[id]; ok {
				plain = a
				break
			}
		}
	}
	r.jobs.mu.Lock()
	defer r.jobs.mu.Unlock()
	for id, op := range seen {
		a, charged := amounts[id]
		if op != OpEmbedGPU || !charged || r.jobs.accelerators[id] != "cpu" {
			continue
		}
		checked++
		if plain > 0 && a != plain {
			wrong = append(wrong, fmt.Sprintf("%s charged %d, a plain embed %d", id, a, plain))
		}
	}
	sort.Strings(wrong)
	return checked, wrong
}
