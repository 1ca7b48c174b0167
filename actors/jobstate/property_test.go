package jobstate

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// TestProperty drives records with random sequences of claims, renewals, successes, failures, cancels, ticks,
// duplicates, stale tokens and effect settlements under a clock that moves by random steps, acting as a
// careless actor would (performing effects twice, crashing before marking them), and checks after every step:
//   - the record's invariants hold and attempts never exceed MaxAttempts;
//   - a refused command changes nothing; a terminal record never changes except for its settlement;
//   - at most one success, and it came from the holder of the live lease;
//   - the charge is owed only after success, released credits only after failure, never both, and each is
//     settled at most once (it never reappears once marked).
func TestProperty(t *testing.T) {
	seeds := uint64(400)
	if testing.Short() {
		seeds = 50
	}
	// Count how runs end, so that a change that makes some ending unreachable fails the test instead of
	// quietly shrinking what it explores.
	endings := map[string]int{}
	for seed := uint64(1); seed <= seeds; seed++ {
		r := propertyRun(t, fmt.Sprintf("seed %d", seed), rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), 120)
		end := string(r.Status)
		if r.Status == StatusFailed {
			end += "/" + r.ErrorCode
		}
		if r.Status.Terminal() && r.Committed() {
			end += "/committed"
		}
		endings[end]++
	}
	t.Logf("endings over %d runs: %v", seeds, endings)
	for _, want := range []string{"succeeded/committed", "failed/codec_error/committed", "failed/" + CodeWorkerLost,
		"failed/" + CodeDeadlineExceeded, "failed/" + CodeCancelled} {
		found := false
		for end := range endings {
			found = found || len(end) >= len(want) && end[:len(want)] == want
		}
		if !found {
			t.Errorf("no run ended %s", want)
		}
	}
}

// chooser is where a run takes its decisions from: a seeded generator, or the fuzzer's bytes.
type chooser interface{ IntN(n int) int }

