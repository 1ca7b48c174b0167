package node_test

import (
	"slices"
	"testing"
	"time"
)

// TestKilledWorkersAttemptRetriesBeforeItsLease: three nodes whose workers hold a job for 10 minutes between
// renewals' deadlines (--job-lease 10m). An attempt running on n2 (held at its input's read by the gated
// bucket) when n2 is killed (-9) is retried on another node once the cluster has dropped n2's member (the
// sweeper's next tick asks each running job whether its worker's member left), not when the lease runs out:
// every job succeeds within 2 minutes, the one n2 ran shows n2 then another node among its attempt nodes, and
// every job is charged once.
func TestKilledWorkersAttemptRetriesBeforeItsLease(t *testing.T) {
	t.Parallel()
	lease := []string{"--job-lease", "10m"}
	c := startGatedPlaceCluster(t, [][]string{lease, lease, lease})
	ids := submitAsync(t, c.base(0), c.secret, 6, 320, 320)
	if len(ids) != 6 {
		t.Fatalf("%d of 6 jobs submitted", len(ids))
	}
	deadline := time.Now().Add(time.Minute)
	for metricSum(c.base(2), "filigrane_work_running", `node="n2"`) < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("n2 never ran an attempt:\n%s", c.tails(20))
		}
		time.Sleep(20 * time.Millisecond) // polling the metrics endpoint
	}
	killed := time.Now()
	if err := c.procs.List[2].Kill(); err != nil {
		t.Fatal(err)
	}
	c.inputs.release()
	jobs := awaitJobs(t, c.base(0), c.secret, ids, 2*time.Minute)
	var total int64
	retried := 0
	for id, rc := range jobs {
		if rc.Status != "succeeded" {
			t.Fatalf("job %s: %s\n%s", id, rc.raw, c.tails(20))
		}
		total += rc.Credits
		if i := slices.Index(rc.AttemptNodes, "n2"); i >= 0 && i < len(rc.AttemptNodes)-1 {
			retried++
		}
	}
	if retried == 0 {
		t.Fatalf("no job shows an attempt on n2 followed by another: %+v", jobs)
	}
	chargedEach(t, c.admin, c.orgID, ids, total)
	t.Logf("every job ended %v after n2 was killed; %d retried after n2's attempt (lease 10 minutes)",
		time.Since(killed).Round(time.Second), retried)
}
