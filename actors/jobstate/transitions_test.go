package jobstate

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// A state in the transition matrix: a record built by legal moves and the time the event arrives at.
type matrixState struct {
	name  string
	build func(t *testing.T) (*Record, time.Time)
}

const lease30 = 30 * time.Second

var claimAt = t0.Add(time.Minute)

func running(t *testing.T, leaseFor time.Duration) *Record {
	r := mustAccept(t, testSpec(), t0)
	mustClaim(t, r, "w1", claimAt, leaseFor)
	return r
}

var matrixStates = []matrixState{
	{"queued", func(t *testing.T) (*Record, time.Time) { return mustAccept(t, testSpec(), t0), claimAt }},
	{"running", func(t *testing.T) (*Record, time.Time) { return running(t, lease30), claimAt.Add(10 * time.Second) }},
	{"running_lease_expired", func(t *testing.T) (*Record, time.Time) {
		return running(t, lease30), claimAt.Add(lease30)
	}},
	{"retrying_waiting", func(t *testing.T) (*Record, time.Time) {
		r := running(t, lease30)
		if err := r.Fail(1, "codec_error", "boom", true, claimAt.Add(10*time.Second)); err != nil {
			t.Fatal(err)
		}
		return r, claimAt.Add(11 * time.Second) // next attempt at +12 s
	}},
	{"retrying_ready", func(t *testing.T) (*Record, time.Time) {
		r := running(t, lease30)
		if err := r.Fail(1, "codec_error", "boom", true, claimAt.Add(10*time.Second)); err != nil {
			t.Fatal(err)
		}
		return r, claimAt.Add(12 * time.Second)
	}},
	{"succeeded", func(t *testing.T) (*Record, time.Time) {
		r := running(t, lease30)
		if err := r.Succeed(1, testOutput(), claimAt.Add(10*time.Second)); err != nil {
			t.Fatal(err)
		}
		return r, claimAt.Add(time.Minute)
	}},
	{"failed", func(t *testing.T) (*Record, time.Time) {
		r := running(t, lease30)
		if err := r.Fail(1, "invalid_media", "bad", false, claimAt.Add(10*time.Second)); err != nil {
			t.Fatal(err)
		}
		return r, claimAt.Add(time.Minute)
	}},
	{"queued_past_deadline", func(t *testing.T) (*Record, time.Time) {
		return mustAccept(t, testSpec(), t0), t0.Add(30 * time.Minute)
	}},
	{"running_past_deadline", func(t *testing.T) (*Record, time.Time) {
		return running(t, 2*time.Hour), t0.Add(30 * time.Minute)
	}},
	{"retrying_past_deadline", func(t *testing.T) (*Record, time.Time) {
		r := running(t, 2*time.Hour)
		if err := r.Fail(1, "codec_error", "boom", true, t0.Add(20*time.Minute)); err != nil {
			t.Fatal(err)
		}
		return r, t0.Add(31 * time.Minute)
	}},
}

type matrixEvent struct {
	name string
	do   func(r *Record, now time.Time) error
}

var matrixEvents = []matrixEvent{
	{"claim_other", func(r *Record, now time.Time) error { _, err := r.Claim("w2", now, lease30); return err }},
	{"claim_same", func(r *Record, now time.Time) error { _, err := r.Claim("w1", now, lease30); return err }},
	{"renew", func(r *Record, now time.Time) error { _, err := r.Renew(1, now); return err }},
	{"renew_stale", func(r *Record, now time.Time) error { _, err := r.Renew(7, now); return err }},
	{"succeed", func(r *Record, now time.Time) error { return r.Succeed(1, testOutput(), now) }},
	{"succeed_stale", func(r *Record, now time.Time) error { return r.Succeed(7, testOutput(), now) }},
	{"fail_retryable", func(r *Record, now time.Time) error { return r.Fail(1, "codec_error", "boom", true, now) }},
	{"fail_final", func(r *Record, now time.Time) error { return r.Fail(1, "invalid_media", "bad", false, now) }},
	{"fail_stale", func(r *Record, now time.Time) error { return r.Fail(7, "codec_error", "boom", true, now) }},
	{"cancel", func(r *Record, now time.Time) error { return r.Cancel(now) }},
	{"cancel_waiting", func(r *Record, now time.Time) error { return r.CancelWaiting(now) }},
	{"tick", func(r *Record, now time.Time) error { r.Tick(now); return nil }},
}

// outcome of one event: a new status, a refusal (err), or nothing at all (noop, including idempotent repeats).
type outcome struct {
	status Status
	err    error
	noop   bool
}

var (
	toRunning   = outcome{status: StatusRunning}
	toRetrying  = outcome{status: StatusRetrying}
	toSucceeded = outcome{status: StatusSucceeded}
	toFailed    = outcome{status: StatusFailed}
	noop        = outcome{noop: true}
	stale       = outcome{err: ErrStaleLease}
	terminal    = outcome{err: ErrTerminal}
	notClaim    = outcome{err: ErrNotClaimable}
	deadline    = outcome{err: ErrDeadlineExceeded}
)

