// Package recordtest is for tests only: it writes a stored record as an older version of the code could have
// left it (a name with a character a rule refuses now), bypassing the checks of the code that writes it, so a
// test can show that such a record still loads, shows and changes. It must not be imported by non-test code.
package recordtest

import (
	"context"
	"fmt"
	"testing"

	"filigrane/actors/durable"
	"filigrane/persistence"
)

// Rewrite gives the record under key what fn sets on a copy of it; the test fails when there is none.
func Rewrite[T any, P durable.Ptr[T]](t testing.TB, st persistence.Store, key string, fn func(P)) {
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
