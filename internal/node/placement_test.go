package node_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"filigrane/actors"
	"filigrane/cluster/clustertest"
	"filigrane/internal/admin"
	"filigrane/internal/node"
	"filigrane/persistence/s3test"
)

// placeCluster is filigrane processes on 127.0.0.1 sharing a versitygw bucket, each with its own extra
// arguments (roles, drain timeout), for the placement tests.
type placeCluster struct {
	procs  *clustertest.Processes
	s3     *node.S3Config
	orgID  string
	secret string
	// converged is how long from starting the processes until every node saw all of them as members.
	converged time.Duration
	// inputs, in a cluster started by startGatedPlaceCluster, holds every node's reads of job inputs until
	// released.
	inputs *gatedS3
}

func (c *placeCluster) base(i int) string {
	return "http://127.0.0.1:" + strconv.Itoa(c.procs.List[i].Ports[0])
}

// tails is the last n log lines of every node, for failure messages.
func (c *placeCluster) tails(n int) string {
	var b strings.Builder
	for i, p := range c.procs.List {
		fmt.Fprintf(&b, "n%d:\n%s\n", i, p.Tail(n))
	}
	return b.String()
}

func (c *placeCluster) admin(t *testing.T, fn func(admin.Admin)) {
	t.Helper()
	(&clusterFixture{s3: c.s3}).admin(t, fn)
}

// startPlaceCluster starts len(extra) nodes named n0, n1, ... with one cpu worker each, plus extra[i].
func startPlaceCluster(t *testing.T, extra [][]string) *placeCluster {
	t.Helper()
	return startPlaceClusterGated(t, extra, false)
}

// startGatedPlaceCluster is startPlaceCluster with the nodes reaching the bucket through c.inputs, which
// holds the workers' reads of job inputs (whole-object GETs of blobs/inputs/) until the test releases it: an
// attempt that started stays running, with no CPU spent, for as long as the test needs it to (a backlog
// while a node joins, work running when a node gets SIGTERM) instead of for as long as a large image takes
// to mark.
func startGatedPlaceCluster(t *testing.T, extra [][]string) *placeCluster {
	t.Helper()
	return startPlaceClusterGated(t, extra, true)
}

func startPlaceClusterGated(t *testing.T, extra [][]string, gated bool) *placeCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	bin := buildBinary(t)
	srv := s3test.Start(t)
	c := &placeCluster{s3: s3Config(t, srv)}
	endpoint := c.s3.Endpoint
	if gated {
		c.inputs = newGatedS3Reads(t, srv.Endpoint, "/blobs/inputs/")
		endpoint = c.inputs.url
	}
	c.admin(t, func(a admin.Admin) {
		ctx := context.Background()
		st, err := a.CreateOrg(ctx, "Acme", "business", 1000)
		if err != nil {
			t.Fatal(err)
		}
		m, err := a.AddMember(ctx, st.ID, "ops", actors.RoleOwner)
		if err != nil {
			t.Fatal(err)
		}
		c.secret, _, err = a.CreateKey(ctx, actors.NewKeySpec{OrgID: st.ID, MemberID: m, Scopes: actors.AllScopes()})
		if err != nil {
			t.Fatal(err)
		}
		c.orgID = st.ID
	})
	n := len(extra)
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	spawned := time.Now()
	procs, err := clustertest.StartProcesses(ctx, clustertest.ProcessConfig{
		Binary: bin, N: n, Ports: 4,
		Args: func(i int, ports [][]int) []string {
			p := ports[i]
			args := []string{"serve", "--data", dirs[i], "--node-name", fmt.Sprintf("n%d", i),
				"--listen", fmt.Sprintf("127.0.0.1:%d", p[0]), "--upload-listen", fmt.Sprintf("127.0.0.1:%d", p[1]),
				"--cluster-bind", fmt.Sprintf("127.0.0.1:%d", p[2]), "--remote-port", strconv.Itoa(p[3]),
				"--workers", "1", "--log-format", "json", "--log-level", "warn",
				"--drain-delay", "0"} // no balancer probes them: a SIGTERM closes the listeners at once
			args = append(append(args, s3Flags(endpoint, c.s3)...), "--join", clustertest.SeedList(ports, 2))
			return append(args, extra[i]...)
		},
		Ready: clustertest.ReadyHTTP(0, "/healthz"),
	})
	if err != nil {
		t.Fatal(err)
	}
	c.procs = procs
	t.Cleanup(procs.KillAll)
	t.Cleanup(func() {
		// The nodes log at warn: on a failure their last lines say what a 503 or a lost job cannot.
		if t.Failed() {
			for i, p := range procs.List {
				t.Logf("n%d's last log lines:\n%s", i, p.Tail(30))
			}
		}
	})
	f := &clusterFixture{procs: procs}
	for i := 0; i < n; i++ {
		f.waitMembers(t, i, n)
	}
	c.converged = time.Since(spawned)
	return c
}

