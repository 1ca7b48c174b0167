package actors

import (
	"errors"
	"fmt"
	"sort"
	"time"
)

// Role is a member's role in an organization.
type Role string

// Roles, from most to least privileged.
const (
	RoleOwner  Role = "owner"
	RoleAdmin  Role = "admin"
	RoleMember Role = "member"
)

// ParseRole validates a role name.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleOwner, RoleAdmin, RoleMember:
		return r, nil
	}
	return "", fmt.Errorf("unknown role %q (want owner, admin or member)", s)
}

// Errors of the organization state machine. They cross the wire as codes (see orgReplyCode).
var (
	ErrInsufficientCredits = errors.New("insufficient credits")
	ErrConcurrencyLimit    = errors.New("plan concurrency limit reached")
	ErrOperationConflict   = errors.New("operation id reused with a different meaning")
	ErrUnknownOperation    = errors.New("unknown operation")
	ErrUnknownMember       = errors.New("unknown member")
)

// Member is a person in an organization.
type Member struct {
	ID      string    `msgpack:"id"`
	Name    string    `msgpack:"name"`
	Role    Role      `msgpack:"role"`
	AddedAt time.Time `msgpack:"added_at"`
	// RemovedAt is set when the member leaves; their keys stop working (403).
	RemovedAt *time.Time `msgpack:"removed_at,omitempty"`
}

// Hold is credits set aside for an accepted operation until it is charged or released.
type Hold struct {
	Amount int64     `msgpack:"amount"`
	At     time.Time `msgpack:"at"`
	// Holder is the worker id of the process that settles the hold in the request that took it (OrgReserve's
	// Holder), or empty.
	Holder string `msgpack:"holder,omitempty"`
}

// Settled remembers how an operation ended, so that a replayed command answers the same and moves no credit.
type Settled struct {
	Kind   string    `msgpack:"kind"` // grant, charge or release
	Amount int64     `msgpack:"amount"`
	At     time.Time `msgpack:"at"`
}

// Slot is one of the plan's concurrency slots, held by an active job.
type Slot struct {
	Batch bool      `msgpack:"batch"`
	At    time.Time `msgpack:"at"`
}

// LedgerEntry is one line of an organization's credit history.
type LedgerEntry struct {
	Seq       uint64    `msgpack:"seq" json:"seq"`
	At        time.Time `msgpack:"at" json:"at"`
	Operation string    `msgpack:"op" json:"operation"`
	Kind      string    `msgpack:"kind" json:"kind"` // grant, reserve, charge, release
	Amount    int64     `msgpack:"amount" json:"amount"`
	Balance   int64     `msgpack:"balance" json:"balance"`
	Held      int64     `msgpack:"held" json:"held"`
}

// settledRetention is how long a settled operation id is remembered for replays; it matches the longest
// idempotency window of the API (batch keys, 30 days).
const settledRetention = 30 * 24 * time.Hour

// OrgState is an organization's durable record and the pure state machine over it: every method checks a
// command, changes the state and appends to Journal, or returns an error and changes nothing. No I/O happens
// here; the org actor and the admin command persist the result with compare-and-set.
type OrgState struct {
	ID        string    `msgpack:"id"`
	Name      string    `msgpack:"name"`
	Plan      string    `msgpack:"plan"`
	CreatedAt time.Time `msgpack:"created_at"`
	Members   []Member  `msgpack:"members"`

	// Balance is the credits owned; Available() subtracts holds. Balance never goes below zero because a
	// charge never exceeds its hold and holds never exceed the balance.
	Balance int64              `msgpack:"balance"`
	Holds   map[string]Hold    `msgpack:"holds"`
	Settled map[string]Settled `msgpack:"settled"`
	Slots   map[string]Slot    `msgpack:"slots"`

	// Seq numbers ledger entries. Journal holds entries not yet copied to their own ledger keys.
	Seq     uint64        `msgpack:"seq"`
	Journal []LedgerEntry `msgpack:"journal"`
}

// SchemaVersion is the layout version of stored organization records.
func (*OrgState) SchemaVersion() uint16 { return 1 }

// SchemaVersion is the layout version of stored ledger entries.
func (*LedgerEntry) SchemaVersion() uint16 { return 1 }

// NewOrgState returns a fresh organization.
func NewOrgState(id, name, plan string, now time.Time) *OrgState {
	return &OrgState{ID: id, Name: name, Plan: plan, CreatedAt: now,
		Holds: map[string]Hold{}, Settled: map[string]Settled{}, Slots: map[string]Slot{}}
}

func (s *OrgState) ensureMaps() {
	if s.Holds == nil {
		s.Holds = map[string]Hold{}
	}
	if s.Settled == nil {
		s.Settled = map[string]Settled{}
	}
	if s.Slots == nil {
		s.Slots = map[string]Slot{}
	}
}

// Held is the sum of all holds.
func (s *OrgState) Held() int64 {
	var n int64
	for _, h := range s.Holds {
		n += h.Amount
	}
	return n
}

// Available is the balance not held.
func (s *OrgState) Available() int64 { return s.Balance - s.Held() }

// Member returns the member with id, including removed ones.
func (s *OrgState) Member(id string) (Member, bool) {
	for _, m := range s.Members {
		if m.ID == id {
			return m, true
		}
	}
	return Member{}, false
}

// AddMember adds a member; adding an existing id with the same role is a no-op.
func (s *OrgState) AddMember(id, name string, role Role, now time.Time) error {
	if id == "" {
		return errors.New("member id is empty")
	}
	if m, ok := s.Member(id); ok {
		if m.Role == role && m.RemovedAt == nil {
			return nil
		}
		return fmt.Errorf("member %q already exists", id)
	}
	s.Members = append(s.Members, Member{ID: id, Name: name, Role: role, AddedAt: now})
	return nil
}

