package workqueue

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

// step is one operation on the queue: push a job (org, id, sync; created at its step's second unless at is
// set), or pop the jobs named in pop (space-separated ids, in order; "-" for an empty queue).
type step struct {
	org, id string
	sync    bool
	at      int // created at t0 + at seconds when > 0
	want    Result
	pop     string
}

func push(org, id string) step          { return step{org: org, id: id} }
func pushSync(org, id string) step      { return step{org: org, id: id, sync: true} }
func pushAt(org, id string, s int) step { return step{org: org, id: id, at: s} }
func pop(ids string) step               { return step{pop: ids} }

// TestQueueOrder runs each case's steps on a queue of 6 jobs at most and checks the order in which jobs come out.
func TestQueueOrder(t *testing.T) {
	cases := []struct {
		name  string
		steps []step
	}{
		{"one org is first in first out", []step{
			push("A", "a1"), push("A", "a2"), push("A", "a3"), pop("a1 a2 a3 -"),
		}},
		{"an org arriving behind another's backlog waits for one job of it", []step{
			push("A", "a1"), push("A", "a2"), push("A", "a3"), push("A", "a4"), pop("a1"),
			pushSync("B", "b1"), pop("b1 a2 a3 a4 -"),
		}},
		{"two backlogs alternate", []step{
			push("A", "a1"), push("A", "a2"), push("A", "a3"), push("B", "b1"), push("B", "b2"),
			pop("a1 b1 a2 b2 a3 -"),
		}},
		{"three orgs take turns", []step{
			push("A", "a1"), push("A", "a2"), push("B", "b1"), push("B", "b2"), push("C", "c1"), push("C", "c2"),
			pop("a1 b1 c1 a2 b2 c2"),
		}},
		{"an org that refills its empty line at once gains no turn", []step{
			push("A", "a1"), push("A", "a2"), push("A", "a3"), push("A", "a4"),
			push("C", "c1"), pop("a1 c1"), push("C", "c2"), pop("a2 c2"), push("C", "c3"), pop("a3 c3"),
			push("C", "c4"), pop("a4 c4 -"),
		}},
		{"an org idle for a while starts at the current turn, with no credit saved", []step{
			push("B", "b1"), pop("b1"),
			push("A", "a1"), push("A", "a2"), push("A", "a3"), push("A", "a4"), pop("a1 a2 a3"),
			push("B", "b2"), push("B", "b3"), pop("b2 a4 b3 -"),
		}},
		{"sync ahead of the same org's async, async one turn in four", []step{
			push("A", "a1"), push("A", "a2"), pushSync("A", "s1"), pushSync("A", "s2"), pushSync("A", "s3"),
			pushSync("A", "s4"), pop("s1 s2 s3 a1 s4 a2 -"),
		}},
		{"sync turns with no async waiting do not count against async", []step{
			pushSync("A", "s1"), pushSync("A", "s2"), pop("s1 s2"),
			push("A", "a1"), pushSync("A", "s3"), pushSync("A", "s4"), pushSync("A", "s5"), pushSync("A", "s6"),
			pop("s3 s4 s5 a1 s6 -"),
		}},
		{"sync does not jump another org's turn", []step{
			push("A", "a1"), push("A", "a2"), push("B", "b1"), push("B", "b2"), pushSync("B", "bs"),
			pop("a1 bs a2 b1 b2 -"),
		}},
		{"a job queued again takes its place by age within its org", []step{
			pushAt("A", "a3", 30), pushAt("A", "a1", 10), pushAt("A", "a2", 20), pushAt("A", "a2b", 20),
			pop("a1 a2 a2b a3 -"),
		}},
		{"a job queued twice is queued once", []step{
			push("A", "a1"), {org: "A", id: "a1", want: Already}, {org: "B", id: "a1", sync: true, want: Already},
			pop("a1 -"), push("A", "a1"), pop("a1 -"),
		}},
		{"a full queue refuses", []step{
			push("A", "a1"), push("A", "a2"), push("A", "a3"), push("B", "b1"), push("B", "b2"), push("B", "b3"),
			{org: "C", id: "c1", want: Full}, pop("a1"), push("C", "c1"), pop("b1 c1 a2 b2 a3 b3 -"),
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := New(6)
			for i, s := range c.steps {
				if s.pop == "" {
					at := i + 1
					if s.at > 0 {
						at = s.at
					}
					j := Job{ID: s.id, Org: s.org, Sync: s.sync, Created: t0.Add(time.Duration(at) * time.Second)}
					if got := q.Push(j); got != s.want {
						t.Fatalf("step %d: push %s of %s: %v, want %v", i, s.id, s.org, got, s.want)
					}
					continue
				}
				var got []string
				for range strings.Fields(s.pop) {
					if j, ok := q.Pop(); ok {
						got = append(got, j.ID)
					} else {
						got = append(got, "-")
					}
				}
				if g := strings.Join(got, " "); g != s.pop {
					t.Fatalf("step %d: popped %q, want %q", i, g, s.pop)
				}
			}
		})
	}
}

// TestTakeInPopOrder: Take hands out the jobs in the order the workers would have taken them, and leaves the
// queue's count and ids right.
func TestTakeInPopOrder(t *testing.T) {
	q := New(10)
	for i, id := range []string{"a1", "a2", "b1"} {
		q.Push(Job{ID: id, Org: id[:1], Created: t0.Add(time.Duration(i) * time.Second)})
	}
	var ids []string
	for _, j := range q.Take(2) {
		ids = append(ids, j.ID)
	}
	if strings.Join(ids, " ") != "a1 b1" || q.Len() != 1 || !q.Has("a2") || q.Has("a1") {
		t.Fatalf("took %v, left %d", ids, q.Len())
	}
	if js := q.Take(5); len(js) != 1 || q.Len() != 0 {
		t.Fatalf("took %v from one job", js)
	}
}

// TestZeroCreatedIsQueuedTime: a job without a creation time (an offer from an older node) is ordered by when
// it was queued.
func TestZeroCreatedIsQueuedTime(t *testing.T) {
	q := New(10)
	q.Push(Job{ID: "late", Org: "A", Created: t0.Add(time.Minute)})
	q.Push(Job{ID: "old", Org: "A", Queued: t0})
	if j, _ := q.Pop(); j.ID != "old" {
		t.Fatalf("first %s", j.ID)
	}
}
