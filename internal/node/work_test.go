package node_test

import (
	"maps"
	"testing"
	"time"

	"filigrane/cluster"
	"filigrane/internal/clock"
	"filigrane/internal/node"
)

// TestNodeAdvertisesFreeSlots: a worker node gossips its free slots per CPU work class in its member metadata
// (a pool per class: --workers for cpu, half of it for cpu-long); an edge-only node advertises none.
func TestNodeAdvertisesFreeSlots(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	n := startNode(t, t.TempDir(), clk, func(c *node.Config) { c.Workers = 4 })
	t.Cleanup(func() { n.Close(t.Context()) })
	want := map[string]int{"cpu": 4, "cpu-long": 2}
	self := func(n *node.Node) cluster.Member {
		for _, m := range n.Cluster().Members() {
			if m.Self {
				return m
			}
		}
		return cluster.Member{}
	}
	timeout := time.After(5 * time.Second)
	for {
		changed := n.Cluster().MembersChanged()
		if maps.Equal(self(n).Free, want) {
			break
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("worker node advertises %v, want %v", self(n).Free, want)
		}
	}
	if p := n.Pool(); p.Free() != 4 || p.Workers() != 4 {
		t.Fatalf("pool free %d of %d", p.Free(), p.Workers())
	}
	edge := startNode(t, t.TempDir(), clk, func(c *node.Config) { c.Roles = []cluster.Role{cluster.RoleEdge} })
	t.Cleanup(func() { edge.Close(t.Context()) })
	if f := self(edge).Free; len(f) != 0 {
		t.Fatalf("edge-only node advertises %v", f)
	}
}