// matrix lists the outcome of every event in every state; a missing cell is a test bug.
var matrix = map[string]map[string]outcome{
	"queued": {
		"claim_other": toRunning, "claim_same": toRunning, "renew": stale, "renew_stale": stale,
		"succeed": stale, "succeed_stale": stale, "fail_retryable": stale, "fail_final": stale,
		"fail_stale": stale, "cancel": toFailed, "tick": noop, "cancel_waiting": toFailed,
	},
	"running": {
		"claim_other": notClaim, "claim_same": noop, "renew": toRunning, "renew_stale": stale,
		"succeed": toSucceeded, "succeed_stale": stale, "fail_retryable": toRetrying, "fail_final": toFailed,
		"fail_stale": stale, "cancel": toFailed, "tick": noop, "cancel_waiting": toRunning,
	},
	"running_lease_expired": {
		"claim_other": notClaim, "claim_same": notClaim, "renew": stale, "renew_stale": stale,
		"succeed": stale, "succeed_stale": stale, "fail_retryable": stale, "fail_final": stale,
		"fail_stale": stale, "cancel": toFailed, "tick": toRetrying, "cancel_waiting": toRunning,
	},
	"retrying_waiting": {
		"claim_other": notClaim, "claim_same": notClaim, "renew": stale, "renew_stale": stale,
		"succeed": stale, "succeed_stale": stale, "fail_retryable": noop, "fail_final": stale,
		"fail_stale": stale, "cancel": toFailed, "tick": noop, "cancel_waiting": toFailed,
	},
	"retrying_ready": {
		"claim_other": toRunning, "claim_same": toRunning, "renew": stale, "renew_stale": stale,
		"succeed": stale, "succeed_stale": stale, "fail_retryable": noop, "fail_final": stale,
		"fail_stale": stale, "cancel": toFailed, "tick": noop, "cancel_waiting": toFailed,
	},
	"succeeded": {
		"claim_other": terminal, "claim_same": terminal, "renew": terminal, "renew_stale": terminal,
		"succeed": noop, "succeed_stale": terminal, "fail_retryable": terminal, "fail_final": terminal,
		"fail_stale": terminal, "cancel": terminal, "tick": noop, "cancel_waiting": terminal,
	},
	"failed": {
		"claim_other": terminal, "claim_same": terminal, "renew": terminal, "renew_stale": terminal,
		"succeed": terminal, "succeed_stale": terminal, "fail_retryable": terminal, "fail_final": noop,
		"fail_stale": terminal, "cancel": terminal, "tick": noop, "cancel_waiting": terminal,
	},
	"queued_past_deadline": {
		"claim_other": deadline, "claim_same": deadline, "renew": stale, "renew_stale": stale,
		"succeed": stale, "succeed_stale": stale, "fail_retryable": stale, "fail_final": stale,
		"fail_stale": stale, "cancel": toFailed, "tick": toFailed, "cancel_waiting": toFailed,
	},
	"running_past_deadline": {
		"claim_other": deadline, "claim_same": deadline, "renew": deadline, "renew_stale": stale,
		"succeed": deadline, "succeed_stale": stale, "fail_retryable": deadline, "fail_final": deadline,
		"fail_stale": stale, "cancel": toFailed, "tick": toFailed, "cancel_waiting": toRunning,
	},
	"retrying_past_deadline": {
		"claim_other": deadline, "claim_same": deadline, "renew": stale, "renew_stale": stale,
		"succeed": stale, "succeed_stale": stale, "fail_retryable": noop, "fail_final": stale,
		"fail_stale": stale, "cancel": toFailed, "tick": toFailed, "cancel_waiting": toFailed,
	},
}

// TestTransitionMatrix runs every event in every state and checks the outcome, that refusals and repeats
// change nothing, that real moves bump Revision, and that every result keeps the record's invariants.
func TestTransitionMatrix(t *testing.T) {
	for _, st := range matrixStates {
		row, ok := matrix[st.name]
		if !ok {
			t.Fatalf("matrix has no row for state %s", st.name)
		}
		for _, ev := range matrixEvents {
			want, ok := row[ev.name]
			if !ok {
				t.Fatalf("matrix has no cell for %s / %s", st.name, ev.name)
			}
			t.Run(st.name+"/"+ev.name, func(t *testing.T) {
				r, now := st.build(t)
				before := r.Clone()
				err := ev.do(r, now)
				switch {
				case want.err != nil:
					if !errors.Is(err, want.err) {
						t.Fatalf("err = %v, want %v", err, want.err)
					}
					unchanged(t, "refused "+ev.name, before, r)
				case want.noop:
					if err != nil {
						t.Fatalf("err = %v, want a no-op", err)
					}
					unchanged(t, ev.name, before, r)
				default:
					if err != nil {
						t.Fatalf("err = %v, want status %s", err, want.status)
					}
					if r.Status != want.status {
						t.Fatalf("status = %s, want %s", r.Status, want.status)
					}
					if r.Revision != before.Revision+1 {
						t.Fatalf("revision %d -> %d, want one step", before.Revision, r.Revision)
					}
				}
				mustValid(t, r)
			})
		}
	}
	for name := range matrix {
		found := false
		for _, st := range matrixStates {
			found = found || st.name == name
		}
		if !found {
			t.Fatalf("matrix row %s has no state", name)
		}
	}
}