// metricSum adds up a node's samples of metric whose labels contain every one of labels (e.g. `node="n1"`);
// -1 when the node does not answer.
func metricSum(base, metric string, labels ...string) float64 {
	res, err := http.Get(base + "/metrics")
	if err != nil {
		return -1
	}
	defer res.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, metric+"{")
		if !ok {
			continue
		}
		lbl, val, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		match := true
		for _, l := range labels {
			match = match && strings.Contains(lbl, l)
		}
		if v, err := strconv.ParseFloat(val, 64); err == nil && match {
			sum += v
		}
	}
	return sum
}

// settledMetricSum is metricSum once every node has counted the attempts whose outcomes the client already
// saw: a worker counts an attempt when the job actor has answered its report, which can come just after
// the job's status shows the outcome. It reads the metric again until want(sum) holds or 30 s pass, and
// returns the last sum.
func settledMetricSum(base, metric string, want func(float64) bool, labels ...string) float64 {
	deadline := time.Now().Add(30 * time.Second)
	for {
		v := metricSum(base, metric, labels...)
		if want(v) || time.Now().After(deadline) {
			return v
		}
		time.Sleep(20 * time.Millisecond) // polling the metrics endpoint
	}
}

// submitAsync submits n async embeds of one w×h photo (each with its own data, so each is its own job)
// through base and returns their request ids.
func submitAsync(t *testing.T, base, secret string, n, w, h int) []string {
	t.Helper()
	img := photo(t, w, h, 100)
	var ids []string
	for i := 0; i < n; i++ {
		r := post(t, base+"/watermarks/images/async", secret, "", img, fmt.Sprintf(`{"i":%d}`, i))
		if r.status != 202 {
			t.Errorf("async embed %d: %d %s", i, r.status, r.body)
			return ids
		}
		ids = append(ids, decodeReceipt(t, r).RequestID)
	}
	return ids
}

// submitAsyncAtOnce is submitAsync with the n requests sent at the same time, so that the jobs are placed by
// the nodes' free slots rather than by how fast one node ends an attempt between two submissions. It returns
// the request ids in no particular order.
func submitAsyncAtOnce(t *testing.T, base, secret string, n, w, h int) []string {
	t.Helper()
	img := photo(t, w, h, 100)
	answers := make(chan response, n)
	for i := 0; i < n; i++ {
		go func() {
			answers <- post(t, base+"/watermarks/images/async", secret, "", img, fmt.Sprintf(`{"i":%d}`, i))
		}()
	}
	var ids []string
	for i := 0; i < n; i++ {
		r := <-answers
		if r.status != 202 {
			t.Errorf("async embed: %d %s", r.status, r.body)
			continue
		}
		ids = append(ids, decodeReceipt(t, r).RequestID)
	}
	return ids
}

