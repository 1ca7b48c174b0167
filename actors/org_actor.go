package actors

import (
	"context"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/rs/zerolog"

	"filigrane/actors/durable"
	"filigrane/actors/jobstate"
	"filigrane/actors/outbox"
	"filigrane/internal/clock"
	"filigrane/persistence"
)

// Deps are what every actor of this package needs. One value is built per node and shared by the kinds.
type Deps struct {
	Store   persistence.Store
	Clock   clock.Clock
	Catalog Catalog
	Logger  zerolog.Logger
	// Respond answers the current request with a plain Go value (the wire codec wraps it).
	Respond func(ctx actor.Context, v any)
	// IdleTimeout passivates an actor that received nothing for this long.
	IdleTimeout time.Duration
	// StoreTimeout bounds each storage call made while handling one message.
	StoreTimeout time.Duration
	// PeerTimeout bounds each request to another actor made while handling one message (a job actor asking
	// the organization actor to hold, charge or release credits). It must outlast the cluster's failure
	// detection: when the peer's node dies, its identity moves only once the survivors declare the node
	// dead, and until then the request finds no answer. Zero means StoreTimeout.
	PeerTimeout time.Duration
	// ActorDelta, when set, is told when an actor of a kind starts (+1) and stops (-1), for metrics.
	ActorDelta func(kind string, delta int)
	// Reply sends a plain Go value to a saved requester (an answer given after the request's handler ended).
	Reply func(ctx actor.Context, to *actor.PID, v any)
	// Caller reaches other actors (the job actor asks the org actor); set once the cluster member started.
	Caller *LateCaller
	// Dispatch hands a claimable job to this node's worker pool; it must not block.
	Dispatch func(rec *jobstate.Record)
	// Outbox takes the effects actors hand over after a commit (a job's announcements); the node's sweeper
	// delivers them. With no Store set, hand-overs fail and the effects stay owed.
	Outbox outbox.Outbox
	// NotifyBatch tells a batch that one of its item jobs ended; it must not block (a hint, see
	// jobActor.perform).
	NotifyBatch func(batchID, requestID string)
	// Outcomes reads and deletes the outcome files workers keep beside stored results (OutcomeFiles; nil:
	// none are kept, in a cluster).
	Outcomes *OutcomeFiles
	// Lifetime is the node's lifetime: it ends once the node stopped its actors, and every storage call an
	// actor makes derives from it (bounded by StoreTimeout), so that none outlives the node's store. Nil
	// means a context that never ends (tests spawning actors directly).
	Lifetime context.Context
}

// lifetime is Lifetime, or a context that never ends.
func (d *Deps) lifetime() context.Context {
	if d.Lifetime != nil {
		return d.Lifetime
	}
	return context.Background()
}

func (d *Deps) orgs() OrgClient { return OrgClient{Caller: d.Caller} }

func (d *Deps) actorDelta(kind string, delta int) {
	if d.ActorDelta != nil {
		d.ActorDelta(kind, delta)
	}
}

// OrgProps returns the props of the organization actor.
func OrgProps(d *Deps) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &orgActor{deps: d} })
}

// orgActor owns one organization's credits, concurrency slots and request window. Its durable state is
// loaded on activation and written with compare-and-set before any reply: when the write finds another
// version, another activation owns the organization, so this one answers ReplyRetry and stops.
type orgActor struct {
	deps  *Deps
	id    string
	cell  *durable.Cell[OrgState, *OrgState]
	state *OrgState // the cell's record; nil when the organization does not exist

	windowEnd time.Time
	windowN   int
}

// respond answers the request in ctx with r, naming this organization in it, so that a reply that reaches
// another request than the one it answers (as a late reply to an earlier incarnation of a node once did) is
// recognised and refused by OrgClient instead of showing one organization's state to another's request.
func (a *orgActor) respond(ctx actor.Context, r any) {
	switch v := r.(type) {
	case *OrgReply:
		v.OrgID = a.id
	case *OrgAdmitReply:
		v.OrgID = a.id
	}
	a.deps.Respond(ctx, r)
}

