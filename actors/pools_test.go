package actors

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"filigrane/actors/jobstate"
	"filigrane/actors/mediakind"
	"filigrane/actors/placement"
	"filigrane/actors/workqueue"
	"filigrane/cluster"
)

func testPools(workers map[mediakind.Class]int) *Pools {
	return NewPools(PoolsConfig{Logger: zerolog.Nop(), Node: "self", Lease: 30e9, Workers: workers, CPUTokens: 2})
}

// TestPoolsOfferAndDrain: a pool per class run, each advertising its own free slots; a job offered twice
// while it waits is queued once; a class not run takes nothing; a drain returns the waiting jobs, advertises
// nothing and refuses new offers.
func TestPoolsOfferAndDrain(t *testing.T) {
	ps := testPools(map[mediakind.Class]int{mediakind.ClassCPU: 2, mediakind.ClassCPULong: 1})
	if f := ps.Free(); !maps.Equal(f, map[string]int{"cpu": 2, "cpu-long": 1}) {
		t.Fatalf("free %v", f)
	}
	if !ps.Offer(QueuedJob{RequestID: "req_a"}, mediakind.ClassCPU) || !ps.Offer(QueuedJob{RequestID: "req_a"}, mediakind.ClassCPU) {
		t.Fatal("offer refused")
	}
	if w := ps.Pool(mediakind.ClassCPU).Waiting(); w != 1 {
		t.Fatalf("a job offered twice waits %d times", w)
	}
	if ps.Offer(QueuedJob{RequestID: "req_b"}, mediakind.ClassGPU) {
		t.Fatal("a node without a gpu pool took gpu work")
	}
	if f := ps.Free(); !maps.Equal(f, map[string]int{"cpu": 1, "cpu-long": 1}) {
		t.Fatalf("free after one offer %v", f)
	}
	waiting := ps.BeginDrain()
	if len(waiting) != 1 || len(waiting[mediakind.ClassCPU]) != 1 || waiting[mediakind.ClassCPU][0].RequestID != "req_a" {
		t.Fatalf("drain returned %v", waiting)
	}
	if f := ps.Free(); len(f) != 0 {
		t.Fatalf("a draining node advertises %v", f)
	}
	if ps.Offer(QueuedJob{RequestID: "req_c"}, mediakind.ClassCPU) || ps.Sync().Takes() {
		t.Fatal("a draining node took work")
	}
	select {
	case <-ps.Pool(mediakind.ClassCPU).Idle():
	default:
		t.Fatal("a pool with nothing running is not idle")
	}
	if !ps.AwaitIdle(context.Background()) {
		t.Fatal("AwaitIdle with nothing running")
	}
}

// TestPoolsWithoutCPUClass: a node that runs no cpu class (--roles api) still lends its CPU tokens to the
// edge's synchronous work, but its sync pool takes no jobs and it advertises no class.
func TestPoolsWithoutCPUClass(t *testing.T) {
	ps := testPools(nil)
	if f := ps.Free(); len(f) != 0 {
		t.Fatalf("free %v", f)
	}
	if ps.Sync().Takes() || ps.Sync().Offer(QueuedJob{RequestID: "req_a"}) {
		t.Fatal("the sync pool of an api-only node takes jobs")
	}
	release, err := ps.Sync().Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	release()
}

type sent struct {
	node  string
	offer WorkOffer
}

func testDispatcher(ps *Pools, members *[]placement.Node, out *[]sent) *Dispatcher {
	return &Dispatcher{Self: "self", Pools: ps, Logger: zerolog.Nop(),
		Members: func() []placement.Node { return *members },
		Send: func(node string, o *WorkOffer) error {
			*out = append(*out, sent{node, *o})
			return nil
		}}
}

