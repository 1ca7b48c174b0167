package cluster

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"
)

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

// testLogger discards logs unless FILIGRANE_TEST_LOG is set: actor systems
// keep logging from their goroutines after a test returns, and a
// testing.T-backed writer would panic then.
func testLogger() zerolog.Logger {
	var w io.Writer = io.Discard
	if os.Getenv("FILIGRANE_TEST_LOG") != "" {
		w = zerolog.ConsoleWriter{Out: os.Stderr}
	}
	return zerolog.New(w).Level(zerolog.InfoLevel).With().Timestamp().Logger()
}

func testRegistry(t *testing.T) *Registry {
	t.Helper()
	reg := NewRegistry()
	reg.MustRegister(Ping{}, Pong{})
	return reg
}

// pingActor answers Ping with Pong{N+1, from}, and "fail" pings with a Failure.
func pingActor(reg *Registry, from string) actor.ReceiveFunc {
	return func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *Ping:
			if m.Text == "fail" {
				_ = RespondFailure(ctx, reg, "refused", errString("asked to fail"))
				return
			}
			_ = Respond(ctx, reg, Pong{N: m.N + 1, From: from})
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// eventually polls cond every 20 ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
