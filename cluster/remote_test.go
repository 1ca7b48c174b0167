package cluster

import (
	"errors"
	"testing"
	"time"

	"filigrane/cluster/internal/grpcprobe"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
)

// startRemoteSystem starts an actor system with only the remote layer
// (no cluster) on 127.0.0.1 and a free port.
// It returns once the gRPC server's accept loop is running, ordered (for the
// race detector) before the next remote start; see internal/grpcprobe.
func startRemoteSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(testLogger())))
	probe := grpcprobe.New()
	r := remote.NewRemote(sys, remote.Configure("127.0.0.1", 0, remote.WithServerOptions(probe.ServerOption())))
	r.Start()
	t.Cleanup(func() {
		r.Shutdown(false)
		sys.Shutdown()
	})
	if err := probe.Wait(ctxTimeout(t, 10*time.Second), sys.Address()); err != nil {
		t.Fatal(err)
	}
	return sys
}

// TestRemoteRoundTrip proves a request/response round trip between two actor
// systems over 127.0.0.1 in one test process, with msgpack envelopes.
func TestRemoteRoundTrip(t *testing.T) {
	regA, regB := testRegistry(t), testRegistry(t)
	regA.MustRegister(Secret{}) // only the caller knows Secret

	a := startRemoteSystem(t)
	b := startRemoteSystem(t)
	if a.Address() == b.Address() {
		t.Fatalf("both systems on %s", a.Address())
	}
	if _, err := b.Root.SpawnNamed(regB.WithEnvelope(actor.PropsFromFunc(pingActor(regB, b.Address()))), "ping"); err != nil {
		t.Fatal(err)
	}
	pid := actor.NewPID(b.Address(), "ping")

	start := time.Now()
	resp, err := regA.RequestPID(ctxTimeout(t, 10*time.Second), a.Root, pid, Ping{N: 41})
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	pong, ok := resp.(*Pong)
	if !ok || pong.N != 42 || pong.From != b.Address() {
		t.Fatalf("reply = %#v, want *Pong{42, %s}", resp, b.Address())
	}
	t.Logf("first remote round trip %s -> %s: %v", a.Address(), b.Address(), time.Since(start))

	// A Failure reply comes back as an error the caller can inspect.
	_, err = regA.RequestPID(ctxTimeout(t, 10*time.Second), a.Root, pid, Ping{Text: "fail"})
	var f *Failure
	if !errors.As(err, &f) || f.Code != "refused" {
		t.Fatalf("failing request error = %v, want Failure{refused}", err)
	}

	// A type the receiver does not know is answered at once with a Failure,
	// not left to time out.
	start = time.Now()
	_, err = regA.RequestPID(ctxTimeout(t, 10*time.Second), a.Root, pid, Secret{Word: "x"})
	if !errors.As(err, &f) || f.Code != FailureUnknownType {
		t.Fatalf("unknown type error = %v, want Failure{%s}", err, FailureUnknownType)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("unknown type took %v; it should fail fast", d)
	}

	// The context bounds the wait even when nobody answers.
	start = time.Now()
	_, err = regA.RequestPID(ctxTimeout(t, 300*time.Millisecond), a.Root, actor.NewPID(b.Address(), "nobody"), Ping{})
	if err == nil {
		t.Fatal("request to a missing actor succeeded")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("request to a missing actor took %v", d)
	}
}