func (a *orgActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		a.deps.actorDelta(KindOrg, 1)
	case *actor.Stopped:
		a.deps.actorDelta(KindOrg, -1)
	case *pcluster.ClusterInit:
		a.id = msg.Identity.Identity
		if a.deps.IdleTimeout > 0 {
			ctx.SetReceiveTimeout(a.deps.IdleTimeout)
		}
	case *actor.ReceiveTimeout:
		ctx.Poison(ctx.Self())
	case *OrgAdmit:
		a.admit(ctx, msg)
	case *OrgReserve:
		a.mutate(ctx, msg.OrgID, func(s *OrgState, now time.Time) error {
			plan, _ := a.deps.Catalog.Plan(s.Plan)
			if msg.Slot {
				if err := s.AcquireSlot(msg.Op, msg.Batch, max(plan.Concurrency, 1), now); err != nil {
					return err
				}
			}
			if err := s.Reserve(msg.Op, msg.Credits, now); err != nil {
				s.ReleaseSlot(msg.Op)
				return err
			}
			if h, ok := s.Holds[msg.Op]; ok && msg.Holder != "" {
				h.Holder = msg.Holder
				s.Holds[msg.Op] = h
			}
			return nil
		})
	case *OrgCharge:
		a.mutate(ctx, msg.OrgID, func(s *OrgState, now time.Time) error {
			s.ReleaseSlot(msg.Op)
			return s.Charge(msg.Op, msg.Credits, now)
		})
	case *OrgRelease:
		a.mutate(ctx, msg.OrgID, func(s *OrgState, now time.Time) error {
			s.ReleaseSlot(msg.Op)
			return s.Release(msg.Op, now)
		})
	case *OrgGrant:
		a.mutate(ctx, msg.OrgID, func(s *OrgState, now time.Time) error { return s.Grant(msg.Op, msg.Credits, now) })
	case *OrgGet:
		if !a.load(ctx, msg.OrgID) {
			return
		}
		a.respond(ctx, a.reply(ReplyOK, ""))
	case *OrgRefresh:
		// The next load makes a fresh cell and reads the record (handing over any pending effects again,
		// which is idempotent). The request window stays: it is this activation's count.
		a.cell, a.state = nil, nil
		a.respond(ctx, &OrgReply{Code: ReplyOK})
	}
}

// saveFailed is what every durable actor does when writing its record failed: it logs and stops the
// activation, and returns the reply code. ReplyRetry when another activation owns the identity (a fenced
// compare-and-set: the caller re-sends and a fresh activation reloads), ReplyInternal otherwise.
func (d *Deps) saveFailed(ctx actor.Context, err error, kind, id string) string {
	ctx.Poison(ctx.Self())
	if durable.Fenced(err) {
		d.Logger.Warn().Str(kind, id).Msg(kind + " written by another activation; stopping")
		return ReplyRetry
	}
	d.Logger.Error().Err(err).Str(kind, id).Msg("save " + kind)
	return ReplyInternal
}

// storeCtx bounds one storage call made while an actor handles a message.
func (d *Deps) storeCtx() (context.Context, context.CancelFunc) {
	t := d.StoreTimeout
	if t <= 0 {
		t = 10 * time.Second
	}
	return context.WithTimeout(d.lifetime(), t)
}

// peerCtx bounds a request to another actor (PeerTimeout).
func (d *Deps) peerCtx() (context.Context, context.CancelFunc) {
	if d.PeerTimeout <= 0 {
		return d.storeCtx()
	}
	return context.WithTimeout(d.lifetime(), d.PeerTimeout)
}

// load reads the record on first use. It answers and returns false when the caller must stop handling.
func (a *orgActor) load(ctx actor.Context, orgID string) bool {
	if a.id == "" {
		a.id = orgID // activated without ClusterInit (tests spawning the actor directly)
	}
	if a.cell == nil {
		a.cell = Orgs{Store: a.deps.Store, Clock: a.deps.Clock}.Cell(a.id, a.deps.StoreTimeout)
	}
	st, err := a.cell.Load(a.deps.lifetime())
	if err != nil {
		a.deps.Logger.Error().Err(err).Str("org", a.id).Msg("load organization")
		a.respond(ctx, &OrgReply{Code: ReplyInternal, Detail: "organization state unavailable"})
		ctx.Poison(ctx.Self())
		return false
	}
	a.state = st
	if a.state == nil || orgID != a.id {
		a.respond(ctx, &OrgReply{Code: ReplyNotFound})
		return false
	}
	return true
}

func (a *orgActor) reply(code, detail string) *OrgReply {
	return &OrgReply{Code: code, Detail: detail, Plan: a.state.Plan, Balance: a.state.Balance,
		Held: a.state.Held(), Available: a.state.Available(), Slots: len(a.state.Slots)}
}

// mutate applies fn to a copy of the state, persists it with compare-and-set, and only then answers.
func (a *orgActor) mutate(ctx actor.Context, orgID string, fn func(*OrgState, time.Time) error) {
	if !a.load(ctx, orgID) {
		return
	}
	next := a.state.Clone()
	a.reapStaleHolds(next, a.deps.Clock.Now())
	if err := fn(next, a.deps.Clock.Now()); err != nil {
		a.respond(ctx, a.reply(codeOf(err), err.Error()))
		return
	}
	if err := a.cell.Save(a.deps.lifetime(), next); err != nil {
		code := a.deps.saveFailed(ctx, err, KindOrg, a.id)
		a.respond(ctx, &OrgReply{Code: code, Detail: "organization state changed elsewhere; retry"})
		return
	}
	a.state = next
	a.respond(ctx, a.reply(ReplyOK, ""))
}

