package actors_test

import (
	"testing"

	"filigrane/internal/ctxlint"
)

// backgroundAllowed names the functions of package actors and its subpackages that may call
// context.Background or context.TODO, each with the reason. Everything else runs on behalf of a message or a
// request and derives its contexts from the caller's or from Deps.Lifetime (the node's lifetime), so that no
// storage call, actor call or archive build outlives the node's store.
var backgroundAllowed = map[string]string{
	"lifetime": "Deps.lifetime: the context that never ends when no Lifetime is set (tests spawning actors directly)",
	"newPool":  "a pool's abandon context belongs to the pool, not to a request: the node's drain cancels it",
}

// TestNoBackgroundContextInActors parses the sources of actors/... and fails on every context.Background or
// context.TODO outside backgroundAllowed.
func TestNoBackgroundContextInActors(t *testing.T) {
	found, checked, err := ctxlint.Dir(".", true, backgroundAllowed)
	if err != nil {
		t.Fatal(err)
	}
	if checked < 30 {
		t.Fatalf("only %d source files parsed; is the test running in the package directory?", checked)
	}
	for _, bad := range found {
		t.Errorf("%s: an actor's blocking calls take the message's context or Deps.Lifetime, not a background context", bad)
	}
}