// awaitJobs polls the jobs through base until every one has ended, and returns their receipts. It polls one
// job at a time, the next once that one has ended: 10 requests a second whatever the number of jobs. (Polling
// every pending job each 100 ms was 150 requests a second for 15 jobs, all on base's node, which then ran fewer
// attempts than the other healthy node and sometimes fewer than the CPU-starved one in TestSlowNodeGetsLessWork.)
func awaitJobs(t *testing.T, base, secret string, ids []string, within time.Duration) map[string]receipt {
	t.Helper()
	deadline := time.Now().Add(within)
	done := map[string]receipt{}
	for _, id := range ids {
		for {
			r := call(t, "GET", base+"/watermarks/jobs/"+id, secret, nil)
			// Not 200: a member that just left may still be routed to for a moment.
			if r.status == 200 {
				if rc := decodeReceipt(t, r); rc.Status == "succeeded" || rc.Status == "failed" {
					done[id] = rc
					break
				}
			}
			if time.Now().After(deadline) {
				for _, id := range ids {
					if _, ok := done[id]; !ok {
						r := call(t, "GET", base+"/watermarks/jobs/"+id, secret, nil)
						t.Logf("pending: %d %s", r.status, r.body)
					}
				}
				t.Fatalf("%d of %d jobs ended within %v", len(done), len(ids), within)
			}
			time.Sleep(100 * time.Millisecond) // polling an HTTP API: there is nothing to wait on
		}
	}
	return done
}

// TestPlacementByRolesAndJoin: three processes, n0 with `--roles api` (serves HTTP, hosts actors, runs no
// codec work). With n2 stopped, jobs submitted through n0 (their job actors on n0 and n1) wait for n1's one
// worker, whose attempt is held at its input's read (the gated bucket) so that the backlog lasts; n2 then
// rejoins and runs an attempt within 5 s of being ready (it advertises free slots, and the waiting work
// moves to it without waiting for the sweeper). Every job succeeds on n1 or n2: the job's node and attempt
// nodes never name n0, n0's per-node work metrics stay at zero, n1's and n2's count every attempt.
func TestPlacementByRolesAndJoin(t *testing.T) {
	t.Parallel()
	// Every node must stay alive (n2 leaves by a graceful stop): the production failure detection declared the
	// rejoined n2 dead within seconds on a starved machine (load ~20 on 2 cores), and it never took work.
	stable := detectionArgs(clustertest.StableDetection())
	c := startGatedPlaceCluster(t, [][]string{append([]string{"--roles", "api"}, stable...), stable, stable})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.procs.List[2].Stop(ctx); err != nil {
		t.Fatal(err)
	}
	const jobs = 10
	ids := submitAsync(t, c.base(0), c.secret, jobs, 320, 320)
	if len(ids) != jobs {
		t.Fatalf("%d of %d jobs submitted", len(ids), jobs)
	}
	if q := metricSum(c.base(1), "filigrane_work_queued"); q < 2 {
		t.Fatalf("only %v jobs waiting on n1: no backlog for the joining node to take", q)
	}
	if err := c.procs.List[2].Restart(ctx); err != nil {
		t.Fatal(err)
	}
	ready := time.Now()
	for {
		busy := metricSum(c.base(2), "filigrane_work_running", `node="n2"`) +
			metricSum(c.base(2), "filigrane_work_completed_total", `node="n2"`)
		if busy >= 1 {
			break
		}
		if time.Since(ready) > 5*time.Second {
			t.Fatalf("n2 took no work within 5 s of joining\n%s", c.procs.List[2].Tail(20))
		}
		time.Sleep(20 * time.Millisecond) // polling the metrics endpoint
	}
	took := time.Since(ready)
	c.inputs.release()
	done := awaitJobs(t, c.base(0), c.secret, ids, 4*time.Minute)
	ran := map[string]int{}
	for id, rc := range done {
		if rc.Status != "succeeded" {
			t.Fatalf("job %s: %s\n%s", id, rc.raw, c.tails(20))
		}
		if rc.Node != "n1" && rc.Node != "n2" || slices.Contains(rc.AttemptNodes, "n0") {
			t.Fatalf("job %s ran on %q (attempts on %v); n0 runs no cpu work", id, rc.Node, rc.AttemptNodes)
		}
		ran[rc.Node]++
	}
	if n := metricSum(c.base(0), "filigrane_work_completed_total", `node="n0"`); n != 0 {
		t.Fatalf("n0 reports %v completed attempts", n)
	}
	n1 := settledMetricSum(c.base(1), "filigrane_work_completed_total", func(v float64) bool { return int(v) >= ran["n1"] },
		`node="n1"`, `class="cpu"`)
	n2 := settledMetricSum(c.base(2), "filigrane_work_completed_total", func(v float64) bool { return int(v) >= ran["n2"] },
		`node="n2"`, `class="cpu"`)
	if int(n1) < ran["n1"] || int(n2) < ran["n2"] || ran["n2"] == 0 || n1+n2 < jobs {
		t.Fatalf("completed attempts: n1 %v, n2 %v; jobs ran %v", n1, n2, ran)
	}
	t.Logf("n2 ran its first attempt %v after it was ready; jobs ran %v; n0 hosted %v job actors",
		took.Round(time.Millisecond), ran, metricSum(c.base(0), "filigrane_actors_active", `kind="job"`))
}

