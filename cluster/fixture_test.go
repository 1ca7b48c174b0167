package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"filigrane/cluster"
	"filigrane/cluster/clustertest"
	"filigrane/cluster/internal/grpcprobe"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
)

// Messages of the tests, plain structs like real actor messages.
type (
	Ping struct {
		N    int
		Text string
	}
	Pong struct {
		N    int
		From string
	}
	Secret struct{ Word string }
	// Hit asks a counter grain to count (Op "") or to misbehave.
	Hit      struct{ Op string }
	HitReply struct {
		Identity string
		Node     string
		Count    int
	}
)

// The in-process actor systems of this test binary. They are all started
// once, together, before any of them does work: see clustertest.StartNodes
// for why starting more later would be a data race (in gRPC) under -race.
type fixture struct {
	regA, regB *cluster.Registry
	sysA, sysB *actor.ActorSystem // remote only, no cluster
	stopRemote func()

	reg   *cluster.Registry
	nodes []*cluster.Node // n1, n2, n3: one cluster over memberlist
	// f1, f2, f3: another cluster, which TestFailover forms and takes
	// down. They are started with the others (see clustertest.StartNodes)
	// but each alone: TestFailover joins them, so that their fast failure
	// detection only runs while that test needs it.
	failover []*cluster.Node
	// intruder has the failover cluster's label but not its gossip key.
	intruder *cluster.Node
	// m1, m2: two clusters of one that TestRequestFollowsActivationMovedByJoin joins, so that activations
	// move to the member that joins; hold keeps one of m1's activations busy meanwhile.
	moving []*cluster.Node
	hold   *holdGate
	// s1, s2: a cluster of two; TestGracefulStopEndsWithItsContext stops s1 while its blocker activation is
	// stuck in a message (stuck signals it got one, closing release lets it go).
	stopping       []*cluster.Node
	stuck, release chan struct{}

	// Errors of deliberately failing starts, made first (see startFailures).
	portInUseErr, joinErr error
	joinTook              time.Duration

	mu          sync.Mutex
	failoverRan bool
	movingRan   bool
	ran         map[string]bool // tests that use one-shot parts of the fixture (onlyOnce)
}

// holdGate keeps a counter busy: Hit{Op: "hold"} on the node named node reports the counter's identity on
// held and returns once release is closed; on other nodes it counts like Hit{}. Hit{Op: "drop-first"} is
// counted but not answered the first time an activation gets it (a reply lost on the way), which it reports
// on dropped, and answered after. Hit{Op: "block"} reports on blocked and is counted and answered once
// resume is closed.
type holdGate struct {
	node    string
	held    chan string
	release chan struct{}
	dropped chan string
	blocked chan string
	resume  chan struct{}
}

var (
	fxOnce sync.Once
	fx     *fixture
	fxErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fx != nil {
		for _, n := range append(append(append(append(fx.nodes, fx.failover...), fx.moving...), fx.stopping...), fx.intruder) {
			_ = n.Stop(context.Background(), false)
		}
		fx.stopRemote()
	}
	os.Exit(code)
}

func testLogger() zerolog.Logger {
	var w io.Writer = io.Discard
	if os.Getenv("FILIGRANE_TEST_LOG") != "" {
		w = zerolog.ConsoleWriter{Out: os.Stderr}
	}
	return zerolog.New(w).Level(zerolog.InfoLevel).With().Timestamp().Logger()
}

func getFixture(t *testing.T) *fixture {
	t.Helper()
	fxOnce.Do(func() { fx, fxErr = startFixture() })
	if fxErr != nil {
		t.Fatalf("fixture: %v", fxErr)
	}
	return fx
}

// Bounds of the tests' waits (see clustertest.LoadSlack).
const (
	// requestTimeout is the nodes' RequestTimeout, the wait of a request
	// without a deadline: far above any deadline a test gives plus
	// LoadSlack, so that a call that ignores its context fails the bound.
	requestTimeout = 2 * time.Minute
	// callBudget is the deadline of a call that must succeed: it only
	// turns a hang into a failure.
	callBudget = 30 * time.Second
	// gossipBudget bounds the spread of a metadata change: broadcast every
	// GossipInterval, and a lost broadcast repaired by the next push/pull
	// (every 15 s, provider.go).
	gossipBudget = 15*time.Second + clustertest.LoadSlack
)

// failoverDetection is the failure detection of the cluster TestFailover
// crashes a node of.
func failoverDetection() cluster.FailureDetection { return clustertest.QuickDetection() }

