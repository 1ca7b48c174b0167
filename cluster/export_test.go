package cluster

// BlockMemberForTest adds id to n's protoactor block list, as protoactor's
// gossip does when a member's heartbeat expires.
func BlockMemberForTest(n *Node, id string) {
	n.provider.onPublisher(func() { n.cluster.Remote.BlockList().Block(id) })
}
