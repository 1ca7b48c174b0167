package clustertest_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"filigrane/cluster"
	"filigrane/cluster/clustertest"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/rs/zerolog"
)

// helperEnv switches the test binary into a cluster node (the "given
// binary" of the multi-process test).
const helperEnv = "FILIGRANE_CLUSTERTEST_NODE"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		os.Exit(nodeMain(os.Args[1:]))
	}
	if os.Getenv(burnEnv) == "1" {
		os.Exit(burnMain())
	}
	if os.Getenv(httpEnv) == "1" {
		os.Exit(httpMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

type (
	Hit      struct{}
	HitReply struct {
		Identity string
		Node     string
		Count    int
	}
	// Hold asks a node's late actor to keep the request unanswered; Ask asks it to answer every request it
	// keeps with LateReply{Late: true} (late answers), then this one with LateReply{}.
	Hold      struct{}
	Ask       struct{}
	LateReply struct{ Late bool }
)

func registry() *cluster.Registry {
	reg := cluster.NewRegistry()
	reg.MustRegister(Hit{}, HitReply{}, Hold{}, Ask{}, LateReply{})
	return reg
}

// lateActor keeps the requests it is asked to hold and answers them all, late, at each Ask: as a job actor
// answers its waiters when the job ends, whoever asked. held reports how many it keeps.
func lateActor(reg *cluster.Registry, held func(n int)) actor.ReceiveFunc {
	var waiters []*actor.PID
	return func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *Hold:
			waiters = append(waiters, ctx.Sender())
			held(len(waiters))
		case *Ask:
			late, _ := reg.Wrap(LateReply{Late: true})
			for _, w := range waiters {
				ctx.Send(w, late)
			}
			_ = cluster.Respond(ctx, reg, LateReply{})
		}
	}
}

type counter struct {
	reg  *cluster.Registry
	node string
	id   string
	n    int
}

func (c *counter) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *pcluster.ClusterInit:
		c.id = m.Identity.Identity
	case *Hit:
		c.n++
		_ = cluster.Respond(ctx, c.reg, HitReply{Identity: c.id, Node: c.node, Count: c.n})
	}
}

