package jobstate

import (
	"errors"
	"strings"
	"testing"
	"time"

	"filigrane/persistence"
)

// TestWaitForDisk: an attempt that met a node low on disk space does not count: the job retries after a wait
// that doubles from 2 s up to 30 s, for more tries than MaxAttempts, the record stays valid (retrying with no
// attempt counted) through a store round trip, a repeat is stale, and a real attempt afterwards counts as the
// first. Near the deadline the wait ends at it, and Tick fails the job with deadline_exceeded saying the disk
// was low, owing a refund.
func TestWaitForDisk(t *testing.T) {
	r := mustAccept(t, testSpec(), t0)
	now := t0.Add(time.Second)
	want := []time.Duration{2, 4, 8, 16, 30, 30, 30}
	for i, w := range want {
		l := mustClaim(t, r, "n1/w0/aa", now, 30*time.Second)
		if err := r.WaitForDisk(l.Token, "the result could not be stored", now); err != nil {
			t.Fatal(err)
		}
		if r.Status != StatusRetrying || r.Attempts != 0 || r.DiskWaits != i+1 || !r.NextAttemptAt.Equal(now.Add(w*time.Second)) ||
			!r.WaitingForDisk() || r.Claimable(now) {
			t.Fatalf("after low-disk try %d: %s, %d attempts, %d waits, next in %v, want a wait of %ds", i+1, r.Status,
				r.Attempts, r.DiskWaits, r.NextAttemptAt.Sub(now), w)
		}
		mustValid(t, r)
		if err := r.WaitForDisk(l.Token, "again", now); !errors.Is(err, ErrStaleLease) {
			t.Fatalf("a repeated low-disk report: %v, want a stale lease", err)
		}
		now = r.NextAttemptAt
	}
	b, err := persistence.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var got Record
	if err := persistence.Unmarshal(b, &got); err != nil || got.DiskWaits != len(want) || got.Validate() != nil {
		t.Fatalf("round trip: %v, %d waits, %v", err, got.DiskWaits, got.Validate())
	}

	l := mustClaim(t, r, "n2/w0/bb", now, 30*time.Second)
	if r.Attempts != 1 {
		t.Fatalf("the first counted attempt after the waits is number %d", r.Attempts)
	}
	if err := r.Fail(l.Token, "codec_error", "x", true, now); err != nil || r.WaitingForDisk() || !r.NextAttemptAt.Equal(now.Add(FirstBackoff)) {
		t.Fatalf("a real failure after the waits: %v, next in %v", err, r.NextAttemptAt.Sub(now))
	}

	// Near the deadline: the wait ends at it, and the deadline fails the job.
	now = r.Deadline.Add(-time.Second)
	l = mustClaim(t, r, "n2/w0/bb", now, 30*time.Second)
	if err := r.WaitForDisk(l.Token, "the result could not be stored", now); err != nil {
		t.Fatal(err)
	}
	if at, ok := r.NextWake(); !ok || !at.Equal(r.Deadline) || r.Claimable(r.Deadline) || r.Attempts != 1 {
		t.Fatalf("wait at the deadline: next wake %v (%v), claimable %v, %d attempts", at, ok, r.Claimable(r.Deadline), r.Attempts)
	}
	if !r.Tick(r.Deadline) || r.Status != StatusFailed || r.ErrorCode != CodeDeadlineExceeded ||
		!strings.Contains(r.ErrorDetail, "low on disk space") {
		t.Fatalf("at the deadline: %s %s %q", r.Status, r.ErrorCode, r.ErrorDetail)
	}
	if fx := r.PendingEffects(r.Deadline); len(fx) == 0 || fx[0].Kind != EffectReleaseCredits {
		t.Fatalf("effects of the failure: %+v, want the hold released", fx)
	}
	mustValid(t, r)
}

// TestDiskLapse: an attempt whose low-disk report could not be recorded (its lease ran out meanwhile) ends as
// a wait for disk space, not counted, once its lease expired: not before (the worker may still report), not
// for another attempt's token, not for a job that is no longer running, and not at the deadline, where Tick
// fails the job instead.
func TestDiskLapse(t *testing.T) {
	r := mustAccept(t, testSpec(), t0)
	now := t0.Add(time.Second)
	l := mustClaim(t, r, "n1/w0/aa", now, 30*time.Second)
	if r.DiskLapse(l.Token, "refused", l.ExpiresAt.Add(-time.Nanosecond)) || r.DiskLapse(l.Token+1, "refused", l.ExpiresAt) {
		t.Fatal("a lease not yet expired, or another attempt's, ended as a disk wait")
	}
	if !r.DiskLapse(l.Token, "the result could not be stored", l.ExpiresAt) {
		t.Fatal("an expired lease whose report was refused did not end as a disk wait")
	}
	if r.Status != StatusRetrying || r.Attempts != 0 || r.DiskWaits != 1 || !r.WaitingForDisk() ||
		!r.NextAttemptAt.Equal(l.ExpiresAt.Add(FirstBackoff)) {
		t.Fatalf("after the lapse: %s, %d attempts, %d waits, next at %v", r.Status, r.Attempts, r.DiskWaits, r.NextAttemptAt)
	}
	mustValid(t, r)
	if r.DiskLapse(l.Token, "again", l.ExpiresAt) || r.Tick(l.ExpiresAt) {
		t.Fatal("a retrying job changed again")
	}
	now = r.Deadline.Add(-time.Minute)
	l = mustClaim(t, r, "n1/w0/aa", now, 30*time.Second)
	if r.DiskLapse(l.Token, "refused", r.Deadline) {
		t.Fatal("a lapse at the deadline ended as a disk wait")
	}
}

// TestSucceedLapsed: an attempt whose success could not be recorded (its lease ran out meanwhile) succeeds with
// its stored result once its lease expired, not counted again: not before (the worker may still report), not
// for another attempt's token, not with an output the job would refuse, not at the deadline (Tick fails the job
// then), and not twice.
func TestSucceedLapsed(t *testing.T) {
	r := mustAccept(t, testSpec(), t0)
	l := mustClaim(t, r, "n1/w0/aa", t0.Add(time.Second), 30*time.Second)
	bad := testOutput()
	bad.Charge = r.CreditsHeld + 1
	if r.SucceedLapsed(l.Token, testOutput(), l.ExpiresAt.Add(-time.Nanosecond)) ||
		r.SucceedLapsed(l.Token+1, testOutput(), l.ExpiresAt) || r.SucceedLapsed(l.Token, bad, l.ExpiresAt) {
		t.Fatal("a lease not yet expired, another attempt's, or an output over the hold succeeded")
	}
	if !r.SucceedLapsed(l.Token, testOutput(), l.ExpiresAt) {
		t.Fatal("an expired lease whose success was refused did not succeed")
	}
	if r.Status != StatusSucceeded || r.Attempts != 1 || r.Output == nil || *r.Output != testOutput() ||
		!r.CompletedAt.Equal(l.ExpiresAt) {
		t.Fatalf("after the lapse: %s, %d attempts, output %+v", r.Status, r.Attempts, r.Output)
	}
	mustValid(t, r)
	if r.SucceedLapsed(l.Token, testOutput(), l.ExpiresAt) {
		t.Fatal("a succeeded job changed again")
	}
	r = mustAccept(t, testSpec(), t0)
	l = mustClaim(t, r, "n1/w0/aa", r.Deadline.Add(-time.Minute), 30*time.Second)
	if r.SucceedLapsed(l.Token, testOutput(), r.Deadline) {
		t.Fatal("a lapse at the deadline succeeded")
	}
}