func TestAcceptQueued(t *testing.T) {
	r := mustAccept(t, testSpec(), t0)
	if r.Status != StatusQueued || r.Attempts != 0 || r.Epoch != 0 || r.Lease != nil {
		t.Fatalf("accepted record: %+v", r)
	}
	if !r.Deadline.Equal(t0.Add(30 * time.Minute)) {
		t.Fatalf("deadline %v", r.Deadline)
	}
	if !r.Claimable(t0) {
		t.Fatal("a queued job must be claimable")
	}
	if r.Idempotency.IsZero() {
		t.Fatal("the idempotency key was not fingerprinted")
	}
	s := testSpec()
	s.AcceleratorRequested = ""
	if r := mustAccept(t, s, t0); r.AcceleratorRequested != AcceleratorCPU {
		t.Fatalf("default accelerator %q, want cpu", r.AcceleratorRequested)
	}
}

func TestAcceptRejects(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Spec)
	}{
		{"request id prefix", func(s *Spec) { s.RequestID = "job_" + hex64('a') }},
		{"request id length", func(s *Spec) { s.RequestID = "req_abc" }},
		{"request id uppercase", func(s *Spec) { s.RequestID = "req_" + hex64('A') }},
		{"org", func(s *Spec) { s.OrgID = "" }},
		{"operation", func(s *Spec) { s.Operation = "resize" }},
		{"media", func(s *Spec) { s.Media = "audio" }},
		{"accelerator", func(s *Spec) { s.AcceleratorRequested = "tpu" }},
		{"format", func(s *Spec) { s.Format = "" }},
		{"frames", func(s *Spec) { s.FrameCount = 0 }},
		{"credits", func(s *Spec) { s.CreditsHeld = -1 }},
		{"work bound on an image", func(s *Spec) { s.MaxWork = time.Minute }},
		{"negative work bound", func(s *Spec) {
			s.Media, s.Format, s.MaxWork = MediaVideo, "MP4", -time.Minute
		}},
		{"webhook", func(s *Spec) { s.WebhookID = "wh_nothex" }},
		{"batch", func(s *Spec) { s.BatchID = "bat_123" }},
		{"storage key alone", func(s *Spec) { s.StorageKey = "a/b.png" }},
		{"input blob", func(s *Spec) { s.Input.BlobKey = "" }},
		{"input digest", func(s *Spec) { s.Input.SHA256 = "xyz" }},
		{"input size", func(s *Spec) { s.Input.Size = 0 }},
		{"embed without watermark id", func(s *Spec) { s.WatermarkID = "" }},
		{"idempotency key", func(s *Spec) { s.IdempotencyKey = "short" }},
		{"detect with watermark id", func(s *Spec) { s.Operation = OperationDetect }},
		{"detect with storage", func(s *Spec) {
			*s = detectSpec()
			s.StorageDestinationID = "dst_1"
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := testSpec()
			c.edit(&s)
			if _, err := Accept(s, t0); !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
}

// TestClaimFencing checks that each claim gets a larger token and counts an attempt, and that renewing
// extends the lease from now without ever shortening it.
func TestClaimFencing(t *testing.T) {
	r := mustAccept(t, testSpec(), t0)
	l1 := mustClaim(t, r, "w1", claimAt, lease30)
	if l1.Token != 1 || r.Attempts != 1 || !r.StartedAt.Equal(claimAt) || !l1.ExpiresAt.Equal(claimAt.Add(lease30)) {
		t.Fatalf("first claim: lease %+v attempts %d started %v", l1, r.Attempts, r.StartedAt)
	}
	l, err := r.Renew(l1.Token, claimAt.Add(20*time.Second))
	if err != nil || !l.ExpiresAt.Equal(claimAt.Add(50*time.Second)) {
		t.Fatalf("renew: %+v %v", l, err)
	}
	before := r.Clone()
	if l, err := r.Renew(l1.Token, claimAt.Add(10*time.Second)); err != nil || !l.ExpiresAt.Equal(before.Lease.ExpiresAt) {
		t.Fatalf("an earlier renew shortened the lease: %+v %v", l, err)
	}
	unchanged(t, "renew that would shorten", before, r)
	if !r.Tick(claimAt.Add(50 * time.Second)) {
		t.Fatal("lease expiry did not move the job")
	}
	l2 := mustClaim(t, r, "w2", claimAt.Add(52*time.Second), lease30)
	if l2.Token <= l1.Token || r.Attempts != 2 || !r.StartedAt.Equal(claimAt) {
		t.Fatalf("second claim: token %d after %d, attempts %d, started %v", l2.Token, l1.Token, r.Attempts, r.StartedAt)
	}
	if _, err := r.Claim("", claimAt, lease30); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty worker id: %v", err)
	}
	if _, err := r.Claim("w3", claimAt, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("zero lease: %v", err)
	}
}

// TestCrashedWorker: a worker claims, stops renewing (crash), its lease expires, exactly one retry follows,
// another worker finishes, and the first worker's late result and renewals are refused.
func TestCrashedWorker(t *testing.T) {
	r := mustAccept(t, testSpec(), t0)
	old := mustClaim(t, r, "w1", claimAt, lease30)
	expiry := claimAt.Add(lease30)
	if r.Tick(expiry.Add(-time.Nanosecond)) {
		t.Fatal("tick before expiry moved the job")
	}
	if !r.Tick(expiry) {
		t.Fatal("tick at expiry did not move the job")
	}
	if r.Status != StatusRetrying || r.Attempts != 1 || r.LastError.Code != CodeWorkerLost ||
		!r.NextAttemptAt.Equal(expiry.Add(2*time.Second)) {
		t.Fatalf("after expiry: status %s attempts %d last %+v next %v", r.Status, r.Attempts, r.LastError, r.NextAttemptAt)
	}
	if r.Tick(expiry.Add(time.Second)) {
		t.Fatal("a second tick retried again")
	}
	if r.Claimable(expiry.Add(time.Second)) {
		t.Fatal("claimable during the backoff")
	}
	// The old worker wakes up and reports; nothing it says counts.
	before := r.Clone()
	if err := r.Succeed(old.Token, testOutput(), expiry.Add(time.Second)); !errors.Is(err, ErrStaleLease) {
		t.Fatalf("late success while retrying: %v", err)
	}
	if _, err := r.Renew(old.Token, expiry.Add(time.Second)); !errors.Is(err, ErrStaleLease) {
		t.Fatalf("late renew: %v", err)
	}
	unchanged(t, "late worker", before, r)

	next := mustClaim(t, r, "w2", r.NextAttemptAt, lease30)
	if r.Attempts != 2 || next.Token == old.Token {
		t.Fatalf("retry: attempts %d token %d", r.Attempts, next.Token)
	}
	before = r.Clone()
	err := r.Succeed(old.Token, testOutput(), r.NextAttemptAt.Add(time.Second))
	var se *StaleLeaseError
	if !errors.As(err, &se) || se.Token != old.Token || se.Current != next.Token {
		t.Fatalf("late success while another worker runs: %v", err)
	}
	unchanged(t, "late success", before, r)
	done := next.ClaimedAt.Add(5 * time.Second)
	if err := r.Succeed(next.Token, testOutput(), done); err != nil {
		t.Fatal(err)
	}
	before = r.Clone()
	if err := r.Succeed(old.Token, testOutput(), done.Add(time.Second)); !errors.Is(err, ErrTerminal) {
		t.Fatalf("late success after success: %v", err)
	}
	unchanged(t, "late success after success", before, r)
	if r.Attempts != 2 || r.Status != StatusSucceeded {
		t.Fatalf("final: %s after %d attempts", r.Status, r.Attempts)
	}
}

// TestWorkerGone: the cluster reports that a running attempt's worker left (its member was dropped): the
// attempt ends as at lease expiry (worker_lost, retryable, the same backoff) long before the lease would
// have expired, the departed worker's late renewals are refused, and a job that is not running is unchanged.
func TestWorkerGone(t *testing.T) {
	r := mustAccept(t, testSpec(), t0)
	old := mustClaim(t, r, "w1", claimAt, lease30)
	gone := claimAt.Add(3 * time.Second)
	if !r.WorkerGone(gone) {
		t.Fatal("WorkerGone did not end the running attempt")
	}
	if r.Status != StatusRetrying || r.Attempts != 1 || r.LastError.Code != CodeWorkerLost || !r.LastError.Retryable ||
		!r.NextAttemptAt.Equal(gone.Add(2*time.Second)) {
		t.Fatalf("after the worker left: status %s attempts %d last %+v next %v", r.Status, r.Attempts, r.LastError, r.NextAttemptAt)
	}
	before := r.Clone()
	if _, err := r.Renew(old.Token, gone.Add(time.Second)); !errors.Is(err, ErrStaleLease) {
		t.Fatalf("renew by the departed worker: %v", err)
	}
	if r.WorkerGone(gone.Add(time.Second)) {
		t.Fatal("WorkerGone changed a retrying job")
	}
	unchanged(t, "after the worker left", before, r)
	next := mustClaim(t, r, "w2", r.NextAttemptAt, lease30)
	if err := r.Succeed(next.Token, testOutput(), next.ClaimedAt.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	before = r.Clone()
	if r.WorkerGone(next.ClaimedAt.Add(2 * time.Second)) {
		t.Fatal("WorkerGone changed a succeeded job")
	}
	unchanged(t, "succeeded", before, r)
}

// TestAttemptsExhausted: five failed attempts with growing waits, then failed with the last error; a sixth
// claim is refused.
func TestAttemptsExhausted(t *testing.T) {
	for _, viaLease := range []bool{false, true} {
		name := "fail"
		if viaLease {
			name = "lease_expiry"
		}
		t.Run(name, func(t *testing.T) {
			r := mustAccept(t, testSpec(), t0)
			now := claimAt
			var waits []time.Duration
			for attempt := 1; attempt <= MaxAttempts; attempt++ {
				l := mustClaim(t, r, "w", now, lease30)
				if r.Attempts != attempt || l.Token != Token(attempt) {
					t.Fatalf("attempt %d: attempts %d token %d", attempt, r.Attempts, l.Token)
				}
				if viaLease {
					now = l.ExpiresAt
					r.Tick(now)
				} else {
					now = now.Add(time.Second)
					if err := r.Fail(l.Token, "codec_error", "boom", true, now); err != nil {
						t.Fatal(err)
					}
				}
				mustValid(t, r)
				if attempt < MaxAttempts {
					if r.Status != StatusRetrying {
						t.Fatalf("after attempt %d: %s", attempt, r.Status)
					}
					waits = append(waits, r.NextAttemptAt.Sub(now))
					now = r.NextAttemptAt
				}
			}
			if r.Status != StatusFailed || r.Attempts != MaxAttempts {
				t.Fatalf("after %d attempts: %s", r.Attempts, r.Status)
			}
			wantCode := "codec_error"
			if viaLease {
				wantCode = CodeWorkerLost
			}
			if r.ErrorCode != wantCode {
				t.Fatalf("error code %q, want %q", r.ErrorCode, wantCode)
			}
			want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second}
			if len(waits) != len(want) {
				t.Fatalf("waits %v", waits)
			}
			for i := range want {
				if waits[i] != want[i] {
					t.Fatalf("waits %v, want %v", waits, want)
				}
			}
			if _, err := r.Claim("w", now.Add(time.Hour), lease30); !errors.Is(err, ErrTerminal) {
				t.Fatalf("sixth claim: %v", err)
			}
		})
	}
}

func TestBackoffGrows(t *testing.T) {
	prev := time.Duration(0)
	for n := 1; n <= MaxAttempts; n++ {
		b := Backoff(n)
		if b <= prev {
			t.Fatalf("Backoff(%d) = %v not above %v", n, b, prev)
		}
		prev = b
	}
	if Backoff(1) != 2*time.Second || Backoff(4) != 16*time.Second || Backoff(0) != Backoff(1) {
		t.Fatalf("schedule: %v %v %v", Backoff(0), Backoff(1), Backoff(4))
	}
	if Backoff(1000) <= 0 {
		t.Fatal("Backoff overflowed")
	}
}

// TestRetryNotPastDeadline: a retry that could not start before the deadline fails the job at once with the
// attempt's own error instead of waiting for a timeout.
func TestRetryNotPastDeadline(t *testing.T) {
	r := running(t, time.Hour)
	at := r.Deadline.Add(-time.Second) // the 2 s wait would end after the deadline
	if err := r.Fail(1, "codec_error", "boom", true, at); err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusFailed || r.ErrorCode != "codec_error" {
		t.Fatalf("status %s code %q", r.Status, r.ErrorCode)
	}
	r = running(t, time.Hour)
	if err := r.Fail(1, "codec_error", "boom", true, r.Deadline.Add(-3*time.Second)); err != nil || r.Status != StatusRetrying {
		t.Fatalf("retry that fits: %s %v", r.Status, err)
	}
}

func TestDeadline(t *testing.T) {
	for _, st := range []string{"queued", "running", "retrying"} {
		t.Run(st, func(t *testing.T) {
			r := mustAccept(t, testSpec(), t0)
			if st != "queued" {
				mustClaim(t, r, "w1", claimAt, time.Hour)
			}
			if st == "retrying" {
				if err := r.Fail(1, "codec_error", "", true, claimAt); err != nil {
					t.Fatal(err)
				}
			}
			if at, ok := r.NextWake(); !ok || at.After(r.Deadline) {
				t.Fatalf("next wake %v %v after deadline %v", at, ok, r.Deadline)
			}
			if r.Tick(r.Deadline.Add(-time.Nanosecond)) {
				t.Fatal("tick before the deadline moved the job")
			}
			if !r.Tick(r.Deadline) {
				t.Fatal("tick at the deadline did nothing")
			}
			if r.Status != StatusFailed || r.ErrorCode != CodeDeadlineExceeded || r.Lease != nil ||
				!r.CompletedAt.Equal(r.Deadline) {
				t.Fatalf("after deadline: %+v", r)
			}
			mustValid(t, r)
			if _, ok := r.NextWake(); ok {
				t.Fatal("a failed job still wants waking")
			}
		})
	}
}

// TestDeadlineWinsOverLeaseExpiry: when the actor was away past both the lease expiry and the deadline
// (workers recovering), the job fails with deadline_exceeded.
func TestDeadlineWinsOverLeaseExpiry(t *testing.T) {
	r := running(t, lease30)
	r.Tick(t0.Add(2 * time.Hour))
	if r.Status != StatusFailed || r.ErrorCode != CodeDeadlineExceeded {
		t.Fatalf("%s %q", r.Status, r.ErrorCode)
	}
}

func TestDeadlineFor(t *testing.T) {
	cases := []struct {
		media  Media
		frames int
		want   time.Duration
	}{
		{MediaImage, 1, 30 * time.Minute},
		{MediaImage, 10000, 30 * time.Minute},
		{MediaDocument, 500, 30 * time.Minute},
		{MediaVideo, 0, 30 * time.Minute},
		{MediaVideo, 1, 30*time.Minute + 15*time.Second},
		{MediaVideo, 4, 31 * time.Minute},
		{MediaVideo, 120, 60 * time.Minute},
		{MediaVideo, 239, 90*time.Minute - 15*time.Second},
		{MediaVideo, 240, 90 * time.Minute},
		{MediaVideo, 241, 90 * time.Minute},
		{MediaVideo, 1800, 90 * time.Minute},
		{MediaVideo, 1 << 62, 90 * time.Minute},
	}
	for _, c := range cases {
		if got := DeadlineFor(c.media, c.frames); got != c.want {
			t.Errorf("DeadlineFor(%s, %d) = %v, want %v", c.media, c.frames, got, c.want)
		}
	}
	s := testSpec()
	s.Media, s.Format, s.FrameCount = MediaVideo, "MP4", 100
	r := mustAccept(t, s, t0)
	if want := t0.Add(55 * time.Minute); !r.Deadline.Equal(want) {
		t.Fatalf("video deadline %v, want %v", r.Deadline, want)
	}
}

func TestSucceedValidatesOutput(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Output)
	}{
		{"blob", func(o *Output) { o.BlobKey = "" }},
		{"size", func(o *Output) { o.Size = 0 }},
		{"digest", func(o *Output) { o.SHA256 = "nope" }},
		{"content type", func(o *Output) { o.ContentType = "" }},
		{"accelerator", func(o *Output) { o.Accelerator = "" }},
		{"negative charge", func(o *Output) { o.Charge = -1 }},
		{"charge above hold", func(o *Output) { o.Charge = 4 }},
		{"no asset", func(o *Output) { o.AssetID = "" }},
		{"no source asset", func(o *Output) { o.SourceAssetID = "" }},
		{"same asset twice", func(o *Output) { o.SourceAssetID = o.AssetID }},
		{"other watermark", func(o *Output) { o.WatermarkID = hex64('e') }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := running(t, lease30)
			before := r.Clone()
			o := testOutput()
			c.edit(&o)
			if err := r.Succeed(1, o, claimAt.Add(time.Second)); !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v", err)
			}
			unchanged(t, "invalid output", before, r)
		})
	}
	// Detection: no assets, no watermark id.
	r := mustAccept(t, detectSpec(), t0)
	l := mustClaim(t, r, "w", claimAt, lease30)
	bad := detectOutput()
	bad.AssetID = "ast_x"
	if err := r.Succeed(l.Token, bad, claimAt); !errors.Is(err, ErrInvalid) {
		t.Fatalf("detection with an asset: %v", err)
	}
	if err := r.Succeed(l.Token, detectOutput(), claimAt); err != nil {
		t.Fatal(err)
	}
	// A repeat of the same token with another output is not a duplicate.
	other := detectOutput()
	other.Size++
	if err := r.Succeed(l.Token, other, claimAt); !errors.Is(err, ErrTerminal) {
		t.Fatalf("different output after success: %v", err)
	}
}

