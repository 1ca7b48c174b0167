package authlimit

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"filigrane/internal/parkedctx"
)

// TestFlightsShareOneRead: a lookup of an id whose read is under way gets that read's answer without reading;
// a read refused by the Limiter, or whose request ended, gives the waiters ErrLookAgain rather than another
// client's refusal or cancellation; a panicking read still answers them.
func TestFlightsShareOneRead(t *testing.T) {
	var fs Flights[string]
	shared := func(t *testing.T, leaderCtx context.Context, answer func() (string, error)) (string, error) {
		t.Helper()
		release := make(chan struct{})
		reading := make(chan struct{})
		leaderDone := make(chan struct{})
		go func() {
			defer close(leaderDone)
			defer func() { _ = recover() }()
			_, _ = fs.Do(leaderCtx, "id", func() (string, error) {
				close(reading)
				<-release
				return answer()
			})
		}()
		<-reading
		waiter := parkedctx.New(context.Background())
		type result struct {
			v   string
			err error
		}
		got := make(chan result, 1)
		go func() {
			v, err := fs.Do(waiter, "id", func() (string, error) { return "", errors.New("the waiter read") })
			got <- result{v, err}
		}()
		<-waiter.Parked()
		close(release)
		<-leaderDone
		r := <-got
		return r.v, r.err
	}
	for _, c := range []struct {
		name    string
		ctx     func() context.Context
		answer  func() (string, error)
		wantVal string
		wantErr error
	}{
		{"found", context.Background, func() (string, error) { return "record", nil }, "record", nil},
		{"missing", context.Background, func() (string, error) { return "", errNotThere }, "", errNotThere},
		{"refused", context.Background, func() (string, error) {
			return "", fmt.Errorf("read: %w", &Refusal{Reason: AddressSpent, RetryAfter: time.Second})
		}, "", ErrLookAgain},
		{"leader gone", func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, func() (string, error) { return "", context.Canceled }, "", ErrLookAgain},
		{"panic", context.Background, func() (string, error) { panic("read") }, "", ErrLookAgain},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := shared(t, c.ctx(), c.answer)
			if v != c.wantVal || !errors.Is(err, c.wantErr) {
				t.Fatalf("the waiter got %q, %v; want %q, %v", v, err, c.wantVal, c.wantErr)
			}
		})
	}
	// Nothing under way: the next lookup reads.
	if v, err := fs.Do(context.Background(), "id", func() (string, error) { return "again", nil }); v != "again" || err != nil {
		t.Fatalf("a lookup after the others: %q, %v", v, err)
	}
}

var errNotThere = errors.New("not there")
