package actors_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"filigrane/actors"
	"filigrane/actors/jobstate"
	"filigrane/actors/outbox"
	"filigrane/internal/admin"
	"filigrane/internal/clock"
	"filigrane/persistence"
	"filigrane/persistence/pebblestore"
)

// localCaller routes requests to actors of one local actor system, one named actor per kind and identity
// (what the cluster does across nodes); a stopped actor is spawned again on the next request.
type localCaller struct {
	system *actor.ActorSystem
	deps   *actors.Deps
}

func (c *localCaller) Request(ctx context.Context, identity, kind string, msg any) (any, error) {
	props := actors.JobProps(c.deps)
	if kind == actors.KindOrg {
		props = actors.OrgProps(c.deps)
	}
	pid, err := c.system.Root.SpawnNamed(props, kind+"_"+identity)
	if err != nil && !errors.Is(err, actor.ErrNameExists) {
		return nil, err
	}
	return c.system.Root.RequestFuture(pid, msg, 5*time.Second).Result()
}

// gone waits until the activation of identity has stopped, if it is stopping (a durable actor stops itself
// after a failed save). protoactor drops the messages that reach an actor behind its stop; the cluster answers
// them with a dead letter and Node.Request re-sends (cluster/stopped.go), which this local caller does not, so
// a test whose request follows a failed save waits for the failed activation to be gone first.
func (c *localCaller) gone(t *testing.T, identity, kind string) {
	t.Helper()
	pid := actor.NewPID(c.system.Address(), kind+"_"+identity)
	_ = c.system.Root.PoisonFuture(pid).Wait() // resolves when it terminates, or at once if it already has
}

// prefixDown refuses writes of keys under prefix while down, with why as the error: a store that failed just
// as some write was due (outbox/: the node dies between the job's commit and the hand-over of its announcement;
// jobs/purge/: the store did not take a failed job's purge entry).
type prefixDown struct {
	persistence.Store
	prefix, why string
	mu          sync.Mutex
	down        bool
}

// outboxDown is a store whose node dies between a commit and the hand-over of its announcement.
func outboxDown(st persistence.Store) *prefixDown {
	return &prefixDown{Store: st, prefix: "outbox/", why: "node died before the hand-over", down: true}
}

func (s *prefixDown) setDown(v bool) {
	s.mu.Lock()
	s.down = v
	s.mu.Unlock()
}

func (s *prefixDown) CompareAndSet(ctx context.Context, k []byte, expect persistence.Version, v []byte) (persistence.Version, error) {
	s.mu.Lock()
	down := s.down
	s.mu.Unlock()
	if down && strings.HasPrefix(string(k), s.prefix) {
		return "", errors.New("injected: " + s.why)
	}
	return s.Store.CompareAndSet(ctx, k, expect, v)
}

// startSystem starts one "node": an actor system whose actors hand effects to an outbox on store.
func startSystem(t *testing.T, store persistence.Store, obStore persistence.Store, clk clock.Clock) (*actor.ActorSystem, *localCaller) {
	t.Helper()
	system := actor.NewActorSystem()
	deps := &actors.Deps{Store: store, Clock: clk, Catalog: actors.DefaultCatalog(), Logger: zerolog.Nop(),
		Respond: func(ctx actor.Context, v any) {
			if ctx.Sender() != nil {
				ctx.Respond(v)
			}
		},
		Reply:  func(ctx actor.Context, to *actor.PID, v any) { ctx.Send(to, v) },
		Caller: &actors.LateCaller{},
		Outbox: outbox.Outbox{Store: obStore, Clock: clk}}
	c := &localCaller{system: system, deps: deps}
	deps.Caller.Set(c)
	return system, c
}

// job sends msg to the job actor of reqID and wants an OK reply.
func (c *localCaller) job(t *testing.T, reqID string, msg any) *actors.JobReply {
	t.Helper()
	v, err := c.Request(context.Background(), reqID, actors.KindJob, msg)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := v.(*actors.JobReply)
	if !ok || r.Code != "" && r.Code != actors.ReplyOK {
		t.Fatalf("reply %T %+v", v, v)
	}
	return r
}