func TestSucceedRecordsOutcome(t *testing.T) {
	r := running(t, lease30)
	done := claimAt.Add(10 * time.Second)
	if err := r.Succeed(1, testOutput(), done); err != nil {
		t.Fatal(err)
	}
	if !r.CompletedAt.Equal(done) || !r.ResultExpiresAt.Equal(done.Add(24*time.Hour)) || *r.Output != testOutput() {
		t.Fatalf("outcome: %+v", r)
	}
	if !r.ResultAvailable(done.Add(24*time.Hour-time.Nanosecond)) || r.ResultAvailable(done.Add(24*time.Hour)) {
		t.Fatal("result availability window is not 24 h")
	}
}

func TestFailValidates(t *testing.T) {
	r := running(t, lease30)
	before := r.Clone()
	for _, code := range []string{"", "Bad-Code", "with space", string(make([]byte, 65))} {
		if err := r.Fail(1, code, "", true, claimAt); !errors.Is(err, ErrInvalid) {
			t.Fatalf("code %q: %v", code, err)
		}
	}
	unchanged(t, "invalid fail", before, r)
	long := make([]byte, 5000)
	for i := range long {
		long[i] = 'x'
	}
	long[maxDetail-1], long[maxDetail] = 0xc3, 0xa9 // a two-byte rune cut in half by the bound
	long[10] = 0xff                                 // invalid UTF-8 is replaced, not kept
	if err := r.Fail(1, "codec_error", string(long), false, claimAt); err != nil {
		t.Fatal(err)
	}
	if len(r.ErrorDetail) > maxDetail || !utf8.ValidString(r.ErrorDetail) || strings.HasSuffix(r.ErrorDetail, "\xc3") {
		t.Fatalf("detail kept %d bytes, valid %v", len(r.ErrorDetail), utf8.ValidString(r.ErrorDetail))
	}
}

