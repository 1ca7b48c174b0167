package jobstate

import (
	"errors"
	"testing"
	"time"
)

// settleAll marks every commit effect settled, as the actor does after charging or refunding.
func settleAll(t *testing.T, r *Record) {
	t.Helper()
	for _, fx := range r.PendingEffects(r.CompletedAt) {
		if err := r.MarkSettled(fx.Kind); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReplayAt(t *testing.T) {
	active := mustAccept(t, testSpec(), t0)
	if got := active.ReplayAt(t0, false); got != ReplayPending {
		t.Fatalf("queued job: %v", got)
	}

	succeeded := mustAccept(t, testSpec(), t0)
	l := mustClaim(t, succeeded, "w", t0, time.Minute)
	if err := succeeded.Succeed(l.Token, testOutput(), t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := succeeded.ReplayAt(t0.Add(time.Second), false); got != ReplayPending {
		t.Fatalf("succeeded before its charge is settled: %v, want pending (the outcome is not committed)", got)
	}
	settleAll(t, succeeded)
	done := t0.Add(time.Second)
	cases := []struct {
		name    string
		at      time.Time
		deleted bool
		want    Replay
	}{
		{"fresh result", done, false, ReplaySucceeded},
		{"asset deleted", done, true, ReplayGone},
		{"last moment", done.Add(ResultRetention - time.Nanosecond), false, ReplaySucceeded},
		{"expired", done.Add(ResultRetention), false, ReplayGone},
	}
	for _, c := range cases {
		if got := succeeded.ReplayAt(c.at, c.deleted); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}

	failed := mustAccept(t, testSpec(), t0)
	l = mustClaim(t, failed, "w", t0, time.Minute)
	if err := failed.Fail(l.Token, "invalid_image", "corrupt", false, t0); err != nil {
		t.Fatal(err)
	}
	if got := failed.ReplayAt(t0, false); got != ReplayPending {
		t.Fatalf("failed before its refund is settled: %v", got)
	}
	settleAll(t, failed)
	// A failure stays the answer, also long after (no result to expire) and whatever the caller passes.
	for _, at := range []time.Time{t0, t0.Add(48 * time.Hour)} {
		if got := failed.ReplayAt(at, true); got != ReplayFailed {
			t.Fatalf("failed job at %v: %v", at, got)
		}
	}
}

func TestOptionsConflict(t *testing.T) {
	r := mustAccept(t, testSpec(), t0) // a cpu image embed
	if err := r.OptionsConflict(OperationEmbed, MediaImage, ""); err != nil {
		t.Fatalf("same options (default accelerator): %v", err)
	}
	for _, c := range []struct {
		op    Operation
		media Media
		acc   Accelerator
	}{
		{OperationEmbed, MediaImage, AcceleratorGPU},
		{OperationDetect, MediaImage, AcceleratorCPU},
		{OperationEmbed, MediaDocument, AcceleratorCPU},
	} {
		if err := r.OptionsConflict(c.op, c.media, c.acc); !errors.Is(err, ErrIdempotencyConflict) {
			t.Errorf("%s %s on %s: %v, want a conflict", c.media, c.op, c.acc, err)
		}
	}
}
