package node_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"filigrane/cluster/clustertest"
)

// rssMiB is the resident memory of process pid in MiB, from /proc (0 where it cannot be read).
func rssMiB(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// TestTwelveNodes: twelve light processes (one cpu worker each) on 127.0.0.1 sharing one versitygw bucket, with
// the quick failure detection. Membership converges (every node sees twelve members); 16 async embeds submitted
// through n0 spread over at least 9 nodes (placement by free slots, job actors spread by the cluster's hash);
// a node killed with SIGKILL while it runs an attempt is dropped by all eleven others within the detection
// budget, and every job still succeeds, charged exactly once, nothing left held: the cut attempt is taken over
// by another node (its receipt shows both) and the job actors the dead node hosted are activated elsewhere.
//
// The attempts are held at their input's read (the gated bucket) until the victim is killed and dropped, so a
// node is certain to be running one when it dies and the jobs spread because each node's one slot stays taken,
// not because a large image keeps it busy: the images are 320x320 (at 1600x1200 the 16 embeds were about two
// thirds of the test's 12 CPU-seconds).
func TestTwelveNodes(t *testing.T) {
	const n = 12
	qd := clustertest.QuickDetection()
	extra := make([][]string, n)
	for i := range extra {
		// quickRecovery: the killed node's attempt is taken over once its 6 s lease lapses, not 30 s.
		extra[i] = append(detectionArgs(qd), quickRecovery...)
	}
	c := startGatedPlaceCluster(t, extra)
	var rest float64
	for _, p := range c.procs.List {
		rest += rssMiB(p.Pid())
	}
	t.Logf("%d nodes started and every one saw all %d members %v after the first was spawned; resident memory at rest %.0f MiB a node",
		n, n, c.converged.Round(time.Millisecond), rest/n)

	const jobs = 16 // the business plan's concurrency: more at once would be refused (429), not placed
	submitted := make(chan []string, 1)
	go func() { submitted <- submitAsync(t, c.base(0), c.secret, jobs, 320, 320) }()
	victim := -1
	deadline := time.Now().Add(2 * time.Minute)
	for victim < 0 {
		for i := n - 1; i >= 1 && victim < 0; i-- {
			if metricSum(c.base(i), "filigrane_work_running", fmt.Sprintf(`node="n%d"`, i)) >= 1 {
				victim = i
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no node but n0 ran an attempt")
		}
		time.Sleep(20 * time.Millisecond) // polling the metrics endpoints
	}
	if err := c.procs.List[victim].Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	killedName := fmt.Sprintf("n%d", victim)
	f := &clusterFixture{procs: c.procs, fd: qd}
	for i := 0; i < n; i++ {
		if i != victim {
			f.waitMembers(t, i, n-1)
		}
	}
	dropped := time.Since(killed)
	if budget := clustertest.DetectionBudget(qd, n); dropped > budget {
		t.Fatalf("the survivors dropped %s after %v, budget %v", killedName, dropped, budget)
	}
	// Every job is submitted before any attempt may read its input, so that all 16 are placed while every
	// slot that took one stays taken: released earlier, the last few ran on whichever nodes had just finished
	// (the submissions whose job actors were on the victim wait out its detection).
	ids := <-submitted
	if len(ids) != jobs {
		t.Fatalf("%d of %d jobs submitted", len(ids), jobs)
	}
	c.inputs.release()
	done := awaitJobs(t, c.base(0), c.secret, ids, 3*time.Minute)
	ranOn := map[string]int{}
	takenOver := 0
	var total int64
	for id, rc := range done {
		if rc.Status != "succeeded" {
			t.Fatalf("job %s: %s (%v), attempts on %v", id, rc.Status, rc.ErrorCode, rc.AttemptNodes)
		}
		total += rc.Credits
		for _, a := range rc.AttemptNodes {
			ranOn[a]++
		}
		if rc.Node == killedName {
			t.Fatalf("job %s succeeded on the killed node %s", id, killedName)
		}
		if len(rc.AttemptNodes) > 1 && rc.AttemptNodes[len(rc.AttemptNodes)-2] == killedName {
			takenOver++
		}
	}
	if len(ranOn) < 9 {
		t.Fatalf("attempts ran on only %d of %d nodes: %v", len(ranOn), n, ranOn)
	}
	if takenOver == 0 {
		t.Fatalf("no job shows an attempt on %s taken over by another node; attempts %v", killedName, ranOn)
	}
	chargedEach(t, c.admin, c.orgID, ids, total)
	t.Logf("attempts per node %v; %s killed mid-attempt, dropped by the 11 others in %v (budget %v), %d attempt(s) taken over, all %d jobs done %v after the kill",
		ranOn, killedName, dropped.Round(time.Millisecond), clustertest.DetectionBudget(qd, n), takenOver, jobs,
		time.Since(killed).Round(time.Millisecond))
}