func TestCancel(t *testing.T) {
	r := running(t, lease30)
	if err := r.Cancel(claimAt); err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusFailed || r.ErrorCode != CodeCancelled || r.Lease != nil {
		t.Fatalf("%+v", r)
	}
	before := r.Clone()
	if err := r.Cancel(claimAt.Add(time.Second)); err != nil {
		t.Fatalf("repeated cancel: %v", err)
	}
	unchanged(t, "repeated cancel", before, r)
	if err := r.Succeed(1, testOutput(), claimAt); !errors.Is(err, ErrTerminal) {
		t.Fatalf("success after cancel: %v", err)
	}
}

// TestCancelWaiting: a cancelled batch's cancel fails its files that wait for a worker and lets a running
// one finish its attempt: a success stands (charged), a final failure keeps its own code, and an attempt that
// would have it wait for a worker again (retryable failure, lost worker, hand-back, disk wait) fails it with
// "cancelled" instead of retrying it.
func TestCancelWaiting(t *testing.T) {
	at := claimAt.Add(10 * time.Second)
	diskWaiting := func(t *testing.T) *Record {
		r := running(t, lease30)
		if err := r.WaitForDisk(1, "no space for the result", at); err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, tc := range []struct {
		name   string
		build  func(t *testing.T) *Record
		then   func(r *Record) error // after the cancel
		status Status
		code   string
		charge int64
	}{
		{"queued", func(t *testing.T) *Record { return mustAccept(t, testSpec(), t0) }, nil, StatusFailed, CodeCancelled, 0},
		{"waiting for disk space", diskWaiting, nil, StatusFailed, CodeCancelled, 0},
		{"running", func(t *testing.T) *Record { return running(t, lease30) }, nil, StatusRunning, "", 0},
		{"running, then succeeds", func(t *testing.T) *Record { return running(t, lease30) },
			func(r *Record) error { return r.Succeed(1, testOutput(), at) }, StatusSucceeded, "", 1},
		{"running, then fails for good", func(t *testing.T) *Record { return running(t, lease30) },
			func(r *Record) error { return r.Fail(1, "invalid_media", "bad", false, at) }, StatusFailed, "invalid_media", 0},
		{"running, then fails retryably", func(t *testing.T) *Record { return running(t, lease30) },
			func(r *Record) error { return r.Fail(1, "codec_error", "boom", true, at) }, StatusFailed, CodeCancelled, 0},
		{"running, then its lease lapses", func(t *testing.T) *Record { return running(t, lease30) },
			func(r *Record) error { r.Tick(claimAt.Add(lease30)); return nil }, StatusFailed, CodeCancelled, 0},
		{"running, then its worker is gone", func(t *testing.T) *Record { return running(t, lease30) },
			func(r *Record) error { r.WorkerGone(at); return nil }, StatusFailed, CodeCancelled, 0},
		{"running, then handed back", func(t *testing.T) *Record { return running(t, lease30) },
			func(r *Record) error { return r.HandBack(1, at) }, StatusFailed, CodeCancelled, 0},
		{"running, then waits for disk space", func(t *testing.T) *Record { return running(t, lease30) },
			func(r *Record) error { return r.WaitForDisk(1, "no space", at) }, StatusFailed, CodeCancelled, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.build(t)
			if err := r.CancelWaiting(claimAt.Add(5 * time.Second)); err != nil {
				t.Fatalf("cancel: %v", err)
			}
			mustValid(t, r)
			before := r.Clone()
			if err := r.CancelWaiting(claimAt.Add(6 * time.Second)); err != nil {
				t.Fatalf("repeated cancel: %v", err)
			}
			unchanged(t, "repeated cancel", before, r)
			if tc.then != nil {
				if err := tc.then(r); err != nil {
					t.Fatalf("after the cancel: %v", err)
				}
				mustValid(t, r)
			}
			var charge int64
			if r.Output != nil {
				charge = r.Output.Charge
			}
			if r.Status != tc.status || r.ErrorCode != tc.code || charge != tc.charge {
				t.Fatalf("status %s, code %q, charge %d; want %s, %q, %d", r.Status, r.ErrorCode, charge,
					tc.status, tc.code, tc.charge)
			}
			if r.Status == StatusRunning && !r.CancelPending {
				t.Fatal("a running job does not remember the cancel")
			}
		})
	}
	// A job that ended before the cancel keeps its outcome.
	r := running(t, lease30)
	if err := r.Succeed(1, testOutput(), at); err != nil {
		t.Fatal(err)
	}
	if err := r.CancelWaiting(at); !errors.Is(err, ErrTerminal) || r.Status != StatusSucceeded {
		t.Fatalf("cancel of a succeeded job: %v, %s", err, r.Status)
	}
}

