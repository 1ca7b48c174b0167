package actors

import "testing"

// TestWorkerNode: the node of a worker id made by this package is recovered whole, slashes in the node's
// name included; ids of another shape name no node.
func TestWorkerNode(t *testing.T) {
	for _, node := range []string{"n1", "eu/west/n2", "host.example"} {
		for _, slot := range []int{0, 7, -1} {
			if got := WorkerNode(workerID(node, slot)); got != node {
				t.Errorf("WorkerNode(workerID(%q, %d)) = %q", node, slot, got)
			}
		}
	}
	for _, id := range []string{"", "w1", "n1/x", "/w0/ab", "n1/x0/ab"} {
		if got := WorkerNode(id); got != "" {
			t.Errorf("WorkerNode(%q) = %q, want none", id, got)
		}
	}
}