// nodeMain is a minimal cluster node process: flags in, "READY <generation>"
// out, commands on stdin ("hit <seq> <identity>", "members <seq>"), a
// graceful stop on SIGTERM, a restart of the node (new actor system, same
// ports) when the cluster blocks it, and an exit when stdin closes (the test
// process is gone).
func nodeMain(args []string) int {
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	name := fs.String("name", "", "node name")
	remotePort := fs.Int("remote-port", 0, "gRPC port")
	gossipPort := fs.Int("gossip-port", 0, "memberlist port")
	join := fs.String("join", "", "comma-separated gossip addresses")
	edge := fs.Bool("edge", false, "edge node: hosts no kinds")
	probeInterval := fs.Duration("probe-interval", 0, "failure detection: probe interval (0: production default)")
	probeTimeout := fs.Duration("probe-timeout", 0, "failure detection: probe timeout (0: production default)")
	suspicionMult := fs.Int("suspicion-mult", 0, "failure detection: suspicion multiplier (0: production default)")
	busy := fs.Int("busy", 0, "goroutines that burn CPU and allocate inside the node process (a node at work)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	for range *busy {
		go busyWork()
	}
	var joins []string
	if *join != "" {
		joins = strings.Split(*join, ",")
	}
	level := zerolog.WarnLevel
	if l, err := zerolog.ParseLevel(os.Getenv(logEnv)); err == nil && l != zerolog.NoLevel {
		level = l
	}
	log := zerolog.New(os.Stderr).Level(level).With().Timestamp().Str("proc", *name).Logger()
	reg := registry()
	cfg := cluster.Config{
		NodeName:   *name,
		RemotePort: *remotePort,
		GossipPort: *gossipPort,
		Join:       joins,
		Roles:      []cluster.Role{cluster.RoleWorker},
		Logger:     log,
		Registry:   reg,
		Kinds: []cluster.Kind{cluster.NewKind("counter", actor.PropsFromProducer(func() actor.Actor {
			return &counter{reg: reg, node: *name}
		}))},
		FailureDetection: cluster.FailureDetection{ProbeInterval: *probeInterval, ProbeTimeout: *probeTimeout,
			SuspicionMult: *suspicionMult},
	}
	if *edge {
		cfg.Roles, cfg.Kinds = []cluster.Role{cluster.RoleEdge}, nil
	}
	var outMu sync.Mutex
	say := func(format string, a ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Printf(format+"\n", a...)
	}
	var cur atomic.Pointer[cluster.Node]
	generation := 0
	start := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), callBudget)
		defer cancel()
		node, err := cluster.Start(ctx, cfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, "start:", err)
			return err
		}
		cur.Store(node)
		generation++
		say("READY %d %s %s", generation, node.ID(), node.GossipAddr())
		return nil
	}
	if err := start(); err != nil {
		return 1
	}
	if _, err := cur.Load().SpawnNamed(actor.PropsFromFunc(lateActor(reg, func(n int) { say("HELD %d", n) })), "late"); err != nil {
		fmt.Fprintln(os.Stderr, "spawn:", err)
		return 1
	}

	stdinClosed := make(chan struct{})
	go func() {
		defer close(stdinClosed)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			node := cur.Load()
			switch {
			case len(f) == 3 && f[0] == "hit":
				go func(seq, id string) {
					rctx, rcancel := context.WithTimeout(context.Background(), callBudget)
					defer rcancel()
					resp, err := node.Request(rctx, id, "counter", Hit{})
					if err != nil {
						say("HITERR %s %s %v", seq, id, err)
						return
					}
					r := resp.(*HitReply)
					say("HIT %s %s %s %d", seq, id, r.Node, r.Count)
				}(f[1], f[2])
			case len(f) == 3 && f[0] == "hold": // hold <address> <n>: n requests the late actor there keeps
				n, _ := strconv.Atoi(f[2])
				for range n {
					go func() {
						rctx, rcancel := context.WithTimeout(context.Background(), callBudget)
						defer rcancel()
						_, _ = node.RequestPID(rctx, actor.NewPID(f[1], "late"), Hold{})
					}()
				}
			case len(f) == 3 && f[0] == "ask": // ask <seq> <address>: one request to the late actor there
				rctx, rcancel := context.WithTimeout(context.Background(), callBudget)
				resp, err := node.RequestPID(rctx, actor.NewPID(f[2], "late"), Ask{})
				rcancel()
				if r, ok := resp.(*LateReply); ok && err == nil {
					say("ASKED %s %t", f[1], r.Late)
				} else {
					say("ASKERR %s %v", f[1], err)
				}
			case len(f) == 2 && f[0] == "members":
				ms := node.Members()
				names := make([]string, len(ms))
				for i, m := range ms {
					names[i] = m.Name
				}
				say("MEMBERS %s %d %s", f[1], len(ms), strings.Join(names, ","))
			case len(f) == 2 && f[0] == "health":
				say("HEALTH %s %d", f[1], node.HealthScore())
			default:
				say("UNKNOWN %q", sc.Text())
			}
		}
	}()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	for {
		node := cur.Load()
		select {
		case <-sig:
			if err := node.Stop(context.Background(), true); err != nil {
				fmt.Fprintln(os.Stderr, "stop:", err)
			}
			say("STOPPED")
			return 0
		case <-node.Blocked():
			// The cluster will not route to this id again: start over
			// with a new actor system (same name and ports).
			say("BLOCKED %d", generation)
			_ = node.Stop(context.Background(), false)
			if err := start(); err != nil {
				return 3
			}
		case <-stdinClosed:
			_ = node.Stop(context.Background(), false)
			return 4
		}
	}
}

// callBudget bounds a call that must succeed (a node's start, a request):
// it only turns a hang into a failure.
const callBudget = 60 * time.Second