func TestNextWake(t *testing.T) {
	r := mustAccept(t, testSpec(), t0)
	if at, ok := r.NextWake(); !ok || !at.Equal(r.Deadline) {
		t.Fatalf("queued: %v %v", at, ok)
	}
	l := mustClaim(t, r, "w", claimAt, lease30)
	if at, _ := r.NextWake(); !at.Equal(l.ExpiresAt) {
		t.Fatalf("running: %v", at)
	}
	if err := r.Fail(l.Token, "codec_error", "", true, claimAt); err != nil {
		t.Fatal(err)
	}
	if at, _ := r.NextWake(); !at.Equal(r.NextAttemptAt) {
		t.Fatalf("retrying: %v", at)
	}
}

// TestValidateRejectsCorruptRecords: a loaded record that breaks an invariant is refused rather than acted on.
func TestValidateRejectsCorruptRecords(t *testing.T) {
	cases := []struct {
		name  string
		state string
		edit  func(*Record)
	}{
		{"unknown status", "queued", func(r *Record) { r.Status = "paused" }},
		{"bad request id", "queued", func(r *Record) { r.RequestID = "req_1" }},
		{"no org", "queued", func(r *Record) { r.OrgID = "" }},
		{"bad operation", "queued", func(r *Record) { r.Operation = "x" }},
		{"bad media", "queued", func(r *Record) { r.Media = "x" }},
		{"bad accelerator", "queued", func(r *Record) { r.AcceleratorRequested = "" }},
		{"no deadline", "queued", func(r *Record) { r.Deadline = time.Time{} }},
		{"queued with attempts", "queued", func(r *Record) { r.Attempts, r.Epoch = 1, 1 }},
		{"too many attempts", "running", func(r *Record) { r.Attempts, r.Epoch = MaxAttempts+1, MaxAttempts+1 }},
		{"epoch behind attempts", "running", func(r *Record) { r.Epoch = 0 }},
		{"running without lease", "running", func(r *Record) { r.Lease = nil }},
		{"lease token off epoch", "running", func(r *Record) { r.Lease.Token = 9 }},
		{"lease on queued", "queued", func(r *Record) { r.Lease = &Lease{WorkerID: "w"} }},
		{"retrying without wait", "retrying_waiting", func(r *Record) { r.NextAttemptAt = time.Time{} }},
		{"retrying without error", "retrying_waiting", func(r *Record) { r.LastError = nil }},
		{"retrying at max attempts", "retrying_waiting", func(r *Record) { r.Attempts, r.Epoch = MaxAttempts, MaxAttempts }},
		{"wait while running", "running", func(r *Record) { r.NextAttemptAt = t0 }},
		{"succeeded without output", "succeeded", func(r *Record) { r.Output = nil }},
		{"succeeded without completion", "succeeded", func(r *Record) { r.CompletedAt = time.Time{} }},
		{"succeeded without expiry", "succeeded", func(r *Record) { r.ResultExpiresAt = time.Time{} }},
		{"charge above hold", "succeeded", func(r *Record) { r.Output.Charge = r.CreditsHeld + 1 }},
		{"succeeded with error", "succeeded", func(r *Record) { r.ErrorCode = "x" }},
		{"failed without code", "failed", func(r *Record) { r.ErrorCode = "" }},
		{"failed with output", "failed", func(r *Record) { r.Output = &Output{} }},
		{"released on success", "succeeded", func(r *Record) { r.Settlement.CreditsReleased = true }},
		{"charged on failure", "failed", func(r *Record) { r.Settlement.CreditsCharged = true }},
		{"notified while active", "running", func(r *Record) { r.Settlement.WebhookNotified = true }},
		{"completed while active", "running", func(r *Record) { r.CompletedAt = t0 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r *Record
			for _, st := range matrixStates {
				if st.name == c.state {
					r, _ = st.build(t)
				}
			}
			if r == nil {
				t.Fatalf("no state %s", c.state)
			}
			mustValid(t, r)
			c.edit(r)
			if err := r.Validate(); !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestAbort(t *testing.T) {
	r := mustAccept(t, testSpec(), t0)
	if err := r.Abort("Bad", "", t0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid code: %v", err)
	}
	if err := r.Abort("input_missing", "the input blob is gone", t0); err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusFailed || r.ErrorCode != "input_missing" || r.Attempts != 0 {
		t.Fatalf("%+v", r)
	}
	mustValid(t, r)
	before := r.Clone()
	if err := r.Abort("input_missing", "again", t0.Add(time.Second)); err != nil {
		t.Fatalf("repeat: %v", err)
	}
	unchanged(t, "repeated abort", before, r)
	if err := r.Cancel(t0); !errors.Is(err, ErrTerminal) {
		t.Fatalf("cancel after abort: %v", err)
	}
	if fx := r.PendingEffects(t0); len(fx) != 1 || fx[0].Kind != EffectReleaseCredits {
		t.Fatalf("effects %+v", fx)
	}
}