// TestDispatcher: a job goes to the local pool while it has room, then to the member with the most free
// slots; an offer this node cannot take is passed on at most MaxOfferHops times; Rebalance moves waiting
// jobs to members that advertise free slots.
func TestDispatcher(t *testing.T) {
	ps := testPools(map[mediakind.Class]int{mediakind.ClassCPU: 1})
	members := []placement.Node{{ID: "self", Free: map[string]int{"cpu": 0}}, {ID: "r1", Free: map[string]int{"cpu": 1}},
		{ID: "r2", Free: map[string]int{"cpu": 3, "cpu-long": 1}}}
	var out []sent
	d := testDispatcher(ps, &members, &out)
	image := func(id string) *jobstate.Record {
		return &jobstate.Record{RequestID: id, Media: jobstate.MediaImage}
	}
	d.Dispatch(image("req_1")) // local has a free slot (its live figure, not the stale gossip)
	if ps.Pool(mediakind.ClassCPU).Waiting() != 1 || len(out) != 0 {
		t.Fatalf("first job: waiting %d, sent %v", ps.Pool(mediakind.ClassCPU).Waiting(), out)
	}
	d.Dispatch(image("req_2")) // local full now: most free slots
	if len(out) != 1 || out[0].node != "r2" || out[0].offer.RequestID != "req_2" || out[0].offer.Classes[0] != "cpu" {
		t.Fatalf("second job sent %v", out)
	}
	out = nil
	d.Receive(&WorkOffer{RequestID: "req_v", Classes: []string{"cpu-long"}})
	if len(out) != 1 || out[0].node != "r2" || out[0].offer.Hops != 1 {
		t.Fatalf("cpu-long offer to a node without that class: sent %v", out)
	}
	out = nil
	d.Receive(&WorkOffer{RequestID: "req_v", Classes: []string{"cpu-long"}, Hops: MaxOfferHops})
	if len(out) != 0 {
		t.Fatalf("an offer past its hops was passed on: %v", out)
	}
	// Two more wait locally (every member full), then r1 advertises a free slot: one moves.
	members[1].Free["cpu"], members[2].Free["cpu"] = 0, 0
	d.Dispatch(image("req_3"))
	if out != nil || ps.Pool(mediakind.ClassCPU).Waiting() != 2 {
		t.Fatalf("full cluster: sent %v, waiting %d", out, ps.Pool(mediakind.ClassCPU).Waiting())
	}
	members[1].Free["cpu"] = 1
	if n := d.Rebalance(); n != 1 || len(out) != 1 || out[0].node != "r1" || out[0].offer.RequestID != "req_1" {
		t.Fatalf("rebalance moved %d: %v", n, out)
	}
	// r1's gossip still says 1 free (it has not caught up): the last waiting job follows.
	if d.Rebalance(); ps.Pool(mediakind.ClassCPU).Waiting() != 0 || len(out) != 2 || out[1].offer.RequestID != "req_3" {
		t.Fatalf("second rebalance: waiting %d, sent %v", ps.Pool(mediakind.ClassCPU).Waiting(), out)
	}
}

// TestOffersCarryTheQueueOrder: a job offered by another node is queued by its organization, sync flag and
// creation time, and a job Rebalance moves to another node carries them, through the wire codec, in the order
// the workers here would have taken it; before, offers carried the request id only, and a job that changed
// node lost its place among its organization's and the others'.
func TestOffersCarryTheQueueOrder(t *testing.T) {
	ps := testPools(map[mediakind.Class]int{mediakind.ClassCPU: 1})
	members := []placement.Node{{ID: "r1", Free: map[string]int{"cpu": 0}}}
	var out []sent
	d := testDispatcher(ps, &members, &out)
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	image := func(id, org string, sync bool, s int) *jobstate.Record {
		return &jobstate.Record{RequestID: id, OrgID: org, Sync: sync, Media: jobstate.MediaImage, CreatedAt: t0.Add(time.Duration(s) * time.Second)}
	}
	d.Dispatch(image("req_a2", "A", false, 2))
	d.Dispatch(image("req_a1", "A", false, 1)) // queued again after a restart: older, it goes first
	d.Receive(&WorkOffer{RequestID: "req_b1", Classes: []string{"cpu"}, OrgID: "B", Sync: true, Created: t0.Add(3 * time.Second)})
	if len(out) != 0 || ps.Pool(mediakind.ClassCPU).Waiting() != 3 {
		t.Fatalf("full cluster: sent %v, waiting %d", out, ps.Pool(mediakind.ClassCPU).Waiting())
	}
	members[0].Free["cpu"] = 2
	if n := d.Rebalance(); n != 2 || len(out) != 2 {
		t.Fatalf("rebalance moved %d: %v", n, out)
	}
	reg := cluster.NewRegistry()
	reg.MustRegister(WorkMessages()...)
	var got []WorkOffer
	for _, s := range out {
		env, err := reg.Wrap(&s.offer)
		if err != nil {
			t.Fatal(err)
		}
		v, err := reg.Unwrap(env)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, *v.(*WorkOffer))
	}
	want := []WorkOffer{
		{RequestID: "req_a1", Classes: []string{"cpu"}, Hops: 1, OrgID: "A", Created: t0.Add(time.Second)},
		{RequestID: "req_b1", Classes: []string{"cpu"}, Hops: 1, OrgID: "B", Sync: true, Created: t0.Add(3 * time.Second)},
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.RequestID != w.RequestID || !slices.Equal(g.Classes, w.Classes) || g.Hops != w.Hops || g.OrgID != w.OrgID ||
			g.Sync != w.Sync || !g.Created.Equal(w.Created) {
			t.Fatalf("moved offer %d: %+v, want %+v", i, g, w)
		}
	}
}

