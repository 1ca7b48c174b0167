package node_test

import (
	"maps"
	"slices"
	"testing"
	"time"

	"filigrane/actors/mediakind"
	"filigrane/cluster"
	"filigrane/internal/clock"
	"filigrane/internal/node"
)

// TestNodeAdvertisesFreeSlots: a worker node gossips its free slots per CPU work class in its member metadata
// (a pool per class: --workers for cpu, half of it for cpu-long); an edge-only node advertises none
// (TestEdgeNodeAdvertisesNoSlots).
func TestNodeAdvertisesFreeSlots(t *testing.T) {
	t.Parallel()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	n := startNode(t, t.TempDir(), clk, func(c *node.Config) { c.Workers = 4 })
	t.Cleanup(func() { n.Close(t.Context()) })
	want := map[string]int{"cpu": 4, "cpu-long": 2}
	timeout := time.After(5 * time.Second)
	for {
		changed := n.Cluster().MembersChanged()
		if maps.Equal(selfMember(n).Free, want) {
			break
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("worker node advertises %v, want %v", selfMember(n).Free, want)
		}
	}
	if p := n.Pool(); p.Free() != 4 || p.Workers() != 4 {
		t.Fatalf("pool free %d of %d", p.Free(), p.Workers())
	}
}

// TestEdgeNodeAdvertisesNoSlots: an edge-only node runs no work, so its member metadata names no free slots.
// (It was the second node of TestNodeAdvertisesFreeSlots; a test of this package keeps one node alive at a
// time, so that the race detector can check it: see startNode.)
func TestEdgeNodeAdvertisesNoSlots(t *testing.T) {
	t.Parallel()
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	edge := startNode(t, t.TempDir(), clk, func(c *node.Config) { c.Roles = []cluster.Role{cluster.RoleEdge} })
	t.Cleanup(func() { edge.Close(t.Context()) })
	if f := selfMember(edge).Free; len(f) != 0 {
		t.Fatalf("edge-only node advertises %v", f)
	}
}

// selfMember is the node's own entry in its member list.
func selfMember(n *node.Node) cluster.Member {
	for _, m := range n.Cluster().Members() {
		if m.Self {
			return m
		}
	}
	return cluster.Member{}
}

// TestNodeRoles: which roles host actors and which work classes they run; an api node (actors, no work)
// advertises no class and its edge claims no job itself.
func TestNodeRoles(t *testing.T) {
	t.Parallel()
	cases := []struct {
		roles   []cluster.Role
		actors  bool
		classes []string
	}{
		{[]cluster.Role{cluster.RoleEdge}, false, nil},
		{[]cluster.Role{cluster.RoleAPI}, true, nil},
		{[]cluster.Role{cluster.RoleEdge, cluster.RoleWorker}, true, []string{"cpu", "cpu-long"}},
		{[]cluster.Role{cluster.RoleAPI, cluster.RoleCPU}, true, []string{"cpu"}},
		{[]cluster.Role{cluster.RoleCPULong}, true, []string{"cpu-long"}},
		{[]cluster.Role{cluster.RoleGPU}, true, []string{"gpu"}},
	}
	for _, c := range cases {
		r := node.NodeRoles(c.roles)
		var got []string
		for cl, on := range r.Classes {
			if on {
				got = append(got, string(cl))
			}
		}
		slices.Sort(got)
		if r.HostsActors != c.actors || !slices.Equal(got, c.classes) {
			t.Errorf("%v: actors %v classes %v; want %v %v", c.roles, r.HostsActors, got, c.actors, c.classes)
		}
	}
	// Worker slots: the gpu class gets --gpu-slots a device, and nothing on a node without a device.
	worker := node.NodeRoles([]cluster.Role{cluster.RoleWorker, cluster.RoleGPU})
	for _, c := range []struct {
		devices, slots int
		want           map[mediakind.Class]int
	}{
		{2, node.DefaultGPUSlots, map[mediakind.Class]int{mediakind.ClassCPU: 3, mediakind.ClassCPULong: 1, mediakind.ClassGPU: 8}},
		{1, 16, map[mediakind.Class]int{mediakind.ClassCPU: 3, mediakind.ClassCPULong: 1, mediakind.ClassGPU: 16}},
		{0, node.DefaultGPUSlots, map[mediakind.Class]int{mediakind.ClassCPU: 3, mediakind.ClassCPULong: 1}},
	} {
		if got := worker.Workers(3, 1, c.devices, c.slots); !maps.Equal(got, c.want) {
			t.Errorf("%d devices, %d gpu slots: workers %v, want %v", c.devices, c.slots, got, c.want)
		}
	}
	if got := node.NodeRoles([]cluster.Role{cluster.RoleCPU}).Workers(3, 1, 2, 4); !maps.Equal(got, map[mediakind.Class]int{mediakind.ClassCPU: 3}) {
		t.Errorf("a cpu-only node with devices: workers %v", got)
	}
	clk := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	n := startNode(t, t.TempDir(), clk, func(c *node.Config) { c.Roles = []cluster.Role{cluster.RoleAPI} })
	t.Cleanup(func() { n.Close(t.Context()) })
	for _, m := range n.Cluster().Members() {
		if m.Self && (len(m.Free) != 0 || !m.HasRole(cluster.RoleAPI)) {
			t.Fatalf("api node gossips roles %v, free %v", m.Roles, m.Free)
		}
	}
	if n.Pool().Takes() || len(n.Pools().Classes()) != 0 {
		t.Fatal("an api node runs work")
	}
}
