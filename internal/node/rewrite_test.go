package node_test

import (
	"context"
	"fmt"
	"testing"

	"filigrane/actors/durable"
	"filigrane/persistence"
)

// rewrite gives the stored record under key what fn sets, bypassing the checks of the code that writes it: a
// record from before a rule (a name with a character that is refused now) that must still load and show.
func rewrite[T any, P durable.Ptr[T]](t *testing.T, st persistence.Store, key string, fn func(P)) {
	t.Helper()
	_, err := durable.Update[T, P](context.Background(), st, []byte(key), 0, func(cur P) (P, error) {
		if cur == nil {
			return nil, fmt.Errorf("no record under %s", key)
		}
		next := P(new(T))
		*next = *cur
		fn(next)
		return next, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
