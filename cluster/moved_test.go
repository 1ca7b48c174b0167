package cluster_test

import (
	"net"
	"strconv"
	"testing"
	"time"

	"filigrane/cluster"
	"filigrane/cluster/clustertest"

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
