package clustertest_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
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
	os.Exit(m.Run())
}

var processClusterRan atomic.Bool

type (
	Hit      struct{}
	HitReply struct {
		Identity string
		Node     string
		Count    int
	}
)

func registry() *cluster.Registry {
	reg := cluster.NewRegistry()
	reg.MustRegister(Hit{}, HitReply{})
	return reg
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

// nodeMain is a minimal cluster node process: flags in, "READY" out, a
// graceful stop on SIGTERM, exit status 3 when the cluster blocks it.
func nodeMain(args []string) int {
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	name := fs.String("name", "", "node name")
	remotePort := fs.Int("remote-port", 0, "gRPC port")
	gossipPort := fs.Int("gossip-port", 0, "memberlist port")
	join := fs.String("join", "", "comma-separated gossip addresses")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var joins []string
	if *join != "" {
		joins = strings.Split(*join, ",")
	}
	log := zerolog.New(os.Stderr).Level(zerolog.WarnLevel).With().Timestamp().Str("proc", *name).Logger()
	reg := registry()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	node, err := cluster.Start(ctx, cluster.Config{
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
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start:", err)
		return 1
	}
	fmt.Printf("READY %s %s\n", node.ID(), node.GossipAddr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-sig:
		if err := node.Stop(true); err != nil {
			fmt.Fprintln(os.Stderr, "stop:", err)
		}
		fmt.Println("STOPPED")
		return 0
	case <-node.Blocked():
		fmt.Println("BLOCKED")
		_ = node.Stop(false)
		return 3
	}
}

// TestProcessCluster runs three node processes plus this test process as an
// edge node, kills one with SIGKILL, measures detection and failover,
// restarts it, and stops another gracefully.
//
// It runs once per test process: with go test -count=N, a second edge node
// started in this process after the first one's gRPC traffic would be a data
// race in gRPC's logger (protoactor's remote start writes it; see
// internal/grpcprobe).
func TestProcessCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	if processClusterRan.Swap(true) {
		t.Skip("already ran in this process (go test -count=N)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out io.Writer
	if os.Getenv("FILIGRANE_TEST_LOG") != "" {
		out = os.Stderr
	}
	start := time.Now()
	ps, err := clustertest.StartProcesses(ctx, clustertest.ProcessConfig{
		Binary: os.Args[0],
		N:      3,
		Ports:  2, // remote, gossip
		Env:    []string{helperEnv + "=1"},
		Args: func(i int, ports [][]int) []string {
			args := []string{"-name", fmt.Sprintf("p%d", i),
				"-remote-port", strconv.Itoa(ports[i][0]), "-gossip-port", strconv.Itoa(ports[i][1])}
			if i > 0 {
				args = append(args, "-join", "127.0.0.1:"+strconv.Itoa(ports[0][1]))
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
	t.Logf("3 node processes ready in %v", time.Since(start))

	reg := registry()
	edge, err := cluster.Start(ctx, cluster.Config{
		NodeName: "edge",
		Roles:    []cluster.Role{cluster.RoleEdge},
		Join:     []string{"127.0.0.1:" + strconv.Itoa(ps.List[0].Ports[1])},
		Registry: reg,
		Logger:   zerolog.New(io.Discard),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer edge.Stop(false)
	if err := clustertest.WaitMembers(ctx, 4, edge); err != nil {
		t.Fatal(err)
	}

	hit := func(id string) *HitReply {
		t.Helper()
		resp, err := edge.Request(ctx, id, "counter", Hit{})
		if err != nil {
			t.Fatalf("request %s: %v", id, err)
		}
		return resp.(*HitReply)
	}
	owners := map[string][]string{}
	for i := 0; i < 30; i++ {
		id := fmt.Sprintf("proc-%d", i)
		r := hit(id)
		owners[r.Node] = append(owners[r.Node], id)
	}
	if len(owners) < 2 || len(owners["edge"]) > 0 {
		t.Fatalf("identities spread badly: %v", owners)
	}
	t.Logf("30 identities over %d processes: p0 %d, p1 %d, p2 %d", len(owners), len(owners["p0"]), len(owners["p1"]), len(owners["p2"]))

	// Crash p2. The edge's view must drop it in about 2 s.
	victim := "p2"
	if len(owners[victim]) == 0 {
		victim = "p1"
	}
	vp := ps.List[victim[1]-'0']
	killed := time.Now()
	if err := vp.Kill(); err != nil {
		t.Fatal(err)
	}
	inflight := make(chan error, 1)
	go func() {
		_, err := edge.Request(ctx, owners[victim][0], "counter", Hit{})
		inflight <- err
	}()
	if err := clustertest.WaitMembers(ctx, 3, edge); err != nil {
		t.Fatal(err)
	}
	detect := time.Since(killed)
	if err := <-inflight; err != nil {
		t.Fatalf("request in flight to the killed owner: %v", err)
	}
	answered := time.Since(killed)
	for _, id := range owners[victim] {
		if r := hit(id); r.Node == victim {
			t.Fatalf("%s still answered by killed %s", id, victim)
		}
	}
	t.Logf("SIGKILL of %s: edge dropped it after %v; a request sent right after the kill was answered after %v", victim, detect, answered)
	if detect > 5*time.Second {
		t.Errorf("failure detection took %v, want about 2 s", detect)
	}

	// Restart it: a new actor system id under the same name and ports.
	noRaces(vp)
	restarted := time.Now()
	if err := vp.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := clustertest.WaitMembers(ctx, 4, edge); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s restarted and visible to the edge after %v", victim, time.Since(restarted))
	back := 0
	for _, id := range owners[victim] {
		if r := hit(id); r.Node == victim {
			back++
		}
	}
	if back == 0 {
		t.Fatalf("no identity went back to restarted %s", victim)
	}

	// Graceful stop of p0 (the seed): the edge sees it leave without waiting
	// for failure detection.
	stopped := time.Now()
	if err := ps.List[0].Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := clustertest.WaitMembers(ctx, 3, edge); err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGTERM of p0: process exited and edge dropped it after %v", time.Since(stopped))
	for i := 0; i < 30; i++ {
		hit(fmt.Sprintf("proc-%d", i))
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
