package node_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"filigrane/cluster"
	"filigrane/cluster/clustertest"
)

// detectionArgs are the serve flags of failure detection fd.
func detectionArgs(fd cluster.FailureDetection) []string {
	return []string{"--cluster-probe-interval", fd.ProbeInterval.String(), "--cluster-probe-timeout",
		fd.ProbeTimeout.String(), "--cluster-suspicion-mult", strconv.Itoa(fd.SuspicionMult)}
}

// TestSlowNodeGetsLessWork: three processes with one cpu worker each; n2 is starved of CPU (stopped 90% of
// the time with SIGSTOP, in 900 ms slices) while 15 async embeds of 640x480 images are submitted at once
// through n0 (one after the other, small jobs would mostly run on n0, free again before the next came).
// Work is pulled by free slots, so n2, which frees its slot five times more slowly, runs fewer attempts than
// each of the two healthy nodes, and its waiting jobs move to them: the receipts' attempt nodes and each
// node's per-node work metrics say so. Every job still succeeds, once.
func TestSlowNodeGetsLessWork(t *testing.T) {
	fd := detectionArgs(clustertest.StableDetection()) // a 400 ms pause must not look like a death
	c := startPlaceCluster(t, [][]string{fd, fd, fd})
	const jobs = 15
	// n2 gets a tenth of a core, in 100 ms slices. (With a fifth, 400 ms stopped, an idle machine ran one of
	// these small jobs in each of n2's slices, so n2 finished its even share of the queued jobs, 5, before
	// its once-a-second rebalancing saw the others free: 2 runs in 7 failed that way.)
	end := c.procs.List[2].Starve(900*time.Millisecond, 100*time.Millisecond)
	t.Cleanup(func() { end() })
	ids := submitAsyncAtOnce(t, c.base(0), c.secret, jobs, 640, 480)
	if len(ids) != jobs {
		t.Fatalf("%d of %d jobs submitted", len(ids), jobs)
	}
	done := awaitJobs(t, c.base(0), c.secret, ids, 4*time.Minute)
	if err := end(); err != nil {
		t.Fatal(err)
	}
	attempts := map[string]int{}
	ran := map[string]int{}
	for id, rc := range done {
		if rc.Status != "succeeded" {
			t.Fatalf("job %s: %s (%v), attempts on %v", id, rc.Status, rc.ErrorCode, rc.AttemptNodes)
		}
		for _, n := range rc.AttemptNodes {
			attempts[n]++
		}
		ran[rc.Node]++
	}
	metrics := map[string]float64{}
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("n%d", i)
		metrics[name] = settledMetricSum(c.base(i), "filigrane_work_completed_total",
			func(v float64) bool { return int(v) == attempts[name] }, `node="`+name+`"`)
		if int(metrics[name]) != attempts[name] {
			t.Errorf("%s: metrics count %v completed attempts, receipts %d", name, metrics[name], attempts[name])
		}
	}
	t.Logf("jobs ran on %v; attempts %v; per-node completed attempts %v", ran, attempts, metrics)
	if attempts["n2"] >= attempts["n0"] || attempts["n2"] >= attempts["n1"] {
		t.Fatalf("the starved n2 ran %d attempts, the healthy n0 %d and n1 %d", attempts["n2"], attempts["n0"], attempts["n1"])
	}
}
