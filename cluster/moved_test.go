package cluster_test

import (
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"filigrane/cluster"
	"filigrane/cluster/clustertest"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
)

// A node restarted on its address rejoins, and disthash moves the activations it owned back to it: the
// survivor that hosted one meanwhile stops it (a poison behind the commands already in its mailbox), while
// the survivor's PID cache still names it (protoactor forgets the entries of members that leave, not of
// activations that move). A request sent there after the poison was dropped without a dead letter and waited
// for its whole deadline (a minute for an actor's call to a peer: a chaos run's job actor stalled that long
// on the organization actor, and every status read of the job with it). The request must go to the new owner.
func TestRequestFollowsActivationMovedByJoin(t *testing.T) {
	f := getFixture(t)
	f.mu.Lock()
	ran := f.movingRan
	f.movingRan = true
	f.mu.Unlock()
	if ran {
		t.Skip("m1 and m2 were joined earlier in this process (go test -count=N)")
	}
	m1, m2 := f.moving[0], f.moving[1]
	released := false
	release := func() {
		if !released {
			released = true
			close(f.hold.release)
		}
	}
	t.Cleanup(release)

	// An identity that m2 owns once it has joined: disthash's placement over both members' addresses.
	rdv := pcluster.NewRendezvous()
	rdv.UpdateMembers(pcluster.Members{protoMember(t, m1), protoMember(t, m2)})
	id := ""
	for i := 0; id == "" && i < 100; i++ {
		c := "moving-" + strconv.Itoa(i)
		if rdv.GetByClusterIdentity(&pcluster.ClusterIdentity{Identity: c, Kind: "counter"}) == m2.Address() {
			id = c
		}
	}
	if id == "" {
		t.Fatal("no identity of 100 would move to m2")
	}

	// Alone, m1 activates it; then a command keeps the activation busy.
	resp, err := m1.Request(ctxTimeout(t, callBudget), id, "counter", Hit{})
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(*HitReply); r.Node != "m1" || r.Count != 1 {
		t.Fatalf("first hit: %+v, want count 1 on m1", r)
	}
	type result struct {
		r   *HitReply
		err error
	}
	held := make(chan result, 1)
	go func() {
		resp, err := m1.Request(ctxTimeout(t, callBudget), id, "counter", Hit{Op: "hold"})
		r, _ := resp.(*HitReply)
		held <- result{r, err}
	}()
	select {
	case <-f.hold.held:
	case <-time.After(callBudget):
		t.Fatal("the hold command did not reach the counter")
	}

	if err := m2.Join(ctxTimeout(t, callBudget), m1.GossipAddr()); err != nil {
		t.Fatal(err)
	}
	if err := clustertest.WaitMembers(ctxTimeout(t, gossipBudget), 2, m1, m2); err != nil {
		t.Fatal(err)
	}

	// The activation on m1 is busy and being moved; the request goes to m2, whatever m1's cache says. The
	// bound is far below the deadline the request was given, which is what a dropped request waits for.
	ctx := ctxTimeout(t, callBudget)
	start := time.Now()
	resp, err = m1.Request(ctx, id, "counter", Hit{})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("request after m2 joined: %v (after %v)", err, took)
	}
	if r := resp.(*HitReply); r.Node != "m2" || r.Identity != id {
		t.Fatalf("request after m2 joined: %+v, want %s answered by m2", r, id)
	}
	if took > clustertest.LoadSlack {
		t.Fatalf("request after m2 joined took %v, want the new owner at once (within %v)", took, clustertest.LoadSlack)
	}
	t.Logf("request after m2 joined answered by m2 in %v", took)

	// The command that was running on the moved activation is sent again to the new owner too (commands are
	// idempotent by design: the same holds when an owner leaves).
	select {
	case res := <-held:
		if res.err != nil || res.r.Node != "m2" {
			t.Fatalf("command in flight on the moved activation: %+v, %v; want it answered by m2", res.r, res.err)
		}
	case <-time.After(callBudget):
		t.Fatal("the command in flight on the moved activation was not answered")
	}
	release()
}

// protoMember is n as protoactor's topology lists it, for placing identities.
func protoMember(t *testing.T, n *cluster.Node) *pcluster.Member {
	t.Helper()
	host, port, err := net.SplitHostPort(n.Address())
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return &pcluster.Member{Id: n.ID(), Host: host, Port: int32(p), Kinds: []string{"counter"}}
}

