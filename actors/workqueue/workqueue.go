// Package workqueue orders the jobs that wait for a node's workers of one work class: fairly between
// organizations, and within one organization its synchronous requests (a client waits for the answer) ahead
// of its asynchronous and batch work, that work still getting at least one turn in AsyncEvery.
//
// Between organizations it is start-time fair queuing with a unit cost per job: each job gets a start tag,
// the org's previous job's tag plus one, or the queue's virtual time (the tag of the job taken last) when the
// org had nothing waiting; Pop takes the smallest tag. So an organization with a backlog of any length takes
// one turn in k when k organizations wait, an organization that arrives waits for at most one job of each
// other organization, and one that empties its queue and refills it at once gains no turn by it. Within an
// organization, each of its two lines (sync, async) keeps the jobs in the order they were created (then
// queued): a job queued again (the sweeper's tick after a restart, a job moved from another node, a retry)
// takes its place by age, not at the end. A synchronous job stays one after its client's wait ran out (the
// queue has no clock): it goes on taking its organization's sync turns, bounded by AsyncEvery.
//
// It owns only that order, in memory: no locking (the caller's pool holds its own lock), no clock, no I/O.
// It must not decide which node runs a job (actors/placement) or bound an organization's concurrency (the
// org actor does, before a job is ever queued).
package workqueue

import (
	"cmp"
	"slices"
	"time"
)

// AsyncEvery bounds how long an organization's asynchronous work waits behind its synchronous requests:
// among the organization's turns, at least one in AsyncEvery goes to its oldest asynchronous job while it has
// one, however many synchronous requests wait.
const AsyncEvery = 4

// Job is a job waiting for a worker.
type Job struct {
	ID  string
	Org string
	// Sync says a client waits for this job's outcome (a synchronous request); batch items and async
	// requests are not.
	Sync bool
	// Created is when the job was accepted: the order within its organization's line. Zero: when queued.
	Created time.Time
	// Class and Queued are carried for the caller (the work class it counts under, when this node queued it).
	Class  string
	Queued time.Time
}

// Result is what Push did.
type Result int

const (
	// Queued: the job waits in the queue now.
	Queued Result = iota
	// Already: a job with that id waits already; nothing changed.
	Already
	// Full: the queue holds its maximum; the job was not queued.
	Full
)

// Queue is the jobs waiting for one pool's workers. The zero value is not usable: call New.
type Queue struct {
	max    int
	orgs   map[string]*line // organizations with jobs waiting
	idle   map[string]int64 // finish tag of organizations whose line emptied, while it is ahead of vtime
	ids    map[string]bool
	n      int
	vtime  int64 // start tag of the job taken last
	serial uint64
}

// line is one organization's waiting jobs.
type line struct {
	sync, async []entry
	// start is the start tag of the job the organization's next turn takes.
	start int64
	// syncRun counts the turns in a row that took a synchronous job while an asynchronous one waited.
	syncRun int
}

type entry struct {
	job    Job
	serial uint64 // arrival, to break ties between equal creation times
}

// New returns an empty queue that holds at most limit jobs (at least 1).
func New(limit int) *Queue {
	return &Queue{max: max(1, limit), orgs: map[string]*line{}, idle: map[string]int64{}, ids: map[string]bool{}}
}

// Len is the number of jobs waiting.
func (q *Queue) Len() int { return q.n }

// Has reports whether a job with id waits.
func (q *Queue) Has(id string) bool { return q.ids[id] }

// Push queues j in its organization's line (sync or async), ordered by creation time.
func (q *Queue) Push(j Job) Result {
	if q.ids[j.ID] {
		return Already
	}
	if q.n >= q.max {
		return Full
	}
	if j.Created.IsZero() {
		j.Created = j.Queued
	}
	l := q.orgs[j.Org]
	if l == nil {
		start := q.vtime
		if f, ok := q.idle[j.Org]; ok {
			start = max(start, f)
			delete(q.idle, j.Org)
		}
		l = &line{start: start}
		q.orgs[j.Org] = l
	}
	q.serial++
	e := entry{job: j, serial: q.serial}
	if j.Sync {
		l.sync = insert(l.sync, e)
	} else {
		l.async = insert(l.async, e)
	}
	q.ids[j.ID] = true
	q.n++
	return Queued
}

// insert puts e after every entry created no later than it.
func insert(es []entry, e entry) []entry {
	i, _ := slices.BinarySearchFunc(es, e, func(a, b entry) int {
		if c := a.job.Created.Compare(b.job.Created); c != 0 {
			return c
		}
		return cmp.Compare(a.serial, b.serial)
	})
	return slices.Insert(es, i, e)
}

// Pop takes the next job: the organization with the smallest start tag (ties: the one whose next job is
// older, then the smaller org id), and from it its oldest synchronous job, unless AsyncEvery-1 turns in a
// row took one while asynchronous work waited: then its oldest asynchronous job.
func (q *Queue) Pop() (Job, bool) {
	var org string
	var best *line
	for o, l := range q.orgs {
		if best == nil || l.start < best.start ||
			l.start == best.start && before(l.head(), o, best.head(), org) {
			org, best = o, l
		}
	}
	if best == nil {
		return Job{}, false
	}
	var e entry
	switch {
	case len(best.sync) > 0 && (len(best.async) == 0 || best.syncRun < AsyncEvery-1):
		e, best.sync = best.sync[0], best.sync[1:]
		if len(best.async) > 0 {
			best.syncRun++
		}
	default:
		e, best.async = best.async[0], best.async[1:]
		best.syncRun = 0
	}
	q.vtime = best.start
	best.start++
	delete(q.ids, e.job.ID)
	q.n--
	if len(best.sync)+len(best.async) == 0 {
		delete(q.orgs, org)
		q.idle[org] = best.start
	}
	q.forgetIdle()
	return e.job, true
}

// head is the entry the line's next turn would compare by age: its older first job of either line.
func (l *line) head() entry {
	switch {
	case len(l.sync) == 0:
		return l.async[0]
	case len(l.async) == 0:
		return l.sync[0]
	case l.async[0].job.Created.Before(l.sync[0].job.Created):
		return l.async[0]
	}
	return l.sync[0]
}

func before(a entry, orgA string, b entry, orgB string) bool {
	if c := a.job.Created.Compare(b.job.Created); c != 0 {
		return c < 0
	}
	return orgA < orgB
}

// forgetIdle drops the finish tags of emptied organizations that no longer lie ahead of the virtual time: such
// an organization would start at the virtual time anyway. It keeps the map as small as the organizations
// served lately.
func (q *Queue) forgetIdle() {
	for o, f := range q.idle {
		if f <= q.vtime {
			delete(q.idle, o)
		}
	}
}

// Take removes up to n jobs in the order Pop would take them, for the caller to queue elsewhere.
func (q *Queue) Take(n int) []Job {
	var js []Job
	for len(js) < n {
		j, ok := q.Pop()
		if !ok {
			break
		}
		js = append(js, j)
	}
	return js
}
