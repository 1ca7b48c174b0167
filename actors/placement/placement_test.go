package placement

import (
	"fmt"
	"slices"
	"testing"
)

func nodes(spec ...any) []Node {
	var ns []Node
	for i := 0; i < len(spec); i += 2 {
		ns = append(ns, Node{ID: spec[i].(string), Free: spec[i+1].(map[string]int)})
	}
	return ns
}

// low marks the nodes named ids as low on disk space.
func low(ns []Node, ids ...string) []Node {
	for i := range ns {
		ns[i].LowDisk = slices.Contains(ids, ns[i].ID)
	}
	return ns
}

// TestPick: local first when it has room, else the most free slots; a full cluster queues (locally when the
// local node runs the class); a class nobody runs places nothing; a gpu job prefers a free gpu slot anywhere
// over a CPU slot, and falls back to the CPU class; nodes low on disk space take work only when no other node
// runs the job's classes.
func TestPick(t *testing.T) {
	cases := []struct {
		name    string
		classes []string
		self    string
		nodes   []Node
		want    Choice
		ok      bool
	}{
		{"local has room", []string{"cpu"}, "a",
			nodes("a", map[string]int{"cpu": 1}, "b", map[string]int{"cpu": 8}), Choice{Node: "a", Class: "cpu"}, true},
		{"local full: most free", []string{"cpu"}, "a",
			nodes("a", map[string]int{"cpu": 0}, "b", map[string]int{"cpu": 2}, "c", map[string]int{"cpu": 3}), Choice{Node: "c", Class: "cpu"}, true},
		{"local runs no cpu (api only)", []string{"cpu"}, "a",
			nodes("a", map[string]int{}, "b", map[string]int{"cpu": 1}), Choice{Node: "b", Class: "cpu"}, true},
		{"self absent from members", []string{"cpu"}, "a",
			nodes("b", map[string]int{"cpu": 1}), Choice{Node: "b", Class: "cpu"}, true},
		{"all full: queue locally", []string{"cpu"}, "a",
			nodes("a", map[string]int{"cpu": 0}, "b", map[string]int{"cpu": 0}), Choice{Node: "a", Class: "cpu", Queued: true}, true},
		{"all full, local runs none: queue on a runner", []string{"cpu"}, "a",
			nodes("a", map[string]int{}, "b", map[string]int{"cpu": 0}), Choice{Node: "b", Class: "cpu", Queued: true}, true},
		{"nobody runs it", []string{"cpu-long"}, "a",
			nodes("a", map[string]int{"cpu": 3}, "b", map[string]int{"cpu": 3}), Choice{}, false},
		{"no members", []string{"cpu"}, "a", nil, Choice{}, false},
		{"gpu free remote beats local cpu", []string{"gpu", "cpu"}, "a",
			nodes("a", map[string]int{"cpu": 4}, "g", map[string]int{"gpu": 1}), Choice{Node: "g", Class: "gpu"}, true},
		{"gpu full: local cpu", []string{"gpu", "cpu"}, "a",
			nodes("a", map[string]int{"cpu": 4}, "g", map[string]int{"gpu": 0}), Choice{Node: "a", Class: "cpu"}, true},
		{"everything full: queue on the gpu runner", []string{"gpu", "cpu"}, "a",
			nodes("a", map[string]int{"cpu": 0}, "g", map[string]int{"gpu": 0}), Choice{Node: "g", Class: "gpu", Queued: true}, true},
		{"draining node (no classes) is skipped", []string{"cpu"}, "a",
			nodes("a", map[string]int{}, "b", map[string]int{}, "c", map[string]int{"cpu": 0}), Choice{Node: "c", Class: "cpu", Queued: true}, true},
		{"local low on disk: a roomy node's free slot", []string{"cpu"}, "a",
			low(nodes("a", map[string]int{"cpu": 4}, "b", map[string]int{"cpu": 1}), "a"), Choice{Node: "b", Class: "cpu"}, true},
		{"roomy node full: its queue, not a low node's free slot", []string{"cpu"}, "a",
			low(nodes("a", map[string]int{"cpu": 4}, "b", map[string]int{"cpu": 0}), "a"), Choice{Node: "b", Class: "cpu", Queued: true}, true},
		{"a low remote node's free slots are passed over", []string{"cpu"}, "a",
			low(nodes("a", map[string]int{"cpu": 0}, "b", map[string]int{"cpu": 8}, "c", map[string]int{"cpu": 1}), "b"), Choice{Node: "c", Class: "cpu"}, true},
		{"every node low: the rule as without the disk", []string{"cpu"}, "a",
			low(nodes("a", map[string]int{"cpu": 0}, "b", map[string]int{"cpu": 2}), "a", "b"), Choice{Node: "b", Class: "cpu"}, true},
		{"the only node, low", []string{"cpu"}, "a",
			low(nodes("a", map[string]int{"cpu": 1}), "a"), Choice{Node: "a", Class: "cpu"}, true},
		{"the only roomy node runs another class: the low runner", []string{"cpu-long"}, "a",
			low(nodes("a", map[string]int{"cpu-long": 1}, "b", map[string]int{"cpu": 3}), "a"), Choice{Node: "a", Class: "cpu-long"}, true},
		{"gpu job: a roomy cpu slot before a low gpu node", []string{"gpu", "cpu"}, "a",
			low(nodes("a", map[string]int{"cpu": 1}, "g", map[string]int{"gpu": 1}), "g"), Choice{Node: "a", Class: "cpu"}, true},
	}
	for _, c := range cases {
		got, ok := Pick("req_1", c.classes, c.self, c.nodes)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: Pick = %+v, %v; want %+v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

// TestPickTieBreak: among nodes with the same free slots the choice depends only on the job's key and the
// node ids (not on the order of the members), and different jobs spread over the tied nodes.
func TestPickTieBreak(t *testing.T) {
	ab := nodes("self", map[string]int{}, "b", map[string]int{"cpu": 2}, "c", map[string]int{"cpu": 2}, "d", map[string]int{"cpu": 2})
	ba := []Node{ab[3], ab[1], ab[0], ab[2]}
	count := map[string]int{}
	for i := 0; i < 300; i++ {
		key := fmt.Sprintf("req_%d", i)
		x, _ := Pick(key, []string{"cpu"}, "self", ab)
		y, _ := Pick(key, []string{"cpu"}, "self", ba)
		if x != y {
			t.Fatalf("%s: %v with one member order, %v with another", key, x, y)
		}
		count[x.Node]++
	}
	for _, n := range []string{"b", "c", "d"} {
		if count[n] < 50 {
			t.Fatalf("300 tied jobs spread %v; node %s took fewer than 50", count, n)
		}
	}
}