// staleHoldAge is when a hold is surely orphaned: longer than any job may run (90 minutes for video) plus
// margin. Holds of synchronous detections last seconds.
const staleHoldAge = 3 * time.Hour

// reapStaleHolds releases holds whose operation can no longer settle them: a crash between reserving and
// creating the job record leaves a hold that no job owns, and a synchronous detection's node killed before
// it charged leaves a hold that only that process would have settled. A hold is released once it is older
// than any job may run, or at once when its holder's process is known gone (Hold.Holder: nothing else
// settles it, and a plan's concurrency slot is with it), and only when no active job record exists for it;
// a job that still runs keeps its hold.
func (a *orgActor) reapStaleHolds(s *OrgState, now time.Time) {
	for _, op := range s.HoldOps() {
		h := s.Holds[op]
		holderGone := a.holderGone(h)
		if !holderGone && now.Sub(h.At) < staleHoldAge {
			continue
		}
		sctx, cancel := a.deps.storeCtx()
		_, err := a.deps.Store.Get(sctx, []byte(prefixActiveJob+op))
		cancel()
		if !errors.Is(err, persistence.ErrNotFound) {
			continue // active job, or storage trouble: leave it for the next time
		}
		s.ReleaseSlot(op)
		if err := s.Release(op, now); err != nil {
			a.deps.Logger.Warn().Err(err).Str("org", a.id).Str("op", op).Msg("release stale hold")
			continue
		}
		a.deps.Logger.Warn().Str("org", a.id).Str("op", op).Str("holder", h.Holder).Bool("holder_gone", holderGone).
			Msg("released a hold no job owns")
	}
}

// holderGone reports whether the process that alone settles h (Hold.Holder) is known gone.
func (a *orgActor) holderGone(h Hold) bool {
	return h.Holder != "" && a.deps.Caller != nil && a.deps.Caller.MemberGone(WorkerNode(h.Holder), WorkerMember(h.Holder))
}

// slotsFull reports whether a direct request would find every concurrency slot taken: admit's hint for an
// early 429 (OrgAdmitReply.SlotsFull). A slot whose hold reapStaleHolds might release at the next command
// (holder gone, or older than any job) counts as free, since telling needs a store read: the hint errs
// towards letting a request through to OrgReserve, never towards refusing one that would get a slot.
func (a *orgActor) slotsFull(concurrency int, now time.Time) bool {
	if len(a.state.Slots) < concurrency {
		return false
	}
	taken := 0
	for op := range a.state.Slots {
		if h, ok := a.state.Holds[op]; ok && (a.holderGone(h) || now.Sub(h.At) >= staleHoldAge) {
			continue
		}
		taken++
	}
	return taken >= concurrency
}

// admit checks membership and counts the request in a fixed one-minute window. The window lives in memory:
// after a passivation or a move to another node it starts again, which can only grant a few extra requests.
func (a *orgActor) admit(ctx actor.Context, msg *OrgAdmit) {
	if !a.load(ctx, msg.OrgID) {
		return
	}
	m, ok := a.state.Member(msg.MemberID)
	if !ok || m.RemovedAt != nil {
		a.respond(ctx, &OrgAdmitReply{Code: ReplyUnknownMember, Plan: a.state.Plan})
		return
	}
	plan, _ := a.deps.Catalog.Plan(a.state.Plan)
	limit := max(plan.RequestsPerMinute, 1)
	now := a.deps.Clock.Now()
	if !now.Before(a.windowEnd) {
		a.windowEnd = now.Truncate(time.Minute).Add(time.Minute)
		a.windowN = 0
	}
	allowed := a.windowN < limit
	if allowed {
		a.windowN++
	}
	a.respond(ctx, &OrgAdmitReply{Code: ReplyOK, Role: m.Role, Plan: a.state.Plan, Allowed: allowed,
		Limit: limit, Remaining: limit - a.windowN, ResetAt: a.windowEnd,
		SlotsFull: a.slotsFull(max(plan.Concurrency, 1), now)})
}

func codeOf(err error) string {
	switch {
	case errors.Is(err, ErrInsufficientCredits):
		return ReplyInsufficientCredits
	case errors.Is(err, ErrConcurrencyLimit):
		return ReplyConcurrencyLimit
	case errors.Is(err, ErrOperationConflict):
		return ReplyConflict
	case errors.Is(err, ErrUnknownOperation):
		return ReplyUnknownOperation
	}
	return ReplyInternal
}