// TestDrainOnSIGTERM: three processes, work submitted through n0, every attempt held at its input's read
// (the gated bucket) until n1 and n2 are draining. n1 (drain timeout 60 s) gets SIGTERM while it runs an
// attempt and lets it finish; n2 (drain timeout 1 ms) gets SIGTERM while it runs one and hands it back.
// Both exit cleanly; every job succeeds; the handed-back job ran again elsewhere without the hand-back
// counting as an attempt; every job is charged exactly once and nothing stays held.
func TestDrainOnSIGTERM(t *testing.T) {
	t.Parallel()
	stable := detectionArgs(clustertest.StableDetection()) // no death to notice: SIGTERM leaves the cluster
	c := startGatedPlaceCluster(t, [][]string{stable, append([]string{"--drain-timeout", "60s", "--log-level", "info"}, stable...),
		append([]string{"--drain-timeout", "1ms", "--log-level", "info"}, stable...)})
	submitted := make(chan []string, 1)
	go func() { submitted <- submitAsync(t, c.base(0), c.secret, 12, 320, 320) }()
	stopWhenRunning := func(i int) chan error {
		name := fmt.Sprintf(`node="n%d"`, i)
		deadline := time.Now().Add(2 * time.Minute)
		for metricSum(c.base(i), "filigrane_work_running", name) < 1 {
			if time.Now().After(deadline) {
				t.Errorf("n%d never ran an attempt", i)
				break
			}
			time.Sleep(20 * time.Millisecond) // polling the metrics endpoint
		}
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			done <- c.procs.List[i].Stop(ctx)
		}()
		return done
	}
	stop2 := stopWhenRunning(2)
	stop1 := stopWhenRunning(1)
	// n1's attempt finishes once n1 is draining with it running.
	deadline := time.Now().Add(time.Minute)
	for !drainingWithWork(c.procs.List[1].Tail(200)) {
		if time.Now().After(deadline) {
			t.Fatalf("n1 did not start draining with its attempt running:\n%s", c.procs.List[1].Tail(30))
		}
		time.Sleep(20 * time.Millisecond) // polling the process's log
	}
	c.inputs.release()
	for i, ch := range map[int]chan error{1: stop1, 2: stop2} {
		if err := <-ch; err != nil {
			t.Fatalf("n%d: %v\n%s", i, err, c.procs.List[i].Tail(30))
		}
	}
	if tail := c.procs.List[1].Tail(200); !regexp.MustCompile(`drained: no work running`).MatchString(tail) {
		t.Fatalf("n1 did not let its work finish:\n%s", tail)
	}
	if tail := c.procs.List[2].Tail(200); !regexp.MustCompile(`handed back a job cut short by the drain`).MatchString(tail) {
		t.Fatalf("n2 handed nothing back:\n%s", tail)
	}
	ids := <-submitted
	if len(ids) != 12 {
		t.Fatalf("%d of 12 jobs submitted", len(ids))
	}
	jobs := awaitJobs(t, c.base(0), c.secret, ids, 4*time.Minute)
	handedBack := 0
	var total int64
	for id, rc := range jobs {
		if rc.Status != "succeeded" {
			t.Fatalf("job %s: %s\n%s", id, rc.raw, c.tails(20))
		}
		total += rc.Credits
		if i := slices.Index(rc.AttemptNodes, "n2"); i >= 0 && i < len(rc.AttemptNodes)-1 {
			handedBack++
			if rc.Attempts != len(rc.AttemptNodes)-1 {
				t.Fatalf("job %s: %d attempts counted for attempt nodes %v (the hand-back must not count)",
					id, rc.Attempts, rc.AttemptNodes)
			}
		}
	}
	if handedBack == 0 {
		t.Fatal("no job shows the attempt n2 handed back")
	}
	chargedEach(t, c.admin, c.orgID, ids, total)
	t.Logf("%d jobs succeeded; %d handed back by n2", len(jobs), handedBack)
}