// A process killed and restarted on its address before the cluster dropped its previous incarnation: when
// the peers drop that member they close their connections to the address, and a reply queued on one is lost
// while the new process waits for it. The new process sees its previous incarnation leave; its requests in
// flight then are sent again instead of waiting for their whole deadline (a chaos run's job actor on the
// restarted node waited a minute for the organization actor's answer, the job and its sync embed with it).
func TestRequestResentWhenThisAddressLeft(t *testing.T) {
	f, nodes := liveCluster(t)
	f.onlyOnce(t, "TestRequestResentWhenThisAddressLeft")
	n1, n2 := nodes[0], nodes[1]
	id := identityOn(t, n1, n2, "reset-")
	type result struct {
		r   *HitReply
		err error
		d   time.Duration
	}
	done := make(chan result, 1)
	go func() {
		start := time.Now()
		resp, err := n1.Request(ctxTimeout(t, callBudget), id, "counter", Hit{Op: "drop-first"})
		r, _ := resp.(*HitReply)
		done <- result{r, err, time.Since(start)}
	}()
	select {
	case <-f.hold.dropped: // the first reply is lost
	case <-time.After(callBudget):
		t.Fatal("the counter never got the command")
	}
	cluster.DepartForTest(n1, "an-earlier-n1", n1.Address())
	select {
	case res := <-done:
		if res.err != nil {
			t.Fatalf("request whose reply was lost: %v (after %v)", res.err, res.d)
		}
		if res.r.Node != n2.Name() || res.r.Count != 3 {
			t.Fatalf("request whose reply was lost: %+v, want n2's counter at 3 (the command ran twice)", res.r)
		}
		t.Logf("request sent again and answered after %v", res.d)
	case <-time.After(clustertest.LoadSlack):
		t.Fatalf("request whose reply was lost still waiting %v after this node's address left; want it sent again", clustertest.LoadSlack)
	}
}

// The same restart seen from the other side: this node dropped its previous incarnation just before the
// request left, and the owner's node dropped it after, losing the reply with no departure left for this node
// to see. A request sent within cluster's reply-path settle time (5 s) of such a departure and unanswered when
// it ends is sent again.
func TestRequestResentWhenThisAddressLeftJustBefore(t *testing.T) {
	requestResentAfterSettle(t, "TestRequestResentWhenThisAddressLeftJustBefore", "reset-before-",
		func(n1, _ *cluster.Node) { cluster.DepartForTest(n1, "an-earlier-n1-before", n1.Address()) })
}

// A member at the owner's address (its process's previous incarnation) was dropped just before the request
// left, and the connection to the address closed after: the request or its reply is lost (bench chaos, 5
// nodes, node0 killed and restarted: a job actor's request to the organization actor on the new node0 waited
// 60 s, and a batch read and the sweeper waited on the job actor). It is sent again after the settle time.
func TestRequestResentWhenTheOwnersAddressLeftJustBefore(t *testing.T) {
	requestResentAfterSettle(t, "TestRequestResentWhenTheOwnersAddressLeftJustBefore", "owner-reset-before-",
		func(n1, n2 *cluster.Node) { cluster.DepartForTest(n1, "an-earlier-n2-before", n2.Address()) })
}

// requestResentAfterSettle makes n1 see a departure (depart), then sends a request to a counter on n2 whose
// first reply is lost, and wants it sent again and answered within the settle time and the load slack (the
// request's own deadline is far longer).
func requestResentAfterSettle(t *testing.T, test, prefix string, depart func(n1, n2 *cluster.Node)) {
	t.Helper()
	f, nodes := liveCluster(t)
	f.onlyOnce(t, test)
	n1, n2 := nodes[0], nodes[1]
	id := identityOn(t, n1, n2, prefix)
	depart(n1, n2)
	type result struct {
		r   *HitReply
		err error
		d   time.Duration
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		resp, err := n1.Request(ctxTimeout(t, callBudget), id, "counter", Hit{Op: "drop-first"})
		r, _ := resp.(*HitReply)
		done <- result{r, err, time.Since(start)}
	}()
	select {
	case <-f.hold.dropped: // the first reply is lost
	case <-time.After(callBudget):
		t.Fatal("the counter never got the command")
	}
	const settle = 5 * time.Second
	select {
	case res := <-done:
		if res.err != nil {
			t.Fatalf("request whose reply was lost: %v (after %v)", res.err, res.d)
		}
		if res.r.Node != n2.Name() || res.r.Count != 3 {
			t.Fatalf("request whose reply was lost: %+v, want n2's counter at 3 (the command ran twice)", res.r)
		}
		t.Logf("request sent again and answered after %v", res.d)
	case <-time.After(settle + clustertest.LoadSlack - time.Since(start)):
		t.Fatalf("request whose reply was lost still waiting %v after the departure; want it sent again after %v",
			time.Since(start), settle)
	}
}