func startFixture() (*fixture, error) {
	// Starting nine actor systems under the race detector on a loaded
	// machine takes a while; this only turns a hang into a failure.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	f := &fixture{regA: cluster.NewRegistry(), regB: cluster.NewRegistry(), reg: cluster.NewRegistry(),
		hold: &holdGate{node: "m1", held: make(chan string, 1), release: make(chan struct{}), dropped: make(chan string, 1),
			blocked: make(chan string, 1), resume: make(chan struct{})}}
	f.regA.MustRegister(Ping{}, Pong{}, Secret{}) // only A knows Secret
	f.regB.MustRegister(Ping{}, Pong{})
	f.reg.MustRegister(Ping{}, Pong{}, Hit{}, HitReply{})
	f.stuck, f.release = make(chan struct{}, 1), make(chan struct{})

	startFailures(ctx, f)

	// Two remote-only systems.
	var probes []*grpcprobe.Probe
	var remotes []*remote.Remote
	f.stopRemote = func() {
		for _, r := range remotes {
			r.Shutdown(false)
		}
	}
	startRemote := func() (*actor.ActorSystem, error) {
		sys := actor.NewActorSystem(actor.WithLoggerFactory(cluster.LoggerFactory(testLogger())))
		probe := grpcprobe.New()
		r := remote.NewRemote(sys, remote.Configure("127.0.0.1", 0, remote.WithServerOptions(probe.ServerOption())))
		r.Start()
		remotes = append(remotes, r)
		probes = append(probes, probe)
		return sys, probe.Wait(ctx, sys.Address())
	}
	var err error
	if f.sysA, err = startRemote(); err != nil {
		return nil, err
	}
	if f.sysB, err = startRemote(); err != nil {
		f.stopRemote()
		return nil, err
	}
	if _, err := f.sysB.Root.SpawnNamed(f.regB.WithEnvelope(actor.PropsFromFunc(pingActor(f.regB, f.sysB.Address()))), "ping"); err != nil {
		f.stopRemote()
		return nil, err
	}

	// Two three-node clusters.
	configs := func(prefix string) []cluster.Config {
		label := fmt.Sprintf("filigrane-test-%s-%d", prefix, os.Getpid())
		cfgs := make([]cluster.Config, 3)
		for i := range cfgs {
			name := fmt.Sprintf("%s%d", prefix, i+1)
			cfgs[i] = cluster.Config{
				NodeName: name,
				Roles:    []cluster.Role{cluster.RoleWorker},
				Capacity: i,
				Logger:   testLogger(),
				Kinds:    []cluster.Kind{cluster.NewKind("counter", actor.PropsFromProducer(newCounter(f.reg, name, f.hold)))},
				Registry: f.reg,
				Label:    label,
				// The routing cluster's nodes must all stay alive.
				FailureDetection: clustertest.StableDetection(),
				RequestTimeout:   requestTimeout,
			}
		}
		cfgs[0].Roles = []cluster.Role{cluster.RoleEdge, cluster.RoleWorker}
		cfgs[1].GPUs, cfgs[1].GPUMemory = 2, 2*85_520_809_984 // n2/f2 gossip a GPU inventory
		if prefix == "f" {                                    // the failover cluster gossips encrypted
			for i := range cfgs {
				cfgs[i].GossipKey = []byte("0123456789abcdef0123456789abcdef")
				cfgs[i].FailureDetection = failoverDetection()
			}
		}
		return cfgs
	}
	intruder := cluster.Config{NodeName: "intruder", Registry: f.reg, Logger: testLogger(), Label: configs("f")[0].Label,
		FailureDetection: clustertest.StableDetection()}
	// s1 hosts the blocker kind, s2 none, so the activation lives on the node that stops.
	stopLabel := fmt.Sprintf("filigrane-test-stop-%d", os.Getpid())
	blocker := actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*Hit); ok {
			f.stuck <- struct{}{}
			<-f.release // the call that never answers while the store is frozen
		}
	})
	ss := []cluster.Config{{NodeName: "s1", Logger: testLogger(), Registry: f.reg, Roles: []cluster.Role{cluster.RoleWorker},
		Label: stopLabel, Kinds: []cluster.Kind{cluster.NewKind("blocker", blocker)}, FailureDetection: clustertest.StableDetection()},
		{NodeName: "s2", Logger: testLogger(), Registry: f.reg, Label: stopLabel, FailureDetection: clustertest.StableDetection()}}
	// f1, f2 and f3 start as three clusters of one; TestFailover joins them.
	fs := configs("f")
	ms := configs("m")
	cs, err := clustertest.StartClusters(ctx, configs("n"), fs[:1], fs[1:2], fs[2:], []cluster.Config{intruder}, ms[:1], ms[1:2], ss)
	if err != nil {
		f.stopRemote()
		return nil, err
	}
	f.nodes, f.failover, f.intruder = cs[0], []*cluster.Node{cs[1][0], cs[2][0], cs[3][0]}, cs[4][0]
	f.moving = []*cluster.Node{cs[5][0], cs[6][0]}
	f.stopping = cs[7]
	// The remote-only servers' later connections come after all starts.
	for _, p := range probes {
		p.Sync()
	}
	fmt.Fprintf(os.Stderr, "fixture: 2 remote systems, two 3-node clusters, a 2-node cluster and six lone nodes started in %v\n", time.Since(start).Round(time.Millisecond))
	return f, nil
}

