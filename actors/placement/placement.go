// Package placement chooses the node that runs a job's attempt, from the free worker slots per work class
// that every node gossips (cluster.NodeMeta.Free). It owns the rule and nothing else: it is pure (no network,
// no clock, no actors), so the same inputs always give the same node, and it must not reach the cluster
// itself; callers hand it a snapshot of the members.
//
// The rule, for a job whose work classes are listed preferred first (mediakind.ClassesFor):
//  1. for each class in order, the local node when it has a free slot of that class, else the node with the
//     most free slots of it (ties broken by a hash of the job's key and the node's id, so that jobs placed
//     from the same stale snapshot spread instead of all landing on one node);
//  2. when no node has a free slot of any of the classes, a node that runs the first class that some node
//     runs (the local one if it does, else one chosen by the same hash), where the job waits in the queue;
//  3. when no node runs any of the classes, nothing: the job stays claimable and the sweeper's next tick
//     places it again (a node that joins with that class takes it then).
//
// Nodes low on disk space (Node.LowDisk) are left out of these rules while any node that is not low runs one
// of the classes: the job goes to the queue of a node with room on its disk rather than to a free slot of a
// low one, where its attempt would meet the low disk, wait for space and be placed there again. When every
// node that runs the classes is low (a one-node box among them), the rules apply to all nodes alike, so no
// work stops for want of a better node.
package placement

import (
	"hash/fnv"
)

// Node is one member as placement sees it: its id, its free slots per work class, and whether it is low on
// disk space. A class absent from Free is one the node does not run (its roles exclude it, or it is
// draining); a class present with 0 is run but full.
type Node struct {
	ID      string
	Free    map[string]int
	LowDisk bool
}

// Choice is where a job goes: the node's id and the class it runs under there. Queued is true when the
// node had no free slot of the class (rule 2): the job waits in that node's queue.
type Choice struct {
	Node   string
	Class  string
	Queued bool
}

// Pick places the job keyed key (its request id) whose classes are listed preferred first, from the node
// self and the members nodes (self may appear among them; it is recognised by id). ok is false when no node
// runs any of the classes.
func Pick(key string, classes []string, self string, nodes []Node) (c Choice, ok bool) {
	roomy := make([]Node, 0, len(nodes))
	for _, n := range nodes {
		if !n.LowDisk {
			roomy = append(roomy, n)
		}
	}
	if len(roomy) < len(nodes) {
		if c, ok := pick(key, classes, self, roomy); ok {
			return c, true
		}
	}
	return pick(key, classes, self, nodes)
}

// pick is the rule over nodes, all of them alike.
func pick(key string, classes []string, self string, nodes []Node) (c Choice, ok bool) {
	local := -1
	for i, n := range nodes {
		if n.ID == self {
			local = i
			break
		}
	}
	for _, class := range classes {
		if local >= 0 && nodes[local].Free[class] > 0 {
			return Choice{Node: self, Class: class}, true
		}
		best, bestFree, bestRank := -1, 0, uint64(0)
		for i, n := range nodes {
			f := n.Free[class]
			if f <= 0 {
				continue
			}
			r := rank(key, n.ID)
			if f > bestFree || (f == bestFree && r > bestRank) {
				best, bestFree, bestRank = i, f, r
			}
		}
		if best >= 0 {
			return Choice{Node: nodes[best].ID, Class: class}, true
		}
	}
	for _, class := range classes {
		if local >= 0 {
			if _, runs := nodes[local].Free[class]; runs {
				return Choice{Node: self, Class: class, Queued: true}, true
			}
		}
		best, bestRank := -1, uint64(0)
		for i, n := range nodes {
			if _, runs := n.Free[class]; !runs {
				continue
			}
			if r := rank(key, n.ID); best < 0 || r > bestRank {
				best, bestRank = i, r
			}
		}
		if best >= 0 {
			return Choice{Node: nodes[best].ID, Class: class, Queued: true}, true
		}
	}
	return Choice{}, false
}

// rank is the rendezvous hash of a job and a node: each job orders the nodes differently, and the order is
// the same wherever it is computed.
func rank(key, node string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write([]byte(node))
	return h.Sum64()
}
