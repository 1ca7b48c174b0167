package actors

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"filigrane/actors/jobstate"
	"filigrane/actors/mediakind"
)

// WorkMetrics counts a node's codec work per work class (mediakind.Class): jobs waiting in the node's queue
// and how long they waited there, attempts running, attempts that completed or failed, and how long attempts
// took. Every series carries the node's name, so that a dashboard over several nodes shows where work ran.
type WorkMetrics struct {
	queued, running   *prometheus.GaugeVec
	completed, failed *prometheus.CounterVec
	seconds, wait     *prometheus.HistogramVec
	node              string
}

// NewWorkMetrics registers the work collectors of node in reg.
func NewWorkMetrics(reg prometheus.Registerer, node string) *WorkMetrics {
	l := []string{"node", "class"}
	m := &WorkMetrics{node: node,
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "filigrane_work_queued",
			Help: "Jobs dispatched to this node's workers and not yet taken, by work class."}, l),
		running: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "filigrane_work_running",
			Help: "Attempts running on this node, by work class."}, l),
		completed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "filigrane_work_completed_total",
			Help: "Attempts this node ran to a reported success, by work class."}, l),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "filigrane_work_failed_total",
			Help: "Attempts this node reported as failed (retryable or not), by work class."}, l),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "filigrane_work_seconds",
			Help:    "Duration of the attempts this node ran (processing and reporting), by work class.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 1800, 5400}}, l),
		// The queue's share of a request's latency: a node short of workers shows here first, while the
		// attempts' own durations stay the same.
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "filigrane_work_queue_wait_seconds",
			Help:    "Time jobs waited in this node's queue until a worker took them, by work class (a job moved to another node's queue is not counted).",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60, 300, 900}}, l),
	}
	for _, c := range mediakind.Classes() {
		m.queued.WithLabelValues(node, string(c))
		m.running.WithLabelValues(node, string(c))
		m.completed.WithLabelValues(node, string(c))
		m.failed.WithLabelValues(node, string(c))
	}
	reg.MustRegister(m.queued, m.running, m.completed, m.failed, m.seconds, m.wait)
	return m
}

// classOf is the work class a job's attempt counts under: the kind's CPU class (no GPU codec path runs yet).
func classOf(media jobstate.Media, acc jobstate.Accelerator) string {
	cs := mediakind.ClassesFor(media, acc)
	return string(cs[len(cs)-1])
}

func (m *WorkMetrics) queue(class string, delta float64) {
	if m != nil {
		m.queued.WithLabelValues(m.node, class).Add(delta)
	}
}

// taken counts a job a worker took from the queue after waiting d there.
func (m *WorkMetrics) taken(class string, d time.Duration) {
	if m != nil {
		m.queued.WithLabelValues(m.node, class).Dec()
		m.wait.WithLabelValues(m.node, class).Observe(d.Seconds())
	}
}

func (m *WorkMetrics) start(class string) {
	if m != nil {
		m.running.WithLabelValues(m.node, class).Inc()
	}
}

// end closes an attempt started with start; reported is false when it ended without a report (the lease was
// lost or the node stopped), which counts as neither completed nor failed.
func (m *WorkMetrics) end(class string, reported, ok bool, d time.Duration) {
	if m == nil {
		return
	}
	m.running.WithLabelValues(m.node, class).Dec()
	if !reported {
		return
	}
	if ok {
		m.completed.WithLabelValues(m.node, class).Inc()
	} else {
		m.failed.WithLabelValues(m.node, class).Inc()
	}
	m.seconds.WithLabelValues(m.node, class).Observe(d.Seconds())
}