// liveCluster returns the fixture and its routing cluster n1..n3.
func liveCluster(t *testing.T) (*fixture, []*cluster.Node) {
	t.Helper()
	f := getFixture(t)
	return f, f.nodes
}

// pingActor answers Ping with Pong{N+1, from}, and "fail" pings with a Failure.
func pingActor(reg *cluster.Registry, from string) actor.ReceiveFunc {
	return func(ctx actor.Context) {
		if m, ok := ctx.Message().(*Ping); ok {
			if id := cluster.Identity(ctx); id != "" {
				_ = cluster.RespondFailure(ctx, reg, "identity", fmt.Errorf("plain actor has cluster identity %q", id))
				return
			}
			if m.Text == "fail" {
				_ = cluster.RespondFailure(ctx, reg, "refused", fmt.Errorf("asked to fail"))
				return
			}
			_ = cluster.Respond(ctx, reg, Pong{N: m.N + 1, From: from})
		}
	}
}

// counter is a virtual actor that counts hits and says where it lives.
type counter struct {
	reg      *cluster.Registry
	node     string
	hold     *holdGate
	identity string
	n        int
	dropped  bool
}

func newCounter(reg *cluster.Registry, node string, hold *holdGate) actor.Producer {
	return func() actor.Actor { return &counter{reg: reg, node: node, hold: hold} }
}

func (c *counter) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		// The identity is known from the start (before ClusterInit), so
		// state can be loaded here.
		c.identity = cluster.Identity(ctx)
	case *pcluster.ClusterInit:
		if m.Identity.Identity != c.identity {
			// Replies carry it, and the tests check the identity in replies.
			c.identity = fmt.Sprintf("mismatch: ClusterInit %q, Started %q", m.Identity.Identity, c.identity)
		}
	case *Hit:
		switch m.Op {
		case "silent":
			return
		case "fail":
			_ = cluster.RespondFailure(ctx, c.reg, "nope", fmt.Errorf("counter %s refuses", c.identity))
			return
		case "hold":
			if c.hold != nil && c.node == c.hold.node {
				c.hold.held <- c.identity
				<-c.hold.release
			}
		case "block":
			if c.hold != nil {
				c.hold.blocked <- c.identity
				<-c.hold.resume
			}
		case "drop-first":
			if !c.dropped && c.hold != nil {
				c.dropped = true
				c.n++
				c.hold.dropped <- c.identity
				return
			}
		}
		c.n++
		_ = cluster.Respond(ctx, c.reg, HitReply{Identity: c.identity, Node: c.node, Count: c.n})
	}
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond every 20 ms until it holds or d passes (d bounds a
// wait for something that must happen: see the budgets above).
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// joinDeadline is the context of the join to a dead address.
const joinDeadline = 1500 * time.Millisecond

// startFailures makes two starts that must fail, before any other system
// starts (a remote start later in the binary would race in gRPC): a remote
// port that is taken, and a join to an address where nobody listens.
func startFailures(ctx context.Context, f *fixture) {
	reg := cluster.NewRegistry()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.portInUseErr = err
		return
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	n, err := cluster.Start(ctx, cluster.Config{NodeName: "taken", RemotePort: port, Registry: reg, Logger: testLogger()})
	if err == nil {
		_ = n.Stop(context.Background(), false)
		err = errors.New("no error")
	}
	f.portInUseErr = err

	// Nobody answers on a port that was just closed.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.joinErr = err
		return
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	probe := grpcprobe.New()
	rl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.joinErr = err
		return
	}
	rport := rl.Addr().(*net.TCPAddr).Port
	rl.Close()
	jctx, cancel := context.WithTimeout(ctx, joinDeadline)
	defer cancel()
	// The probe must see this node's gRPC server (see grpcprobe) before
	// Start gives up and stops it; Start blocks in the join meanwhile, so
	// probe from a goroutine, retrying until the server listens. It gives
	// up when Start returns: a server that is gone never answers, and
	// retrying until the fixture's context ends would leave the rest of
	// the fixture no time (a loaded machine can start the server late).
	probed := make(chan error, 1)
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	go func() {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(rport))
		for {
			wctx, wcancel := context.WithTimeout(pctx, 200*time.Millisecond)
			err := probe.Wait(wctx, addr)
			wcancel()
			if err == nil || pctx.Err() != nil {
				probed <- err
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	start := time.Now()
	n, err = cluster.Start(jctx, cluster.Config{
		NodeName: "lonely", RemotePort: rport, Join: []string{deadAddr}, Registry: reg, Logger: testLogger(),
		ServerOptions: []grpc.ServerOption{probe.ServerOption()},
	})
	f.joinTook = time.Since(start)
	pcancel()
	if perr := <-probed; perr != nil && err != nil {
		err = fmt.Errorf("%w (and the probe failed: %v)", err, perr)
	}
	if err == nil {
		_ = n.Stop(context.Background(), false)
		err = errors.New("no error")
	}
	f.joinErr = err
}