// drainingWithWork reports whether a node's JSON log (info level) shows that it began draining with at least
// one attempt running.
func drainingWithWork(log string) bool {
	for _, line := range strings.Split(log, "\n") {
		var e struct {
			Message string `json:"message"`
			Running int    `json:"running"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Message == "draining: taking no more work" && e.Running >= 1 {
			return true
		}
	}
	return false
}

// TestPlacementAvoidsLowDisk: two processes, n0 started below its --min-free-disk reserve (twice the free
// space of the temporary directory's filesystem: files refused, records still written) and n1 with room, one
// cpu worker each. n0 says so on /readyz (200, disk low) and gossips it from its join; jobs submitted through
// n0 at once, whose job actors live on both nodes, all run on n1, queued there when its one worker is busy,
// rather than on n0's free slot. Before, n0's free slot took the jobs placed from n0 (and from n1 once its
// worker was busy).
func TestPlacementAvoidsLowDisk(t *testing.T) {
	t.Parallel()
	var st syscall.Statfs_t
	if err := syscall.Statfs(os.TempDir(), &st); err != nil {
		t.Fatal(err)
	}
	reserve := strconv.FormatUint(2*st.Bavail*uint64(st.Bsize), 10)
	stable := detectionArgs(clustertest.StableDetection()) // both nodes stay alive
	c := startPlaceCluster(t, [][]string{append([]string{"--min-free-disk", reserve}, stable...), stable})
	if r := getReady(t, c.base(0)+"/readyz"); r.status != 200 || !strings.HasPrefix(r.checks["disk"], "low:") {
		t.Fatalf("n0's /readyz below its reserve: %+v, want 200 with the disk check low", r)
	}
	const jobs = 4
	ids := submitAsyncAtOnce(t, c.base(0), c.secret, jobs, 320, 256)
	if len(ids) != jobs {
		t.Fatalf("%d of %d jobs submitted", len(ids), jobs)
	}
	for id, rc := range awaitJobs(t, c.base(0), c.secret, ids, 2*time.Minute) {
		if rc.Status != "succeeded" || rc.Node != "n1" || slices.Contains(rc.AttemptNodes, "n0") {
			t.Fatalf("job %s: %s; want succeeded on n1 alone (n0 is low on disk)\n%s", id, rc.raw, c.tails(20))
		}
	}
	t.Logf("n0 hosted %v of the %d job actors", metricSum(c.base(0), "filigrane_actors_active", `kind="job"`), jobs)
}
