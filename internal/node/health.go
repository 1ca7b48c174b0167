package node

// health is what GET /healthz adds to its status: the node's name, how many cluster members it sees and
// whether records live in shared object storage.
func (n *Node) health() map[string]any {
	return map[string]any{"node": n.cfg.NodeName, "members": len(n.cluster.Members()), "cluster_storage": n.storage.Cluster}
}
