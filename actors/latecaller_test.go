package actors

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// callerFunc is a Caller made of a function.
type callerFunc func(ctx context.Context, identity, kind string, msg any) (any, error)

func (f callerFunc) Request(ctx context.Context, identity, kind string, msg any) (any, error) {
	return f(ctx, identity, kind, msg)
}

// TestLateCallerWaitsForItsCaller: a request made before the node installed its cluster member waits for it
// (an actor activated on a node whose member joined the topology but has not finished starting) and then
// goes through; one whose context ends first fails with that context's error; a second Set changes nothing
// for the waiting.
func TestLateCallerWaitsForItsCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l LateCaller
		if l.MemberGone("n1", "m1") {
			t.Fatal("MemberGone without a caller")
		}
		short, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := l.Request(short, "org_1", KindOrg, &OrgGet{OrgID: "org_1"}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("request whose budget ended before a caller: %v", err)
		}
		done := make(chan error, 1)
		go func() {
			v, err := l.Request(context.Background(), "org_1", KindOrg, &OrgGet{OrgID: "org_1"})
			if err == nil && v != "answered org_1" {
				err = errors.New("wrong answer")
			}
			done <- err
		}()
		synctest.Wait() // the request is waiting for a caller
		select {
		case err := <-done:
			t.Fatalf("the request returned before a caller was installed: %v", err)
		default:
		}
		l.Set(callerFunc(func(_ context.Context, identity, _ string, _ any) (any, error) { return "answered " + identity, nil }))
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		l.Set(callerFunc(func(context.Context, string, string, any) (any, error) { return nil, errors.New("second") }))
		if _, err := l.Request(context.Background(), "org_1", KindOrg, &OrgGet{}); err == nil || err.Error() != "second" {
			t.Fatalf("after a second Set: %v", err)
		}
	})
}
