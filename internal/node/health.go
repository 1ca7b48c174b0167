package node

import (
	"context"
	"errors"
	"slices"
	"time"

	"filigrane/cluster"
	apihttp "filigrane/http"
	"filigrane/http/console"
	"filigrane/persistence"
)

// health is what GET /healthz adds to its status: the node's name, how many cluster members it sees and
// whether records live in shared object storage.
func (n *Node) health() map[string]any {
	return map[string]any{"node": n.cfg.NodeName, "members": len(n.cluster.Members()), "cluster_storage": n.storage.Cluster}
}

// keyCacheTTL is how long a node trusts a key record it read. A write through the node's Keys (revocation,
// by the API or the console) drops the key at once; a revocation made on another node of a cluster reaches
// this one within the TTL. A single node caches too: its records are in its own Pebble store, but reading
// and decoding the key was about a tenth of the CPU of a status GET.
const keyCacheTTL = 5 * time.Second

// readyProbeKey is read (never written) by the storage readiness check: a missing key answers as fast as any,
// and the answer proves the store is reachable.
const readyProbeKey = "node/ready-probe"

// ready runs the /readyz checks: the storage round trip (records and files), in cluster mode this member's
// standing in the cluster, and, advisory, the data directory's free space (diskReady). Errors are logged in
// full and reported in short: /readyz is public.
func (n *Node) ready(ctx context.Context) []apihttp.ReadyCheck {
	storage := func() error {
		if _, err := n.store.Get(ctx, []byte(readyProbeKey)); err != nil && !errors.Is(err, persistence.ErrNotFound) {
			return err
		}
		if _, err := n.blobs.Stat(ctx, readyProbeKey); err != nil && !errors.Is(err, persistence.ErrNotFound) {
			return err
		}
		return nil
	}
	checks := []apihttp.ReadyCheck{{Name: "storage"}}
	if err := storage(); err != nil {
		n.cfg.Logger.Warn().Err(err).Msg("readiness: storage check failed")
		checks[0].Err = errors.New("the record or blob store did not answer")
		if errors.Is(err, context.DeadlineExceeded) {
			checks[0].Err = errors.New("the record or blob store did not answer in time")
		}
	}
	if n.storage.Cluster {
		check := apihttp.ReadyCheck{Name: "cluster"}
		switch {
		case n.cluster.IsBlocked():
			check.Err = errors.New("the cluster declared this member dead; restart the node")
		case !slices.ContainsFunc(n.cluster.Members(), func(m cluster.Member) bool { return m.Self }):
			check.Err = errors.New("this node is not (yet) a member of the cluster")
		}
		if check.Err != nil {
			n.cfg.Logger.Warn().Err(check.Err).Msg("readiness: cluster check failed")
		}
		checks = append(checks, check)
	}
	if n.disk != nil {
		checks = append(checks, n.diskReady())
	}
	return checks
}

// diskReady is /readyz's disk check: "ok", or what a low data directory refuses. It is advisory: the node
// stays ready, since it still serves reads, statuses, downloads and the deletes that free space, and every
// refused write is answered 503 with Retry-After on its own; taking the node out of a load balancer would
// stop those too, and on a one-node box all of them. Placement already sends new work to nodes with room
// (advertiseDisk).
func (n *Node) diskReady() apihttp.ReadyCheck {
	check := apihttp.ReadyCheck{Name: "disk", Advisory: true}
	switch {
	case n.disk.Records() != nil:
		check.Err = errors.New("low: under a quarter of the free-space reserve, new files and records are refused until space is freed; reads and deletes go on")
	case n.disk.Files() != nil:
		check.Err = errors.New("low: under the free-space reserve, new files are refused until space is freed; reads and deletes go on")
	}
	return check
}

// consoleCluster is the web console's view of the cluster: every member with its roles and free slots.
func (n *Node) consoleCluster() []console.ClusterNode {
	members := n.cluster.Members()
	out := make([]console.ClusterNode, 0, len(members))
	for _, m := range members {
		roles := make([]string, 0, len(m.Roles))
		for _, r := range m.Roles {
			roles = append(roles, string(r))
		}
		out = append(out, console.ClusterNode{Name: m.Name, Roles: roles, Free: m.Free, Capacity: m.Capacity,
			GPUs: m.GPUs, Addr: m.GossipAddr, Self: m.Self, LowDisk: m.LowDisk})
	}
	return out
}
