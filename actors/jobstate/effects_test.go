package jobstate

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func kinds(fx []Effect) []EffectKind {
	out := []EffectKind{}
	for _, e := range fx {
		out = append(out, e.Kind)
	}
	return out
}

func TestPendingEffectsActive(t *testing.T) {
	r := mustAccept(t, testSpec(), t0)
	fx := r.PendingEffects(t0)
	if !reflect.DeepEqual(fx, []Effect{{Kind: EffectDispatch}, {Kind: EffectScheduleWake, At: r.Deadline}}) {
		t.Fatalf("queued: %+v", fx)
	}
	l := mustClaim(t, r, "w", claimAt, lease30)
	if fx := r.PendingEffects(claimAt); !reflect.DeepEqual(fx, []Effect{{Kind: EffectScheduleWake, At: l.ExpiresAt}}) {
		t.Fatalf("running: %+v", fx)
	}
	if err := r.Fail(l.Token, "codec_error", "", true, claimAt); err != nil {
		t.Fatal(err)
	}
	wait := []Effect{{Kind: EffectScheduleWake, At: r.NextAttemptAt}}
	if fx := r.PendingEffects(claimAt); !reflect.DeepEqual(fx, wait) {
		t.Fatalf("retrying, waiting: %+v", fx)
	}
	ready := []Effect{{Kind: EffectDispatch}, {Kind: EffectScheduleWake, At: r.NextAttemptAt}}
	if fx := r.PendingEffects(r.NextAttemptAt); !reflect.DeepEqual(fx, ready) {
		t.Fatalf("retrying, ready: %+v", fx)
	}
	if err := r.MarkSettled(EffectReleaseCredits); !errors.Is(err, ErrInvalid) {
		t.Fatalf("settling on an active job: %v", err)
	}
}

// TestPendingEffectsTerminal walks each kind of ended job through its settlement in the order PendingEffects
// gives, checking that announcements wait for the commit and that settling is idempotent.
func TestPendingEffectsTerminal(t *testing.T) {
	wh := "wh_" + hex64('1')[:32]
	bat := "bat_" + hex64('2')[:32]
	cases := []struct {
		name    string
		spec    func() Spec
		succeed bool
		commit  []EffectKind
		after   []EffectKind
	}{
		{"embed success", testSpec, true, []EffectKind{EffectWriteAssets, EffectChargeCredits}, nil},
		{"embed success with webhook and storage", func() Spec {
			s := testSpec()
			s.WebhookID, s.StorageDestinationID, s.StorageKey = wh, "dst_1", "out/cat.png"
			return s
		}, true, []EffectKind{EffectWriteAssets, EffectChargeCredits}, []EffectKind{EffectDeliverStorage, EffectNotifyWebhook}},
		{"batch item success", func() Spec {
			s := testSpec()
			s.BatchID, s.WebhookID = bat, wh // batch files send no job events; the batch does
			return s
		}, true, []EffectKind{EffectWriteAssets, EffectChargeCredits}, []EffectKind{EffectNotifyBatch}},
		{"detect success", func() Spec {
			s := detectSpec()
			s.WebhookID = wh
			return s
		}, true, []EffectKind{EffectChargeCredits}, []EffectKind{EffectNotifyWebhook}},
		{"embed failure", func() Spec {
			s := testSpec()
			s.WebhookID, s.StorageDestinationID = wh, "dst_1"
			return s
		}, false, []EffectKind{EffectReleaseCredits}, []EffectKind{EffectNotifyWebhook}},
		{"batch item failure", func() Spec {
			s := testSpec()
			s.BatchID = bat
			return s
		}, false, []EffectKind{EffectReleaseCredits}, []EffectKind{EffectNotifyBatch}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.spec()
			r := mustAccept(t, s, t0)
			l := mustClaim(t, r, "w", claimAt, lease30)
			if c.succeed {
				out := testOutput()
				if s.Operation == OperationDetect {
					out = detectOutput()
				}
				if err := r.Succeed(l.Token, out, claimAt); err != nil {
					t.Fatal(err)
				}
			} else if err := r.Fail(l.Token, "invalid_media", "", false, claimAt); err != nil {
				t.Fatal(err)
			}
			if r.Committed() {
				t.Fatal("committed before any effect was settled")
			}
			fx := r.PendingEffects(claimAt)
			if got := kinds(fx); !reflect.DeepEqual(got, c.commit) {
				t.Fatalf("commit effects %v, want %v", got, c.commit)
			}
			for _, e := range fx {
				if e.Kind == EffectChargeCredits && e.Amount != r.Output.Charge {
					t.Fatalf("charge %d, output says %d", e.Amount, r.Output.Charge)
				}
			}
			for _, k := range c.after {
				if err := r.MarkSettled(k); !errors.Is(err, ErrInvalid) {
					t.Fatalf("announcing %s before the commit: %v", k, err)
				}
			}
			for _, e := range fx {
				if err := r.MarkSettled(e.Kind); err != nil {
					t.Fatal(err)
				}
				before := r.Clone()
				if err := r.MarkSettled(e.Kind); err != nil {
					t.Fatalf("settling %s again: %v", e.Kind, err)
				}
				unchanged(t, "settling again", before, r)
			}
			if !r.Committed() {
				t.Fatal("not committed after the commit effects")
			}
			if got := kinds(r.PendingEffects(claimAt)); !reflect.DeepEqual(got, append([]EffectKind{}, c.after...)) {
				t.Fatalf("after commit %v, want %v", got, c.after)
			}
			for _, k := range c.after {
				if err := r.MarkSettled(k); err != nil {
					t.Fatal(err)
				}
			}
			if fx := r.PendingEffects(claimAt.Add(time.Hour)); len(fx) != 0 {
				t.Fatalf("still pending: %+v", fx)
			}
			mustValid(t, r)
			// Effects the outcome does not owe are refused.
			for _, k := range []EffectKind{EffectDispatch, EffectScheduleWake, EffectChargeCredits,
				EffectReleaseCredits, EffectWriteAssets, EffectDeliverStorage, EffectNotifyBatch, EffectNotifyWebhook} {
				owed := false
				for _, o := range append(append([]EffectKind{}, c.commit...), c.after...) {
					owed = owed || o == k
				}
				if err := r.MarkSettled(k); owed != (err == nil) {
					t.Fatalf("settle %s (owed %v): %v", k, owed, err)
				}
			}
		})
	}
}
