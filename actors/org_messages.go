package actors

import (
	"time"

	"filigrane/internal/problem"
)

// KindOrg is the cluster kind of the organization actor; its identity is the organization id.
const KindOrg = "org"

// Reply codes of the org actor: how a command went, between actors and their callers. They cross the wire
// as strings and are not API error codes; the HTTP layer decides which problem a reply becomes. The refusals a
// client sees as such carry the error table's code (internal/problem).
const (
	ReplyOK                  = ""
	ReplyNotFound            = "not_found"
	ReplyInsufficientCredits = string(problem.InsufficientCredits)
	ReplyConcurrencyLimit    = string(problem.ConcurrencyLimit)
	ReplyConflict            = "operation_conflict"
	ReplyUnknownOperation    = "unknown_operation"
	ReplyUnknownMember       = "unknown_member"
	// ReplyRetry means the actor lost ownership of its record (another activation wrote it) and stopped;
	// the command was not applied and can be sent again.
	ReplyRetry    = "retry"
	ReplyInternal = "internal"
)

// OrgAdmit checks that the member may act for the organization and counts one request against the plan's
// per-minute limit.
type OrgAdmit struct {
	OrgID    string
	MemberID string
}

// OrgAdmitReply answers OrgAdmit.
type OrgAdmitReply struct {
	OrgID     string // as OrgReply.OrgID
	Code      string
	Role      Role
	Plan      string
	Allowed   bool // false: the per-minute limit is used up
	Limit     int
	Remaining int
	ResetAt   time.Time
	// SlotsFull tells that a direct request would find no concurrency slot free now, so that the HTTP layer
	// can answer 429 before reading an upload. It is a hint, not a reservation: OrgReserve stays the check that
	// counts. Slots that the next command may reap (see reapStaleHolds) count as free, and a node of an earlier
	// version leaves it false, which lets the request through to that check.
	SlotsFull bool
}

// OrgReserve holds credits (and optionally a concurrency slot) for an operation. Idempotent by Op.
type OrgReserve struct {
	OrgID   string
	Op      string
	Credits int64
	Slot    bool // also take a concurrency slot
	Batch   bool // the slot is for a batch file (plans with 2+ slots keep one for direct requests)
	// Holder is the worker id (Pool.EdgeWorkerID) of the process that settles the operation itself within
	// the request, with no record that anyone else would settle it from (a synchronous detection without an
	// Idempotency-Key). Once the cluster knows that process gone (killed, or declared dead), the hold and
	// slot are released at the organization's next command instead of after hours. Empty for jobs: their
	// records settle their holds.
	Holder string
}

// OrgCharge settles an operation's hold at the actual price and frees its slot. Idempotent by Op.
type OrgCharge struct {
	OrgID   string
	Op      string
	Credits int64
}

// OrgRelease frees an operation's hold and slot without charging. Idempotent by Op.
type OrgRelease struct {
	OrgID string
	Op    string
}

// OrgGrant adds credits. Idempotent by Op.
type OrgGrant struct {
	OrgID   string
	Op      string
	Credits int64
}

// OrgGet reads the organization's balance.
type OrgGet struct {
	OrgID string
}

// OrgRefresh tells the actor that the organization record was changed outside it (members added, removed or
// given another role from the console): it drops the record it holds, so the next message reads it again and
// admission sees the change at once rather than after the activation ends.
type OrgRefresh struct {
	OrgID string
}

// OrgReply answers every org command but OrgAdmit.
type OrgReply struct {
	// OrgID is the organization whose actor answered (empty from a node of an earlier version): a client
	// refuses a reply of another organization's (ErrCrossedReply).
	OrgID     string
	Code      string
	Detail    string
	Plan      string
	Balance   int64
	Held      int64
	Available int64
	Slots     int
}

// OrgMessages lists the org actor's message types, for registration with the wire codec.
func OrgMessages() []any {
	return []any{OrgAdmit{}, OrgAdmitReply{}, OrgReserve{}, OrgCharge{}, OrgRelease{}, OrgGrant{}, OrgGet{}, OrgRefresh{}, OrgReply{}}
}
