package cluster

import "testing"

// Test messages. They are exported-field structs like real actor messages.
type Ping struct {
	N    int
	Text string
}

type Pong struct {
	N    int
	From string
}

type Secret struct{ Word string }

func testRegistry(t *testing.T) *Registry {
	t.Helper()
	reg := NewRegistry()
	reg.MustRegister(Ping{}, Pong{})
	return reg
}