// detection is the failure detection of the test's nodes: it kills and
// freezes nodes and must see them dropped, and on a loaded machine the
// production timings would drop live nodes too (see QuickDetection).
func detection() cluster.FailureDetection { return clustertest.QuickDetection() }

// edgeClient drives the edge process through its stdin.
type edgeClient struct {
	t   *testing.T
	ctx context.Context
	p   *clustertest.Process
	seq int

	slowest     time.Duration // slowest hit, for the log
	slowestWhat string
}

func (e *edgeClient) next() string { e.seq++; return strconv.Itoa(e.seq) }

// members returns how many members the edge sees.
func (e *edgeClient) members() int {
	e.t.Helper()
	seq := e.next()
	line, err := e.p.Ask(e.ctx, "members "+seq, regexp.MustCompile(`^MEMBERS `+seq+` `))
	if err != nil {
		e.t.Fatal(err)
	}
	n, _ := strconv.Atoi(strings.Fields(line)[2])
	return n
}

// waitMembers polls until the edge sees want members and returns how long
// that took. A member may have to be declared dead first: the wait is
// bounded by the failure detection's budget.
func (e *edgeClient) waitMembers(want int) time.Duration {
	e.t.Helper()
	start := time.Now()
	budget := clustertest.DetectionBudget(detection(), 4)
	for e.members() != want {
		if time.Since(start) > budget {
			e.t.Fatalf("edge does not see %d members:\n%s", want, e.p.Tail(30))
		}
		time.Sleep(25 * time.Millisecond)
	}
	return time.Since(start)
}

// hitAsync sends a request through the edge and returns a function that
// waits for its outcome: the node that answered and its count.
func (e *edgeClient) hitAsync(id string) func() (string, int) {
	e.t.Helper()
	seq := e.next()
	if err := e.p.Send("hit " + seq + " " + id); err != nil {
		e.t.Fatal(err)
	}
	return func() (string, int) {
		e.t.Helper()
		line, err := e.p.WaitLine(e.ctx, regexp.MustCompile(`^HIT(ERR)? `+seq+` `))
		if err != nil {
			e.t.Fatal(err)
		}
		f := strings.Fields(line)
		if f[0] == "HITERR" {
			e.t.Fatalf("request %s: %s", id, line)
		}
		n, _ := strconv.Atoi(f[4])
		return f[3], n
	}
}

func (e *edgeClient) hit(id string) (string, int) {
	start := time.Now()
	node, n := e.hitAsync(id)()
	if d := time.Since(start); d > e.slowest {
		e.slowest, e.slowestWhat = d, fmt.Sprintf("%s (answered by %s, count %d)", id, node, n)
	}
	return node, n
}

