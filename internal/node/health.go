package node

import (
	"time"

	"filigrane/actors"
)

// health is what GET /healthz adds to its status: the node's name, how many cluster members it sees and
// whether records live in shared object storage.
func (n *Node) health() map[string]any {
	return map[string]any{"node": n.cfg.NodeName, "members": len(n.cluster.Members()), "cluster_storage": n.storage.Cluster}
}

// keyCacheTTL is how long a cluster node trusts a key record it read: a revocation reaches every node within
// this time. A single node reads keys from its local Pebble store and caches nothing.
const keyCacheTTL = 5 * time.Second

func keyCache(cluster bool) *actors.KeyCache {
	if !cluster {
		return nil
	}
	return actors.NewKeyCache(keyCacheTTL)
}
