package actors

import "testing"

// TestWorkerNode: the node of a worker id made by this package is recovered whole, slashes in the node's
// name included; ids of another shape name no node.
func TestWorkerNode(t *testing.T) {
	for _, node := range []string{"n1", "eu/west/n2", "host.example"} {
		for _, slot := range []int{0, 7, -1} {
			if got := WorkerNode(workerID(node, "m1", slot)); got != node {
				t.Errorf("WorkerNode(workerID(%q, m1, %d)) = %q", node, slot, got)
			}
		}
	}
	for _, id := range []string{"", "w1", "n1/x", "/w0/ab", "n1/x0/ab"} {
		if got := WorkerNode(id); got != "" {
			t.Errorf("WorkerNode(%q) = %q, want none", id, got)
		}
	}
}

// TestWorkerMember: the cluster member of a worker id is recovered when the pool knew it, with node names
// that hold dots and slashes; ids without one, or of another shape, name no member.
func TestWorkerMember(t *testing.T) {
	for _, node := range []string{"n1", "eu/west/n2", "host.example"} {
		for _, slot := range []int{0, 7, -1} {
			if got := WorkerMember(workerID(node, "7fKq2Lm9", slot)); got != "7fKq2Lm9" {
				t.Errorf("WorkerMember(workerID(%q, 7fKq2Lm9, %d)) = %q", node, slot, got)
			}
			if got := WorkerMember(workerID(node, "", slot)); got != "" {
				t.Errorf("WorkerMember of a worker id without a member: %q", got)
			}
		}
	}
	for _, id := range []string{"", "w1", "a.b", "n1/x0/m.ab", "/w0/m.ab"} {
		if got := WorkerMember(id); got != "" {
			t.Errorf("WorkerMember(%q) = %q, want none", id, got)
		}
	}
}