// TestProcessCluster runs three node processes and an edge process (all
// this test binary), kills one node with SIGKILL, measures detection and the
// failover of a request in flight, restarts it, and stops another
// gracefully. This test process hosts no node: every node runs in a
// process of its own, as in production.
func TestProcessCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	// Only turns a hang into a failure: on a loaded machine the test takes
	// several times its ~25 s.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	fd := detection()
	var out io.Writer
	if os.Getenv("FILIGRANE_TEST_LOG") != "" {
		out = os.Stderr
	}
	start := time.Now()
	ps, err := clustertest.StartProcesses(ctx, clustertest.ProcessConfig{
		Binary: os.Args[0],
		N:      4, // p0, p1, p2 and the edge
		Ports:  2, // remote, gossip
		Env:    []string{helperEnv + "=1"},
		Args: func(i int, ports [][]int) []string {
			name := fmt.Sprintf("p%d", i)
			if i == 3 {
				name = "edge"
			}
			args := []string{"-name", name,
				"-remote-port", strconv.Itoa(ports[i][0]), "-gossip-port", strconv.Itoa(ports[i][1]),
				"-probe-interval", fd.ProbeInterval.String(), "-probe-timeout", fd.ProbeTimeout.String(),
				"-suspicion-mult", strconv.Itoa(fd.SuspicionMult)}
			if i > 0 {
				args = append(args, "-join", "127.0.0.1:"+strconv.Itoa(ports[0][1]))
			}
			if i == 3 {
				args = append(args, "-edge")
			}
			return args
		},
		Output: out,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ps.KillAll()
	// The node processes are this binary: under -race they report their own
	// data races on stderr, which the harness captures. Races where both
	// accesses are in third-party code (protoactor reads its block list
	// without a lock, for instance) are logged; any access in our code fails.
	noRaces := func(p *clustertest.Process) {
		t.Helper()
		ours, upstream := classifyRaces(p.Tail(1 << 20))
		if ours != "" {
			t.Errorf("process %d reported a data race in filigrane code:\n%s", p.Index, ours)
		}
		if upstream > 0 {
			t.Logf("process %d reported %d data race(s) inside third-party code (not ours)", p.Index, upstream)
		}
	}
	defer func() {
		for _, p := range ps.List {
			noRaces(p)
		}
	}()
	t.Logf("4 processes ready in %v", time.Since(start))

	edge := &edgeClient{t: t, ctx: ctx, p: ps.List[3]}
	edge.waitMembers(4)

	owners := map[string][]string{}
	for i := 0; i < 30; i++ {
		id := fmt.Sprintf("proc-%d", i)
		node, _ := edge.hit(id)
		owners[node] = append(owners[node], id)
	}
	if len(owners) < 2 || len(owners["edge"]) > 0 {
		t.Fatalf("identities spread badly: %v", owners)
	}
	t.Logf("30 identities over %d processes: p0 %d, p1 %d, p2 %d", len(owners), len(owners["p0"]), len(owners["p1"]), len(owners["p2"]))

	// Crash p2 (p1 if p2 owns nothing). The edge must drop it within the
	// detection budget, and a request sent to it right after the kill must
	// be answered by a survivor.
	victim := "p2"
	if len(owners[victim]) == 0 {
		victim = "p1"
	}
	vp := ps.List[victim[1]-'0']
	killed := time.Now()
	if err := vp.Kill(); err != nil {
		t.Fatal(err)
	}
	inflight := edge.hitAsync(owners[victim][0])
	edge.waitMembers(3)
	detect := time.Since(killed)
	node, _ := inflight()
	answered := time.Since(killed)
	if node == victim {
		t.Fatalf("request answered by the killed %s", victim)
	}
	for _, id := range owners[victim][1:] {
		if node, n := edge.hit(id); node == victim || n != 1 {
			t.Fatalf("%s after the kill: answered by %s with count %d, want a fresh activation on a survivor", id, node, n)
		}
	}
	t.Logf("SIGKILL of %s: edge dropped it after %v (by the timings: at most %v); a request sent right after the kill was answered by %s after %v",
		victim, detect, fd.DetectionTime(4), node, answered)

	// Restart it: a new actor system id under the same name and ports.
	noRaces(vp)
	restarted := time.Now()
	if err := vp.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	edge.waitMembers(4)
	t.Logf("%s restarted and visible to the edge after %v", victim, time.Since(restarted))
	back := 0
	for _, id := range owners[victim] {
		if node, _ := edge.hit(id); node == victim {
			back++
		}
	}
	if back == 0 {
		t.Fatalf("no identity went back to the restarted %s", victim)
	}

	// Freeze p1 (SIGSTOP, like a long GC pause or a stalled VM) until the
	// others declare it dead, then let it go on: its old id is blocked, a
	// peer tells it so, and it restarts its node under a new id.
	pp := ps.List[1]
	paused := time.Now()
	if err := pp.Pause(); err != nil {
		t.Fatal(err)
	}
	edge.waitMembers(3)
	t.Logf("p1 frozen: dropped after %v", time.Since(paused))
	if err := pp.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	if _, err := pp.WaitLine(ctx, regexp.MustCompile(`^BLOCKED 1$`)); err != nil {
		t.Fatalf("p1 was not told it is blocked: %v\n%s", err, pp.Tail(30))
	}
	blockedAfter := time.Since(resumed)
	if _, err := pp.WaitLine(ctx, regexp.MustCompile(`^READY 2 `)); err != nil {
		t.Fatalf("p1 did not restart its node: %v\n%s", err, pp.Tail(30))
	}
	edge.waitMembers(4)
	t.Logf("p1 resumed: learned it was blocked after %v, back as a new member after %v", blockedAfter, time.Since(resumed))
	for i := 0; i < 30; i++ {
		edge.hit(fmt.Sprintf("proc-%d", i))
	}
	// Only the frozen node restarts: nobody else was declared dead.
	for _, p := range []*clustertest.Process{ps.List[0], ps.List[2], ps.List[3]} {
		if strings.Contains(p.Tail(1<<20), "BLOCKED") {
			t.Errorf("process %d was blocked too:\n%s", p.Index, p.Tail(30))
		}
	}

	// Graceful stop of p0 (the seed): the edge sees it leave without waiting
	// for failure detection.
	stopped := time.Now()
	if err := ps.List[0].Stop(ctx); err != nil {
		t.Fatal(err)
	}
	edge.waitMembers(3)
	t.Logf("SIGTERM of p0: process exited and the edge dropped it after %v", time.Since(stopped))
	defer func() { t.Logf("slowest request: %v for %s", edge.slowest, edge.slowestWhat) }()
	for i := 0; i < 30; i++ {
		if node, _ := edge.hit(fmt.Sprintf("proc-%d", i)); node == "p0" {
			t.Fatalf("proc-%d answered by stopped p0", i)
		}
	}
}

// classifyRaces splits race-detector reports in out into those where an
// access's top frame is in a filigrane package (returned in full) and a
// count of the others.
func classifyRaces(out string) (ours string, upstream int) {
	reports := strings.Split(out, "WARNING: DATA RACE")
	for _, r := range reports[1:] {
		lines := strings.Split(r, "\n")
		mine := false
		for i, l := range lines {
			l = strings.TrimSpace(l)
			access := strings.HasPrefix(l, "Read at") || strings.HasPrefix(l, "Write at") ||
				strings.HasPrefix(l, "Previous read at") || strings.HasPrefix(l, "Previous write at")
			if access && i+1 < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i+1]), "filigrane/") {
				mine = true
			}
		}
		if mine {
			ours += "WARNING: DATA RACE" + r
		} else {
			upstream++
		}
	}
	return ours, upstream
}