func (s *OrgState) record(now time.Time, op, kind string, amount int64) {
	s.Seq++
	s.Journal = append(s.Journal, LedgerEntry{Seq: s.Seq, At: now, Operation: op, Kind: kind, Amount: amount,
		Balance: s.Balance, Held: s.Held()})
}

// Grant adds credits once per operation id.
func (s *OrgState) Grant(op string, amount int64, now time.Time) error {
	s.ensureMaps()
	if amount <= 0 {
		return fmt.Errorf("grant of %d credits: amount must be positive", amount)
	}
	if st, ok := s.Settled[op]; ok {
		if st.Kind == "grant" && st.Amount == amount {
			return nil
		}
		return ErrOperationConflict
	}
	if _, ok := s.Holds[op]; ok {
		return ErrOperationConflict
	}
	s.Balance += amount
	s.Settled[op] = Settled{Kind: "grant", Amount: amount, At: now}
	s.record(now, op, "grant", amount)
	return nil
}

// Reserve holds amount credits for op. A replay of a held or settled op succeeds without holding again; a
// shortfall holds nothing.
func (s *OrgState) Reserve(op string, amount int64, now time.Time) error {
	s.ensureMaps()
	if amount < 0 {
		return fmt.Errorf("reserve of %d credits: amount must not be negative", amount)
	}
	if h, ok := s.Holds[op]; ok {
		if h.Amount != amount {
			return ErrOperationConflict
		}
		return nil
	}
	if st, ok := s.Settled[op]; ok {
		if st.Kind == "grant" {
			return ErrOperationConflict
		}
		return nil
	}
	if s.Available() < amount {
		return ErrInsufficientCredits
	}
	s.Holds[op] = Hold{Amount: amount, At: now}
	s.record(now, op, "reserve", amount)
	return nil
}

// Charge settles op's hold by taking amount (at most the hold) from the balance and freeing the rest. A replay
// after the charge succeeds and takes nothing more.
func (s *OrgState) Charge(op string, amount int64, now time.Time) error {
	s.ensureMaps()
	if st, ok := s.Settled[op]; ok {
		if st.Kind == "charge" && st.Amount == amount {
			return nil
		}
		return ErrOperationConflict
	}
	h, ok := s.Holds[op]
	if !ok {
		return ErrUnknownOperation
	}
	if amount < 0 || amount > h.Amount {
		return fmt.Errorf("charge of %d credits against a hold of %d: %w", amount, h.Amount, ErrOperationConflict)
	}
	delete(s.Holds, op)
	s.Balance -= amount
	s.Settled[op] = Settled{Kind: "charge", Amount: amount, At: now}
	s.record(now, op, "charge", amount)
	return nil
}

// Release frees op's hold without charging. Releasing an unknown or already released op is a no-op so that
// failure paths can release unconditionally; releasing a charged op is a conflict.
func (s *OrgState) Release(op string, now time.Time) error {
	s.ensureMaps()
	if st, ok := s.Settled[op]; ok {
		if st.Kind == "release" {
			return nil
		}
		return ErrOperationConflict
	}
	h, ok := s.Holds[op]
	if !ok {
		return nil
	}
	delete(s.Holds, op)
	s.Settled[op] = Settled{Kind: "release", Amount: h.Amount, At: now}
	s.record(now, op, "release", h.Amount)
	return nil
}

// AcquireSlot takes a concurrency slot for op. Plans with two or more slots keep one for direct requests, so
// batch work may use at most concurrency-1.
func (s *OrgState) AcquireSlot(op string, batch bool, concurrency int, now time.Time) error {
	s.ensureMaps()
	if _, ok := s.Slots[op]; ok {
		return nil
	}
	if len(s.Slots) >= concurrency {
		return ErrConcurrencyLimit
	}
	if batch && concurrency >= 2 {
		n := 0
		for _, sl := range s.Slots {
			if sl.Batch {
				n++
			}
		}
		if n >= concurrency-1 {
			return ErrConcurrencyLimit
		}
	}
	s.Slots[op] = Slot{Batch: batch, At: now}
	return nil
}

// ReleaseSlot frees op's slot; a missing slot is a no-op.
func (s *OrgState) ReleaseSlot(op string) { delete(s.Slots, op) }

// Prune forgets settled operations older than the idempotency window.
func (s *OrgState) Prune(now time.Time) {
	for op, st := range s.Settled {
		if now.Sub(st.At) > settledRetention {
			delete(s.Settled, op)
		}
	}
}

// Clone returns a deep copy, so that a command can be tried without touching the committed state.
func (s *OrgState) Clone() *OrgState {
	c := *s
	c.Members = append([]Member(nil), s.Members...)
	c.Holds = make(map[string]Hold, len(s.Holds))
	for k, v := range s.Holds {
		c.Holds[k] = v
	}
	c.Settled = make(map[string]Settled, len(s.Settled))
	for k, v := range s.Settled {
		c.Settled[k] = v
	}
	c.Slots = make(map[string]Slot, len(s.Slots))
	for k, v := range s.Slots {
		c.Slots[k] = v
	}
	c.Journal = append([]LedgerEntry(nil), s.Journal...)
	return &c
}

// HoldOps lists the operation ids currently holding credits, sorted.
func (s *OrgState) HoldOps() []string {
	ops := make([]string, 0, len(s.Holds))
	for op := range s.Holds {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	return ops
}
