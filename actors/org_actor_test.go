package actors_test

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"filigrane/actors"
	"filigrane/internal/admin"
	"filigrane/internal/clock"
)

type orgFixture struct {
	system *actor.ActorSystem
	deps   *actors.Deps
	orgID  string
	admin  admin.Admin
}

func newOrgFixture(t *testing.T, credits int64) *orgFixture {
	t.Helper()
	store := tempStore(t)
	clk := clock.NewManual(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	adm := admin.Admin{Store: store, Clock: clk, Catalog: actors.DefaultCatalog()}
	st, err := adm.CreateOrg(context.Background(), "Acme", "launch", credits)
	if err != nil {
		t.Fatal(err)
	}
	system := actor.NewActorSystem()
	t.Cleanup(system.Shutdown)
	deps := &actors.Deps{Store: store, Clock: clk, Catalog: actors.DefaultCatalog(), Logger: zerolog.Nop(),
		Respond: func(ctx actor.Context, v any) { ctx.Respond(v) }}
	return &orgFixture{system: system, deps: deps, orgID: st.ID, admin: adm}
}

func (f *orgFixture) ask(t *testing.T, pid *actor.PID, msg any) *actors.OrgReply {
	t.Helper()
	res, err := f.system.Root.RequestFuture(pid, msg, 5*time.Second).Result()
	if err != nil {
		t.Fatalf("request %T: %v", msg, err)
	}
	r, ok := res.(*actors.OrgReply)
	if !ok {
		t.Fatalf("reply %T, want *OrgReply", res)
	}
	return r
}

// TestOrgActorFencing forces two activations of one organization: the one that writes second finds the
// record changed, applies nothing, answers retry and stops; the credits reflect only the first.
func TestOrgActorFencing(t *testing.T) {
	f := newOrgFixture(t, 10)
	a := f.system.Root.Spawn(actors.OrgProps(f.deps))
	b := f.system.Root.Spawn(actors.OrgProps(f.deps))
	if r := f.ask(t, b, &actors.OrgGet{OrgID: f.orgID}); r.Code != actors.ReplyOK || r.Balance != 10 {
		t.Fatalf("b loads: %+v", r)
	}
	if r := f.ask(t, a, &actors.OrgReserve{OrgID: f.orgID, Op: "req_a", Credits: 3}); r.Code != actors.ReplyOK || r.Available != 7 {
		t.Fatalf("a reserves: %+v", r)
	}
	if r := f.ask(t, b, &actors.OrgReserve{OrgID: f.orgID, Op: "req_b", Credits: 4}); r.Code != actors.ReplyRetry {
		t.Fatalf("stale activation b reserved: %+v", r)
	}
	st, _, err := f.admin.Balance(context.Background(), f.orgID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if st.Held() != 3 || len(st.Holds) != 1 {
		t.Fatalf("holds after fencing: %+v", st.Holds)
	}
	// A fresh activation reloads and applies b's command.
	c := f.system.Root.Spawn(actors.OrgProps(f.deps))
	if r := f.ask(t, c, &actors.OrgReserve{OrgID: f.orgID, Op: "req_b", Credits: 4}); r.Code != actors.ReplyOK || r.Available != 3 {
		t.Fatalf("fresh activation reserves: %+v", r)
	}
}

func TestOrgActorIdempotentCommands(t *testing.T) {
	f := newOrgFixture(t, 5) // launch plan: 1 concurrency slot
	a := f.system.Root.Spawn(actors.OrgProps(f.deps))
	for i := 0; i < 3; i++ {
		if r := f.ask(t, a, &actors.OrgReserve{OrgID: f.orgID, Op: "req_1", Credits: 2, Slot: true}); r.Code != actors.ReplyOK || r.Available != 3 || r.Slots != 1 {
			t.Fatalf("reserve #%d: %+v", i, r)
		}
	}
	if r := f.ask(t, a, &actors.OrgReserve{OrgID: f.orgID, Op: "req_2", Credits: 1, Slot: true}); r.Code != actors.ReplyConcurrencyLimit || r.Available != 3 {
		t.Fatalf("second job on a 1-slot plan: %+v", r)
	}
	for i := 0; i < 3; i++ {
		if r := f.ask(t, a, &actors.OrgCharge{OrgID: f.orgID, Op: "req_1", Credits: 2}); r.Code != actors.ReplyOK || r.Balance != 3 || r.Slots != 0 {
			t.Fatalf("charge #%d: %+v", i, r)
		}
	}
	if r := f.ask(t, a, &actors.OrgReserve{OrgID: f.orgID, Op: "req_3", Credits: 4}); r.Code != actors.ReplyInsufficientCredits || r.Held != 0 {
		t.Fatalf("reserve beyond balance: %+v", r)
	}
	if r := f.ask(t, a, &actors.OrgGet{OrgID: "org_other"}); r.Code != actors.ReplyNotFound {
		t.Fatalf("another organization through this activation: %+v", r)
	}
	_, entries, err := f.admin.Balance(context.Background(), f.orgID, 100)
	if err != nil {
		t.Fatal(err)
	}
	kinds := ""
	for _, e := range entries {
		kinds += e.Kind + " "
	}
	if kinds != "grant reserve charge " {
		t.Fatalf("ledger = %q, want one grant, one reserve, one charge", kinds)
	}
}

// TestOrgActorReleasesOrphanedHolds: a hold whose operation has no active job after the longest job deadline
// (a crash between reserving and creating the job) is released at the organization's next command.
func TestOrgActorReleasesOrphanedHolds(t *testing.T) {
	f := newOrgFixture(t, 10)
	a := f.system.Root.Spawn(actors.OrgProps(f.deps))
	if r := f.ask(t, a, &actors.OrgReserve{OrgID: f.orgID, Op: "req_orphan", Credits: 4, Slot: true}); r.Code != actors.ReplyOK || r.Held != 4 {
		t.Fatalf("reserve: %+v", r)
	}
	f.deps.Clock.(*clock.Manual).Advance(2 * time.Hour)
	if r := f.ask(t, a, &actors.OrgReserve{OrgID: f.orgID, Op: "req_young", Credits: 1}); r.Held != 5 {
		t.Fatalf("a 2-hour-old hold was released: %+v", r)
	}
	f.deps.Clock.(*clock.Manual).Advance(time.Hour + time.Minute)
	r := f.ask(t, a, &actors.OrgGrant{OrgID: f.orgID, Op: "g2", Credits: 1})
	if r.Held != 1 || r.Slots != 0 || r.Balance != 11 {
		t.Fatalf("orphaned hold kept: %+v", r)
	}
}

func (f *orgFixture) admit(t *testing.T, pid *actor.PID, memberID string) *actors.OrgAdmitReply {
	t.Helper()
	res, err := f.system.Root.RequestFuture(pid, &actors.OrgAdmit{OrgID: f.orgID, MemberID: memberID}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	r, ok := res.(*actors.OrgAdmitReply)
	if !ok {
		t.Fatalf("reply %T", res)
	}
	return r
}

// TestOrgActorRefresh: a member's role changed and their removal written outside the actor (the console's
// member administration) count at the next admission once the actor is told to refresh.
func TestOrgActorRefresh(t *testing.T) {
	f := newOrgFixture(t, 10)
	ctx := context.Background()
	memberID, err := f.admin.AddMember(ctx, f.orgID, "Mel", actors.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	pid := f.system.Root.Spawn(actors.OrgProps(f.deps))
	if r := f.admit(t, pid, memberID); r.Code != actors.ReplyOK || r.Role != actors.RoleMember {
		t.Fatalf("admit: %+v", r)
	}
	if _, err := (actors.Orgs{Store: f.deps.Store, Clock: f.deps.Clock}).Update(ctx, f.orgID, func(st *actors.OrgState) error {
		for i := range st.Members {
			if st.Members[i].ID == memberID {
				st.Members[i].Role = actors.RoleAdmin
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if r := f.ask(t, pid, &actors.OrgRefresh{OrgID: f.orgID}); r.Code != actors.ReplyOK {
		t.Fatalf("refresh: %+v", r)
	}
	if r := f.admit(t, pid, memberID); r.Code != actors.ReplyOK || r.Role != actors.RoleAdmin {
		t.Fatalf("admit after a role change: %+v", r)
	}
	if err := f.admin.RemoveMember(ctx, f.orgID, memberID); err != nil {
		t.Fatal(err)
	}
	f.ask(t, pid, &actors.OrgRefresh{OrgID: f.orgID})
	if r := f.admit(t, pid, memberID); r.Code != actors.ReplyUnknownMember {
		t.Fatalf("admit after removal: %+v", r)
	}
	// Credits still move through the refreshed activation (it holds the current version).
	if r := f.ask(t, pid, &actors.OrgReserve{OrgID: f.orgID, Op: "req_x", Credits: 2}); r.Code != actors.ReplyOK || r.Available != 8 {
		t.Fatalf("reserve after refresh: %+v", r)
	}
}

// goneCaller is a cluster view in which the members listed in gone have left; it carries no requests.
type goneCaller struct{ gone map[string]bool }

func (c goneCaller) Request(context.Context, string, string, any) (any, error) {
	return nil, context.DeadlineExceeded
}

func (c goneCaller) Gone(name, memberID string) bool { return c.gone[name+"/"+memberID] }

// TestOrgActorReleasesHoldsOfAGoneHolder: a synchronous detection without an Idempotency-Key holds credits
// and a slot under its process's worker id and settles them itself; when that process is killed before it
// settles (chaos run with detect_nokey, nodes killed), nothing else would. Its hold and slot are released at
// the organization's next command once the cluster knows the process gone, while a hold of a live holder,
// and a job's hold (no holder), stay. Before, they stayed for three hours (the stale-hold age), and on a
// one-slot plan every request of the organization was refused 429 meanwhile.
func TestOrgActorReleasesHoldsOfAGoneHolder(t *testing.T) {
	f := newOrgFixture(t, 10) // launch plan: one concurrency slot
	view := goneCaller{gone: map[string]bool{}}
	f.deps.Caller = &actors.LateCaller{}
	f.deps.Caller.Set(view)
	memberID, err := f.admin.AddMember(context.Background(), f.orgID, "Mel", actors.RoleMember)
	if err != nil {
		t.Fatal(err)
	}
	a := f.system.Root.Spawn(actors.OrgProps(f.deps))
	if r := f.admit(t, a, memberID); r.SlotsFull {
		t.Fatalf("admission with the slot free says it is taken: %+v", r)
	}
	const killed, alive = "n1/w-1/m1.0a1b2c3d", "n2/w-1/m2.0e1f2a3b"
	if r := f.ask(t, a, &actors.OrgReserve{OrgID: f.orgID, Op: "req_killed", Credits: 2, Slot: true, Holder: killed}); r.Code != actors.ReplyOK {
		t.Fatalf("reserve: %+v", r)
	}
	// Admission's hint for an early 429 (OrgAdmitReply.SlotsFull) follows the slot.
	if r := f.admit(t, a, memberID); !r.SlotsFull {
		t.Fatalf("admission with the one slot held: %+v", r)
	}
	if r := f.ask(t, a, &actors.OrgReserve{OrgID: f.orgID, Op: "req_other", Credits: 1, Slot: true, Holder: alive}); r.Code != actors.ReplyConcurrencyLimit {
		t.Fatalf("second slot on a one-slot plan while the holder lives: %+v", r)
	}
	if r := f.ask(t, a, &actors.OrgReserve{OrgID: f.orgID, Op: "req_job", Credits: 3}); r.Code != actors.ReplyOK || r.Held != 5 {
		t.Fatalf("a job's hold: %+v", r)
	}
	view.gone["n1/m1"] = true // n1's process m1 was killed (or declared dead)
	// The next command frees the gone holder's slot, so the hint counts it free already.
	if r := f.admit(t, a, memberID); r.SlotsFull {
		t.Fatalf("admission with the slot's holder gone says it is taken: %+v", r)
	}
	r := f.ask(t, a, &actors.OrgReserve{OrgID: f.orgID, Op: "req_other", Credits: 1, Slot: true, Holder: alive})
	if r.Code != actors.ReplyOK || r.Held != 4 || r.Slots != 1 {
		t.Fatalf("after the holder died: %+v; want the slot free and 3 + 1 held", r)
	}
	if r := f.admit(t, a, memberID); !r.SlotsFull {
		t.Fatalf("admission with the slot held again: %+v", r)
	}
	view.gone["n2/m2"] = false
	if r := f.ask(t, a, &actors.OrgGrant{OrgID: f.orgID, Op: "g2", Credits: 1}); r.Held != 4 || r.Slots != 1 {
		t.Fatalf("a live holder's hold or a job's hold was released: %+v", r)
	}
	st, entries, err := f.admin.Balance(context.Background(), f.orgID, 20)
	if err != nil {
		t.Fatal(err)
	}
	released := 0
	for _, e := range entries {
		if e.Kind == "release" {
			released++
			if e.Operation != "req_killed" {
				t.Errorf("released %s", e.Operation)
			}
		}
	}
	if released != 1 || st.Balance != 11 {
		t.Fatalf("releases %d, balance %d; want req_killed's only, nothing charged", released, st.Balance)
	}
}