// TestDispatcherLowDisk: while this node is low on disk space its jobs go to a member that is not, to that
// member's queue when it is full rather than to this node's free slot; once every member is low too, the
// local slot takes them again. Rebalance moves no waiting job from a node with room to a low member's free
// slots, and does once this node is low as well.
func TestDispatcherLowDisk(t *testing.T) {
	ps := testPools(map[mediakind.Class]int{mediakind.ClassCPU: 1})
	members := []placement.Node{{ID: "r1", Free: map[string]int{"cpu": 1}}}
	var out []sent
	d := testDispatcher(ps, &members, &out)
	selfLow := true
	d.LowDisk = func() bool { return selfLow }
	image := func(id string) *jobstate.Record { return &jobstate.Record{RequestID: id, Media: jobstate.MediaImage} }
	cpu := ps.Pool(mediakind.ClassCPU)

	d.Dispatch(image("req_1"))
	members[0].Free["cpu"] = 0
	d.Dispatch(image("req_2"))
	if cpu.Waiting() != 0 || len(out) != 2 || out[0].node != "r1" || out[1].node != "r1" {
		t.Fatalf("low node with a free slot: waiting here %d, sent %v; want both jobs sent to r1", cpu.Waiting(), out)
	}
	members[0].LowDisk = true
	d.Dispatch(image("req_3"))
	if cpu.Waiting() != 1 || len(out) != 2 {
		t.Fatalf("every node low: waiting here %d, sent %v; want the job in the local slot", cpu.Waiting(), out)
	}

	selfLow = false
	d.Dispatch(image("req_4")) // local full, r1 low: waits here
	members[0].Free["cpu"] = 3
	if n := d.Rebalance(); n != 0 || len(out) != 2 {
		t.Fatalf("rebalance to a low member's free slots: moved %d, sent %v", n, out)
	}
	selfLow = true
	if n := d.Rebalance(); n == 0 || out[len(out)-1].node != "r1" {
		t.Fatalf("rebalance with every node low: moved %d, sent %v", n, out)
	}
}

// heldClaims answers a job claim only when release closes, as a job actor on a stalled node does; claimed
// says that the claim arrived. The answer is not_claimable: the attempt ends without running.
type heldClaims struct{ claimed, release chan struct{} }