// TestFreePortsOutsideEphemeralRange: FreePorts gives distinct ports that TCP and UDP can bind, below the
// kernel's ephemeral range where it is readable, so that no listen on port 0 or outgoing connection of a
// parallel test can take one before the process binds it.
func TestFreePortsOutsideEphemeralRange(t *testing.T) {
	ports, err := clustertest.FreePorts(40)
	if err != nil {
		t.Fatal(err)
	}
	ephemeral := 0
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		ephemeral, _ = strconv.Atoi(strings.Fields(string(b))[0])
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d given twice: %v", p, ports)
		}
		seen[p] = true
		if ephemeral >= 12000 && (p < 10000 || p >= ephemeral) {
			t.Fatalf("port %d is not in [10000, %d): the kernel may hand it to a listen on port 0", p, ephemeral)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d: %v", p, err)
		}
		l.Close()
	}
}

// burnMain spins one CPU until stdin closes.
func burnMain() int {
	runtime.GOMAXPROCS(1)
	fmt.Println("READY")
	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(done) }()
	x := 0
	for {
		select {
		case <-done:
			return 0
		default:
		}
		for i := 0; i < 1e6; i++ {
			x += i
		}
	}
}

// busyWork burns CPU and allocates like a worker decoding images, forever.
func busyWork() {
	var keep [][]byte
	for i := 0; ; i++ {
		b := make([]byte, 1<<20)
		for j := range b {
			b[j] = byte(i + j)
		}
		keep = append(keep, b)
		if len(keep) > 16 {
			keep = keep[:0]
		}
	}
}

// httpEnv switches the test binary into a small HTTP server on the port given as its argument, whose
// /healthz names it, and which exits saying why when the port is taken.
const httpEnv = "FILIGRANE_CLUSTERTEST_HTTP"

