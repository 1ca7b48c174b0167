package clustertest

import (
	"time"

	"filigrane/cluster"
)

// LoadSlack is the delay a loaded machine may add to anything a test waits
// for: on 2 shared cores under the race detector a runnable goroutine can
// wait seconds for a CPU. A test bound is what the configuration under test
// promises plus LoadSlack, never a guess of how fast the machine is; where a
// bound must tell "honoured its deadline" from "ignored it", the wait that
// ignoring it would cause must be well above the deadline plus LoadSlack.
const LoadSlack = 10 * time.Second

// StableDetection is the failure detection of test clusters whose nodes must
// all stay alive: a probe waits 2 s for its answer and a suspected node has
// 6 × 5 s to refute the suspicion. With the production timings
// (cluster.DefaultFailureDetection: 250 ms, then 1 s) a test process starved
// of CPU for a second declares its own live nodes dead, and protoactor then
// blocks them for good; with 1 s and 5 × 2 s it still happened once in 5 runs
// with 8 busy loops beside the test on 2 cores. These clusters need no death
// noticed, so tolerance costs nothing. Tests that need a death noticed use
// QuickDetection on the nodes concerned, for as short a time as they can,
// and bound their waits with DetectionBudget.
func StableDetection() cluster.FailureDetection {
	return cluster.FailureDetection{
		ProbeInterval:  5 * time.Second,
		ProbeTimeout:   2 * time.Second,
		SuspicionMult:  6,
		GossipInterval: 100 * time.Millisecond,
	}
}

// QuickDetection is the failure detection of test clusters that must notice
// a crash, with timings that kept live nodes alive on a loaded machine (2
// cores, the race detector, 4 busy loops, a load average near 20): a probe
// waits 500 ms and a suspected node has 4 s to refute. In a cluster of 3 it
// detects a crash in at most 6.1 s by the timings (measured 5.7-7.2 s under
// that load). With the production timings (detection in about 2 s, a
// suspected node refuting within 1 s) nodes of the same starved test process
// declared each other dead within seconds of forming the cluster.
func QuickDetection() cluster.FailureDetection {
	return cluster.FailureDetection{
		ProbeInterval:  time.Second,
		ProbeTimeout:   500 * time.Millisecond,
		SuspicionMult:  4,
		GossipInterval: 100 * time.Millisecond,
	}
}

// DetectionBudget is the longest a test waits for a crashed member to be
// declared dead: cluster.FailureDetection.DetectionTime plus LoadSlack (a loaded machine runs the
// timers late, and memberlist's Lifeguard stretches the probe timeouts of a
// node that sees itself degraded).
func DetectionBudget(fd cluster.FailureDetection, members int) time.Duration {
	return fd.DetectionTime(members) + LoadSlack
}