// An activation that stops itself (as the durable actors do after a failed save) or that disthash stops drops
// the messages queued behind its stop, and protoactor answers them nothing (a PID that is gone gets a dead
// letter; one that is stopping got silence), so a request among them waited for its whole deadline. It is
// answered with the dead letter now, which Node.Request takes as a stale PID: it resolves again and re-sends.
func TestRequestQueuedBehindAStopGetsADeadLetter(t *testing.T) {
	f, nodes := liveCluster(t)
	f.onlyOnce(t, "TestRequestQueuedBehindAStopGetsADeadLetter")
	n1, n2 := nodes[0], nodes[1]
	id := identityOn(t, n1, n2, "stop-")
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			close(f.hold.resume)
		}
	}
	t.Cleanup(resume)

	// The counter is busy; its stop, then a request, wait in its mailbox in that order (both posted on n2,
	// where a send enqueues before it returns).
	blocked := make(chan error, 1)
	go func() {
		_, err := n1.Request(ctxTimeout(t, callBudget), id, "counter", Hit{Op: "block"})
		blocked <- err
	}()
	select {
	case <-f.hold.blocked:
	case <-time.After(callBudget):
		t.Fatal("the counter did not get the blocking command")
	}
	pid := n2.Cluster().Get(id, "counter")
	if pid == nil {
		t.Fatal("no activation of the counter on n2")
	}
	root := n2.System().Root
	root.Poison(pid)
	queued := root.RequestFuture(pid, &Hit{}, callBudget)
	resume()
	if err := <-blocked; err != nil {
		t.Fatalf("blocking command: %v", err)
	}
	start := time.Now()
	_, err := queued.Result()
	if !errors.Is(err, actor.ErrDeadLetter) {
		t.Fatalf("request queued behind the stop: %v after %v, want a dead letter", err, time.Since(start))
	}
	if took := time.Since(start); took > clustertest.LoadSlack {
		t.Fatalf("dead letter for the request queued behind the stop came after %v, want at once", took)
	}
	// Node.Request re-sends after a dead letter: a fresh activation answers.
	resp, err := n1.Request(ctxTimeout(t, callBudget), id, "counter", Hit{})
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(*HitReply); r.Count != 1 {
		t.Fatalf("after the stop: %+v, want a fresh activation (count 1)", r)
	}
}

// identityOn returns a counter identity (prefix and a number) whose activation lives on owner, asking through
// from.
func identityOn(t *testing.T, from, owner *cluster.Node, prefix string) string {
	t.Helper()
	for i := 0; i < 100; i++ {
		id := prefix + strconv.Itoa(i)
		resp, err := from.Request(ctxTimeout(t, callBudget), id, "counter", Hit{})
		if err != nil {
			t.Fatal(err)
		}
		if resp.(*HitReply).Node == owner.Name() {
			return id
		}
	}
	t.Fatalf("no identity of 100 landed on %s", owner.Name())
	return ""
}

// onlyOnce skips a test that already ran in this process (go test -count=N): the hold gate's one-shot signals
// (a dropped first reply, a resume) and the activations the first run left serve one run of it.
func (f *fixture) onlyOnce(t *testing.T, test string) {
	t.Helper()
	f.mu.Lock()
	ran := f.ran[test]
	if f.ran == nil {
		f.ran = map[string]bool{}
	}
	f.ran[test] = true
	f.mu.Unlock()
	if ran {
		t.Skip("uses the shared fixture's one-shot hold gate, which an earlier run in this process used (go test -count=N)")
	}
}