func httpMain(args []string) int {
	ln, err := net.Listen("tcp", "127.0.0.1:"+args[0])
	if err != nil {
		fmt.Println(err)
		return 1
	}
	return runServer(ln, "the process")
}

func runServer(ln net.Listener, name string) int {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, name) })
	if err := http.Serve(ln, mux); err != nil {
		fmt.Println(err)
	}
	return 1
}

// TestStartOnATakenPortStartsAgain: another process takes the port picked for ours before ours binds it (here
// the test itself, answering /healthz). Ours exits on the failed bind; the readiness probe must not take the
// stranger's answer for ours, and the start goes on with new ports.
func TestStartOnATakenPortStartsAgain(t *testing.T) {
	var strangerPort int
	procs, err := clustertest.StartProcesses(context.Background(), clustertest.ProcessConfig{
		Binary: os.Args[0], N: 1, Ports: 1, Env: []string{httpEnv + "=1"},
		Args: func(i int, ports [][]int) []string {
			if strangerPort == 0 {
				strangerPort = ports[0][0]
				ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(strangerPort))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { ln.Close() })
				go runServer(ln, "a stranger")
			}
			return []string{strconv.Itoa(ports[0][0])}
		},
		Ready: clustertest.ReadyHTTP(0, "/healthz"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(procs.KillAll)
	p := procs.List[0]
	if p.Ports[0] == strangerPort {
		t.Fatalf("the process was handed the port the stranger holds (%d)", strangerPort)
	}
	res, err := http.Get("http://127.0.0.1:" + strconv.Itoa(p.Ports[0]) + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if b, _ := io.ReadAll(res.Body); string(b) != "the process" {
		t.Fatalf("the process's port answers %q", b)
	}
}

// A peer's late answer to a request of a process that was killed and restarted on the same address must not
// answer a request of the new process. The peer's late actor keeps 64 requests of the first process (as a
// job actor keeps the sync embeds waiting on its job, and answers them when the job ends); p1 is killed and
// restarted, then asks the peer 200 times, and each ask makes the peer answer the kept requests first. Each ask
// must get its own answer. protoactor numbers a process's requests from zero and delivers a remote answer by
// address and number alone, so the new process's requests took the numbers of the old one's and got their
// answers (bench chaos with a frozen node declared dead and restarted: a synchronous embed on the restarted
// node answered with another job's result; the client saw that job twice and its own never, though charged).
func TestLateReplyToEarlierIncarnation(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ps, err := clustertest.StartProcesses(ctx, clustertest.ProcessConfig{
		Binary: os.Args[0], N: 2, Ports: 2, Env: []string{helperEnv + "=1"},
		Args: func(i int, ports [][]int) []string { // two clusters of one: requests go by address
			return []string{"-name", fmt.Sprintf("p%d", i), "-remote-port", strconv.Itoa(ports[i][0]),
				"-gossip-port", strconv.Itoa(ports[i][1])}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ps.KillAll()
	peer, p1 := ps.List[0], ps.List[1]
	peerAddr := "127.0.0.1:" + strconv.Itoa(peer.Ports[0])
	const held, asks = 64, 200
	if err := p1.Send(fmt.Sprintf("hold %s %d", peerAddr, held)); err != nil {
		t.Fatal(err)
	}
	if _, err := peer.WaitLine(ctx, regexp.MustCompile(fmt.Sprintf(`^HELD %d$`, held))); err != nil {
		t.Fatal(err)
	}
	if err := p1.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p1.Exited()
	if err := p1.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range asks {
		seq := strconv.Itoa(i)
		line, err := p1.Ask(ctx, "ask "+seq+" "+peerAddr, regexp.MustCompile(`^ASK(ED|ERR) `+seq+` `))
		if err != nil {
			t.Fatal(err)
		}
		if line != "ASKED "+seq+" false" {
			t.Fatalf("ask %d of the restarted process: %q, want its own answer (a late answer to the killed process's request reached it)", i, line)
		}
	}
}