func propertyRun(t *testing.T, label string, rng chooser, steps int) *Record {
	s := testSpec()
	switch rng.IntN(3) {
	case 1:
		s.Media, s.Format, s.FrameCount = MediaVideo, "MP4", 1+rng.IntN(400)
	case 2:
		s = detectSpec()
	}
	if rng.IntN(2) == 0 {
		s.WebhookID = "wh_" + hex64('1')[:32]
	}
	out := testOutput()
	if s.Operation == OperationDetect {
		out = detectOutput()
	}
	now := t0
	r := mustAccept(t, s, now)
	workers := []string{"w1", "w2", "w3"}
	var tokens []Token // every token ever handed out, so stale ones get replayed
	var terminal *Record
	successes := 0
	var charged, released int // settlements marked
	var chargeSeen, releaseSeen bool
	var last func() error // the previous command, to deliver it twice

	for step := 0; step < steps; step++ {
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("%s step %d (%s, t+%v): %s", label, step, r.Status, now.Sub(t0), fmt.Sprintf(format, args...))
		}
		// Move the clock: mostly small steps around lease and backoff scales, sometimes long gaps.
		switch rng.IntN(10) {
		case 0:
			now = now.Add(time.Duration(rng.IntN(20)) * time.Minute)
		case 1, 2, 3:
			now = now.Add(time.Duration(rng.IntN(40)) * time.Second)
		default:
			now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
		}
		before := r.Clone()
		pickToken := func() Token {
			if len(tokens) == 0 || rng.IntN(8) == 0 {
				return Token(rng.IntN(7))
			}
			return tokens[rng.IntN(len(tokens))]
		}
		var cmd func() error
		kind := rng.IntN(9)
		at := now
		switch kind {
		case 0:
			w := workers[rng.IntN(len(workers))]
			d := time.Duration(5+rng.IntN(60)) * time.Second
			cmd = func() error {
				l, err := r.Claim(w, at, d)
				if err == nil {
					tokens = append(tokens, l.Token)
				}
				return err
			}
		case 1:
			tok := pickToken()
			cmd = func() error { _, err := r.Renew(tok, at); return err }
		case 2:
			tok := pickToken()
			live := r.Status == StatusRunning && r.Lease.Token == tok && at.Before(r.Lease.ExpiresAt) &&
				at.Before(r.Deadline)
			cmd = func() error {
				wasSucceeded := r.Status == StatusSucceeded
				err := r.Succeed(tok, out, at)
				if err == nil && !wasSucceeded {
					successes++
					if !live {
						fail("success accepted from token %d without the live lease", tok)
					}
				}
				return err
			}
		case 3:
			tok := pickToken()
			retry := rng.IntN(3) > 0
			cmd = func() error { return r.Fail(tok, "codec_error", "boom", retry, at) }
		case 4:
			if rng.IntN(12) != 0 {
				continue // cancels are rare, so that most runs reach the other endings
			}
			if rng.IntN(2) == 0 {
				cmd = func() error { return r.CancelWaiting(at) } // a cancelled batch's: a running attempt finishes
			} else {
				cmd = func() error { return r.Cancel(at) }
			}
		case 5, 6:
			cmd = func() error { r.Tick(at); return nil }
		case 7:
			// The actor performs a pending effect, and sometimes crashes before marking it settled.
			fx := r.PendingEffects(now)
			if len(fx) == 0 {
				continue
			}
			e := fx[rng.IntN(len(fx))]
			if e.Kind == EffectDispatch || e.Kind == EffectScheduleWake || rng.IntN(4) == 0 {
				continue
			}
			cmd = func() error { return r.MarkSettled(e.Kind) }
		case 8:
			if last == nil {
				continue
			}
			cmd = last // duplicate delivery
		}
		err := cmd()
		last = cmd
		if err != nil {
			if !reflect.DeepEqual(before, r) {
				fail("refused command changed the record: %v", err)
			}
		}
		if (r.Revision == before.Revision) != reflect.DeepEqual(before, r) {
			fail("revision %d -> %d does not match whether the record changed", before.Revision, r.Revision)
		}
		if verr := r.Validate(); verr != nil {
			fail("%v", verr)
		}
		if r.Attempts > MaxAttempts {
			fail("attempts %d", r.Attempts)
		}
		if successes > 1 {
			fail("%d successes", successes)
		}
		if terminal != nil {
			a, b := terminal.Clone(), r.Clone()
			a.Settlement, b.Settlement, a.Revision, b.Revision = Settlement{}, Settlement{}, 0, 0
			if !reflect.DeepEqual(a, b) {
				fail("terminal record changed:\nwas %+v\nnow %+v", a, b)
			}
		} else if r.Status.Terminal() {
			terminal = r.Clone()
		}
		for _, e := range r.PendingEffects(now) {
			switch e.Kind {
			case EffectChargeCredits:
				chargeSeen = true
				if r.Status != StatusSucceeded || r.Settlement.CreditsCharged || e.Amount != r.Output.Charge {
					fail("charge owed on %s record (charged %v)", r.Status, r.Settlement.CreditsCharged)
				}
			case EffectReleaseCredits:
				releaseSeen = true
				if r.Status != StatusFailed || r.Settlement.CreditsReleased {
					fail("release owed on %s record", r.Status)
				}
			case EffectWriteAssets:
				if r.Status != StatusSucceeded || s.Operation != OperationEmbed {
					fail("assets owed on %s %s", r.Status, s.Operation)
				}
			case EffectNotifyWebhook:
				if !r.Committed() || s.WebhookID == "" {
					fail("webhook owed before the commit")
				}
			case EffectDispatch:
				if !r.Claimable(now) {
					fail("dispatch of an unclaimable job")
				}
			}
		}
		if r.Settlement.CreditsCharged && before.Settlement.CreditsCharged != r.Settlement.CreditsCharged {
			charged++
		}
		if r.Settlement.CreditsReleased && before.Settlement.CreditsReleased != r.Settlement.CreditsReleased {
			released++
		}
		if charged > 1 || released > 1 || (charged > 0 && released > 0) || (chargeSeen && releaseSeen) {
			fail("charged %d released %d (owed charge %v release %v)", charged, released, chargeSeen, releaseSeen)
		}
		if !now.Before(r.Deadline) && r.Claimable(now) {
			fail("claimable past the deadline")
		}
	}
	return r
}

// byteChooser takes decisions from fuzzer input, one byte each, and zeros once it runs out.
type byteChooser struct {
	b []byte
	i int
}

func (c *byteChooser) IntN(n int) int {
	if c.i >= len(c.b) {
		return 0
	}
	v := int(c.b[c.i])
	c.i++
	return v % n
}

// FuzzCommands checks the property-test invariants on command sequences chosen by the fuzzer
// (go test -fuzz FuzzCommands ./actors/jobstate).
func FuzzCommands(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 5, 0, 0, 4, 0, 1, 2, 3, 2, 1, 1, 0, 7, 7, 7})
	seed := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 4; i++ {
		b := make([]byte, 400)
		for j := range b {
			b[j] = byte(seed.IntN(256))
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		propertyRun(t, "fuzz", &byteChooser{b: b}, len(b)/4+1)
	})
}
