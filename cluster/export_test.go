package cluster

import "time"

// BlockMemberForTest adds id to n's protoactor block list, as protoactor's
// gossip does when a member's heartbeat expires.
func BlockMemberForTest(n *Node, id string) {
	n.provider.onPublisher(func() { n.cluster.Remote.BlockList().Block(id) })
}

// DepartForTest makes n's membership record that a member with this id and remote address left the
// topology now, and wakes the requests watching departures, as a publish that drops it does.
func DepartForTest(n *Node, id, addr string) {
	p := n.provider
	p.mu.Lock()
	defer p.mu.Unlock()
	p.departed[id] = departure{at: time.Now(), addr: addr}
	close(p.leftCh)
	p.leftCh = make(chan struct{})
}