func (h heldClaims) Request(ctx context.Context, _, _ string, msg any) (any, error) {
	if _, ok := msg.(*JobClaim); ok {
		close(h.claimed)
		select {
		case <-h.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &JobReply{Code: ReplyNotClaimable}, nil
}

// TestDrainWaitsForAJobBeingClaimed: a job a worker took from the queue counts as running while the worker
// claims it, so that a drain begun meanwhile waits for it; before, the pool looked idle until the claim was
// answered, and the node logged "drained: no work running" and stopped under an attempt about to run.
func TestDrainWaitsForAJobBeingClaimed(t *testing.T) {
	h := heldClaims{claimed: make(chan struct{}), release: make(chan struct{})}
	p := NewPool(h, nil, zerolog.Nop(), "self", 1, 30e9)
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); p.Wait() }()
	p.Run(ctx)
	p.Dispatch("req_a")
	<-h.claimed
	p.BeginDrain()
	if n := p.Running(); n != 1 {
		t.Fatalf("running %d while a worker claims a job, want 1", n)
	}
	select {
	case <-p.Idle():
		t.Fatal("idle while a worker claims a job")
	default:
	}
	close(h.release)
	select {
	case <-p.Idle(): // the claim was refused: the attempt ended
	case <-time.After(10 * time.Second):
		t.Fatal("not idle after the claim was answered")
	}
	if n := p.Running(); n != 0 {
		t.Fatalf("running %d after the attempt ended", n)
	}
}

// TestDrainWaitsForAJobTakenFromTheQueue: once a worker took a job from the queue (the test takes it, as a
// worker does), a drain's TakeQueued finds the queue empty; the pool must not look idle then, or the node logs
// "drained" and stops under an attempt about to start.
func TestDrainWaitsForAJobTakenFromTheQueue(t *testing.T) {
	p := NewPool(heldClaims{}, nil, zerolog.Nop(), "self", 1, 30e9) // not run: the test is its worker
	p.Dispatch("req_a")
	if _, ok := p.next(); !ok {
		t.Fatal("nothing to take")
	}
	if ids := p.BeginDrain(); len(ids) != 0 {
		t.Fatalf("the drain took %v from an empty queue", ids)
	}
	idle := p.Idle()
	select {
	case <-idle:
		t.Fatal("idle while a worker holds a job it took from the queue")
	default:
	}
	p.attemptEnded()
	select {
	case <-idle:
	default:
		t.Fatal("not idle once the attempt ended")
	}
}

// claimBarrier answers job claims only once n claims are in flight together (each round of n); the answer is
// not_claimable.
type claimBarrier struct {
	n     int32
	mu    sync.Mutex
	in    int32
	round chan struct{}
}

func (b *claimBarrier) Request(ctx context.Context, _, _ string, msg any) (any, error) {
	if _, ok := msg.(*JobClaim); ok {
		b.mu.Lock()
		round := b.round
		if b.in++; b.in == b.n {
			close(round)
		}
		b.mu.Unlock()
		select {
		case <-round:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &JobReply{Code: ReplyNotClaimable}, nil
}

// next starts a round and returns its channel, closed once n claims are in flight.
func (b *claimBarrier) next() chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.in, b.round = 0, make(chan struct{})
	return b.round
}

// TestEveryIdleWorkerTakesWaitingJobs: jobs queued in a burst while the workers wait are taken by all of them
// at once, not one after another by the one worker the queue woke: a worker that takes a job while others
// wait wakes the next. The first round only brings the workers to wait; the second's burst lands at once,
// as offers that all arrive before a worker woke. (Without the hand-on, the second round fails whenever the
// workers were waiting again before its burst, which is most runs; it cannot fail the other way.)
func TestEveryIdleWorkerTakesWaitingJobs(t *testing.T) {
	b := &claimBarrier{n: 3}
	p := NewPool(b, nil, zerolog.Nop(), "self", 3, 30e9)
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); p.Wait() }()
	p.Run(ctx)
	for round := range 2 {
		all := b.next()
		p.mu.Lock()
		for _, id := range []string{"req_a", "req_b", "req_c"} {
			p.queue.Push(workqueue.Job{ID: fmt.Sprint(id, round)})
		}
		p.mu.Unlock()
		select {
		case p.wake <- struct{}{}: // as dispatch does
		default:
		}
		select {
		case <-all:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: %d of 3 workers took a waiting job", round, p.Running())
		}
		select {
		case <-p.Idle():
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: not idle after the claims were refused: running %d, waiting %d", round, p.Running(), p.Waiting())
		}
	}
}