// TestJobAnnouncementSurvivesCrash: a job that names a webhook succeeds; its node dies after the outcome was
// committed and before the webhook announcement reached the outbox. Nothing is lost: the job stays in the
// active index, the sweeper's tick on another node hands the announcement over, the outbox pass delivers it
// once, and further ticks and passes deliver nothing again. The credits are charged once.
func TestJobAnnouncementSurvivesCrash(t *testing.T) {
	ctx := context.Background()
	store := tempStore(t)
	clk := clock.NewManual(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	org, err := admin.Admin{Store: store, Clock: clk, Catalog: actors.DefaultCatalog()}.CreateOrg(ctx, "Acme", "launch", 100)
	if err != nil {
		t.Fatal(err)
	}
	reqID := "req_" + strings.Repeat("a", 64)
	webhookID := "wh_" + strings.Repeat("e", 32)
	spec := jobstate.Spec{RequestID: reqID, OrgID: org.ID, Operation: jobstate.OperationDetect, Media: jobstate.MediaImage,
		Format: "PNG", FrameCount: 1, AcceleratorRequested: jobstate.AcceleratorCPU, WebhookID: webhookID,
		Input: jobstate.Input{BlobKey: "in/" + reqID, SHA256: strings.Repeat("b", 64), Size: 1234, Filename: "cat.png", ContentType: "image/png"}}
	out := jobstate.Output{BlobKey: "out/" + reqID, Size: 20, SHA256: strings.Repeat("d", 64), ContentType: "application/json",
		Filename: "detection.json", Charge: 1, Accelerator: jobstate.AcceleratorCPU}

	// Node 1: the outbox is unreachable from the moment the job commits.
	faulty := outboxDown(store)
	sys1, c1 := startSystem(t, store, faulty, clk)
	sub := c1.job(t, reqID, &actors.JobSubmit{Spec: spec, Hold: 3, ClaimAs: "w1", Lease: time.Minute})
	rep := c1.job(t, reqID, &actors.JobSucceed{RequestID: reqID, Token: sub.Lease.Token, Output: out})
	if rep.Record.Status != jobstate.StatusSucceeded || !rep.Record.Committed() || rep.Record.Settlement.WebhookNotified {
		t.Fatalf("after success: %+v", rep.Record)
	}
	sys1.Shutdown() // the node dies

	if _, err := store.Get(ctx, []byte("jobs/active/"+reqID)); err != nil {
		t.Fatalf("the job left the active index with its announcement unsent: %v", err)
	}
	ob := outbox.Outbox{Store: store, Clock: clk}
	if _, err := ob.Get(ctx, outbox.EffectID("fx_", reqID, actors.OutboxJobWebhook)); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("the announcement reached the outbox through a dead store? %v", err)
	}

	// Node 2 takes over: the sweeper ticks the active job, the outbox pass delivers.
	sys2, c2 := startSystem(t, store, store, clk)
	t.Cleanup(sys2.Shutdown)
	var mu sync.Mutex
	var got []outbox.Effect
	reg := outbox.NewRegistry()
	reg.MustRegister(actors.OutboxJobWebhook, outbox.Handler{Deliver: func(_ context.Context, e outbox.Effect, _ int) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, e)
		return nil
	}})
	sweeper := actors.Sweeper{Store: store, Caller: c2, Clock: clk, Logger: zerolog.Nop()}
	deliver := outbox.Deliverer{Outbox: ob, Registry: reg, Logger: zerolog.Nop()}
	for range 2 {
		if n, err := sweeper.TickJobs(ctx); err != nil || n > 1 {
			t.Fatalf("tick: %d %v", n, err)
		}
		if _, err := deliver.Pass(ctx); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Hour)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || string(got[0].Payload) != reqID || got[0].Key != webhookID || got[0].Kind != actors.OutboxJobWebhook {
		t.Fatalf("delivered %+v", got)
	}
	if job, err := actors.ReadJob(ctx, store, string(got[0].Payload)); err != nil || job.Status != jobstate.StatusSucceeded || job.WebhookID != webhookID {
		t.Fatalf("a handler reading the job: %v %+v", err, job)
	}
	if _, err := store.Get(ctx, []byte("jobs/active/"+reqID)); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("active index after the hand-over: %v", err)
	}
	rec := c2.job(t, reqID, &actors.JobGet{RequestID: reqID, OrgID: org.ID}).Record
	if !rec.Settlement.WebhookNotified {
		t.Fatalf("record after the hand-over: %+v", rec.Settlement)
	}
	bal, err := actors.OrgClient{Caller: c2}.Get(ctx, org.ID)
	if err != nil || bal.Balance != 99 || bal.Held != 0 {
		t.Fatalf("credits: %v %+v", err, bal)
	}
}

// tempStore opens a Pebble store in a temporary directory, closed when the test ends.
func tempStore(t *testing.T) *pebblestore.Store {
	t.Helper()
	store, err := pebblestore.Open(t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}
