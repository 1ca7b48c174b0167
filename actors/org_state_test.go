package actors

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestLedgerProperty runs random sequences of grants, reserves, charges, releases and replays of all of them,
// and checks after every step that no credit is lost or counted twice and the balance never goes negative.
func TestLedgerProperty(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for seed := uint64(1); seed <= 300; seed++ {
		r := rand.New(rand.NewPCG(seed, seed*7919))
		s := NewOrgState("org_x", "x", "trial", now)
		ops := map[string]*opModel{}
		var granted, charged int64
		grants := map[string]int64{}
		for step := 0; step < 200; step++ {
			op := fmt.Sprintf("op%d", r.IntN(25))
			switch r.IntN(5) {
			case 0:
				g := fmt.Sprintf("grant%d", r.IntN(8))
				amount := int64(1 + r.IntN(5))
				if prev, ok := grants[g]; ok {
					amount = prev // a replay must carry the same amount
				}
				if err := s.Grant(g, amount, now); err != nil {
					t.Fatalf("seed %d: grant %s: %v", seed, g, err)
				}
				if _, ok := grants[g]; !ok {
					grants[g] = amount
					granted += amount
				}
			case 1, 2:
				m := ops[op]
				amount := int64(r.IntN(4))
				if m != nil {
					amount = m.amount
				}
				before := s.Available()
				err := s.Reserve(op, amount, now)
				switch {
				case m != nil:
					if err != nil {
						t.Fatalf("seed %d: replayed reserve %s: %v", seed, op, err)
					}
				case before < amount:
					if !errors.Is(err, ErrInsufficientCredits) {
						t.Fatalf("seed %d: reserve %d with %d available: err %v", seed, amount, before, err)
					}
				default:
					if err != nil {
						t.Fatalf("seed %d: reserve %s: %v", seed, op, err)
					}
					ops[op] = &opModel{held: true, amount: amount}
				}
			case 3:
				m := ops[op]
				err := s.Charge(op, chargeAmount(m), now)
				switch {
				case m == nil:
					if !errors.Is(err, ErrUnknownOperation) {
						t.Fatalf("seed %d: charge of unknown %s: %v", seed, op, err)
					}
				case m.released:
					if !errors.Is(err, ErrOperationConflict) {
						t.Fatalf("seed %d: charge after release %s: %v", seed, op, err)
					}
				default:
					if err != nil {
						t.Fatalf("seed %d: charge %s: %v", seed, op, err)
					}
					if !m.charged {
						m.charged, m.held, m.chargedAmount = true, false, chargeAmount(m)
						charged += m.chargedAmount
					}
				}
			case 4:
				m := ops[op]
				err := s.Release(op, now)
				switch {
				case m != nil && m.charged:
					if !errors.Is(err, ErrOperationConflict) {
						t.Fatalf("seed %d: release after charge %s: %v", seed, op, err)
					}
				default:
					if err != nil {
						t.Fatalf("seed %d: release %s: %v", seed, op, err)
					}
					if m != nil {
						m.released, m.held = true, false
					}
				}
			}
			var held int64
			for _, m := range ops {
				if m.held {
					held += m.amount
				}
			}
			if s.Balance != granted-charged {
				t.Fatalf("seed %d step %d: balance %d, want granted %d - charged %d", seed, step, s.Balance, granted, charged)
			}
			if s.Held() != held {
				t.Fatalf("seed %d step %d: held %d, want %d", seed, step, s.Held(), held)
			}
			if s.Balance < 0 || s.Available() < 0 {
				t.Fatalf("seed %d step %d: balance %d available %d went negative", seed, step, s.Balance, s.Available())
			}
		}
		// Every op appears at most once as a charge in the journal.
		seen := map[string]int{}
		for _, e := range s.Journal {
			if e.Kind == "charge" {
				seen[e.Operation]++
				if seen[e.Operation] > 1 {
					t.Fatalf("seed %d: %s charged twice", seed, e.Operation)
				}
			}
		}
	}
}

// chargeAmount charges the full hold for even amounts and one less for odd ones, so partial charges (a GPU
// hold charged at the CPU price) are exercised too.
func chargeAmount(m *opModel) int64 {
	if m == nil {
		return 1
	}
	return m.amount - m.amount%2
}

// opModel is what a correct ledger must have done with one operation.
type opModel struct {
	held, charged, released bool
	amount, chargedAmount   int64
}

func TestReserveShortfallHoldsNothing(t *testing.T) {
	now := time.Now()
	s := NewOrgState("o", "o", "trial", now)
	if err := s.Grant("g", 2, now); err != nil {
		t.Fatal(err)
	}
	if err := s.Reserve("a", 3, now); !errors.Is(err, ErrInsufficientCredits) {
		t.Fatalf("reserve 3 of 2: %v", err)
	}
	if s.Held() != 0 || len(s.Journal) != 1 {
		t.Fatalf("a refused reserve left held=%d journal=%d", s.Held(), len(s.Journal))
	}
}

func TestSlotsKeepOneForDirectRequests(t *testing.T) {
	now := time.Now()
	s := NewOrgState("o", "o", "growth", now)
	if err := s.AcquireSlot("b1", true, 2, now); err != nil {
		t.Fatal(err)
	}
	if err := s.AcquireSlot("b2", true, 2, now); !errors.Is(err, ErrConcurrencyLimit) {
		t.Fatalf("second batch slot on a 2-slot plan: %v", err)
	}
	if err := s.AcquireSlot("d1", false, 2, now); err != nil {
		t.Fatalf("direct request with one slot free: %v", err)
	}
	if err := s.AcquireSlot("d2", false, 2, now); !errors.Is(err, ErrConcurrencyLimit) {
		t.Fatalf("third job on a 2-slot plan: %v", err)
	}
	if err := s.AcquireSlot("d1", false, 2, now); err != nil {
		t.Fatalf("replayed acquire: %v", err)
	}
	s.ReleaseSlot("b1")
	if err := s.AcquireSlot("d2", false, 2, now); err != nil {
		t.Fatalf("after release: %v", err)
	}
	one := NewOrgState("o", "o", "trial", now)
	if err := one.AcquireSlot("b", true, 1, now); err != nil {
		t.Fatalf("a 1-slot plan lets a batch file run: %v", err)
	}
}
