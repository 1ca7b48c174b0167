package actors

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"filigrane/actors/jobstate"
	"filigrane/actors/mediakind"
	"filigrane/actors/placement"
)

// PoolsConfig configures a node's worker pools.
type PoolsConfig struct {
	Caller    Caller
	Processor Processor
	Logger    zerolog.Logger
	// Node is the node's name, in worker ids (and so in the jobs' attempt nodes) and metrics.
	Node  string
	Lease time.Duration
	// Workers is the number of workers per work class the node runs; a class absent or at 0 is not run.
	Workers map[mediakind.Class]int
	// CPUTokens bounds the codec work running at once on the CPU classes together (and the synchronous
	// detections of the edge): the node's cores. 0 means the cpu class's workers, at least 1.
	CPUTokens int
	Metrics   *WorkMetrics
	// Outcomes, when set, keeps beside each stored result the Output a worker reports (OutcomeFiles): set
	// where the job records share the data directory's disk (one node).
	Outcomes *OutcomeFiles
}

// Pools is a node's workers: one Pool per work class it runs (its roles), each advertising its own free
// slots, the CPU classes sharing one set of CPU tokens so that short and long work together never run more
// attempts than the node has cores.
type Pools struct {
	byClass map[mediakind.Class]*Pool
	sync    *Pool
}

// NewPools builds the pools of cfg.Workers.
func NewPools(cfg PoolsConfig) *Pools {
	tokens := cfg.CPUTokens
	if tokens <= 0 {
		tokens = max(1, cfg.Workers[mediakind.ClassCPU])
	}
	cpu := make(chan struct{}, tokens)
	ps := &Pools{byClass: map[mediakind.Class]*Pool{}}
	for _, c := range mediakind.Classes() {
		n := cfg.Workers[c]
		if n <= 0 {
			continue
		}
		t := cpu
		if c == mediakind.ClassGPU {
			t = make(chan struct{}, n) // one attempt per device slot; the GPU's own work is not the CPU's
		}
		p := newPool(cfg.Caller, cfg.Processor, cfg.Logger.With().Str("class", string(c)).Logger(), cfg.Node, string(c), n, cfg.Lease, t)
		p.Metrics, p.outcomes = cfg.Metrics, cfg.Outcomes
		ps.byClass[c] = p
	}
	ps.sync = ps.byClass[mediakind.ClassCPU]
	if ps.sync == nil {
		// A node that runs no short CPU work still answers synchronous detections at its edge: a pool
		// without workers lends it the CPU tokens.
		ps.sync = newPool(cfg.Caller, cfg.Processor, cfg.Logger, cfg.Node, string(mediakind.ClassCPU), 0, cfg.Lease, cpu)
		ps.sync.Metrics, ps.sync.outcomes = cfg.Metrics, cfg.Outcomes
	}
	return ps
}

// SetMember names the node's cluster member in the ids of the workers started after it (call it before Run):
// a job whose worker's member left the cluster ends the attempt without waiting for its lease.
func (ps *Pools) SetMember(id string) {
	for _, p := range ps.byClass {
		p.member = id
	}
	ps.sync.member = id
}

// Pool is the pool of class c, or nil when the node does not run c.
func (ps *Pools) Pool(c mediakind.Class) *Pool { return ps.byClass[c] }

// Sync is the pool the edge uses for synchronous work (CPU tokens, attempts it claims itself): the cpu pool,
// or one without workers when the node runs no cpu class (its Takes is false).
func (ps *Pools) Sync() *Pool { return ps.sync }

// Classes lists the classes the node runs, in mediakind order.
func (ps *Pools) Classes() []mediakind.Class {
	var cs []mediakind.Class
	for _, c := range mediakind.Classes() {
		if ps.byClass[c] != nil {
			cs = append(cs, c)
		}
	}
	return cs
}

// Free is the free slots per class the node runs, for its member metadata; a draining pool is left out
// (the node takes no more work of it).
func (ps *Pools) Free() map[string]int {
	free := map[string]int{}
	for c, p := range ps.byClass {
		if !p.Draining() {
			free[string(c)] = p.Free()
		}
	}
	return free
}

// Offer queues the job on the pool of class c; false when the node does not run c or is draining.
func (ps *Pools) Offer(w QueuedJob, c mediakind.Class) bool {
	p := ps.byClass[c]
	return p != nil && p.Offer(w)
}

// SetOnChange sets every pool's OnChange; call it before Run.
func (ps *Pools) SetOnChange(f func()) {
	for _, p := range ps.byClass {
		p.OnChange = f
	}
}

// Run starts every pool's workers; they stop when ctx ends.
func (ps *Pools) Run(ctx context.Context) {
	for _, p := range ps.byClass {
		p.Run(ctx)
	}
}

// Wait blocks until every worker returned.
func (ps *Pools) Wait() {
	for _, p := range ps.byClass {
		p.Wait()
	}
}

// all is every pool, the sync pool included, once.
func (ps *Pools) all() []*Pool {
	all := slices.Collect(maps.Values(ps.byClass))
	if ps.byClass[mediakind.ClassCPU] == nil {
		all = append(all, ps.sync)
	}
	return all
}

// BeginDrain makes every pool refuse new work and returns the jobs that were waiting, by class, for the
// caller to place elsewhere.
func (ps *Pools) BeginDrain() map[mediakind.Class][]QueuedJob {
	waiting := map[mediakind.Class][]QueuedJob{}
	for c, p := range ps.byClass {
		if ids := p.BeginDrain(); len(ids) > 0 {
			waiting[c] = ids
		}
	}
	ps.sync.draining.Store(true)
	return waiting
}

// AwaitIdle waits until no attempt runs in any pool, or ctx ends; it reports whether they all finished.
func (ps *Pools) AwaitIdle(ctx context.Context) bool {
	for _, p := range ps.all() {
		select {
		case <-p.Idle():
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// HandBackRunning hands back every running attempt (Pool.HandBackRunning).
func (ps *Pools) HandBackRunning() {
	for _, p := range ps.all() {
		p.HandBackRunning()
	}
}

// Running is the number of attempts running in all pools.
func (ps *Pools) Running() int {
	n := 0
	for _, p := range ps.all() {
		n += p.Running()
	}
	return n
}

// WorkersActor is the name of the per-node actor that receives WorkOffers (cluster.MemberPID).
const WorkersActor = "workers"

// MaxOfferHops bounds how often an offer is passed on by nodes that cannot take it (draining, or the class
// is not theirs any more); beyond it the offer is dropped and the sweeper's next tick places the job again.
const MaxOfferHops = 2

// WorkOffer asks a node to run a job's next attempt: it queues the request id on its pool of the first
// class in Classes that it runs, and its worker claims the job from the job actor as usual. Offers are sent
// without confirmation: a lost one is repeated by the sweeper's next tick of the job (the job stays
// claimable), and a duplicate is harmless (a second claim of a running job is refused). OrgID, Sync and
// Created order the job in the receiving node's queue (actors/workqueue); an offer from a node that sent none
// queues the job as one of no organization, in the order it came.
type WorkOffer struct {
	RequestID string
	Classes   []string
	Hops      int
	OrgID     string
	Sync      bool
	Created   time.Time
}

// job is the offer's job as a pool queues it.
func (o *WorkOffer) job() QueuedJob {
	return QueuedJob{RequestID: o.RequestID, OrgID: o.OrgID, Sync: o.Sync, Created: o.Created}
}

// offerOf is the offer of a job taken from a queue here, to be queued on another node's pool of class.
func offerOf(w QueuedJob, class mediakind.Class) *WorkOffer {
	return &WorkOffer{RequestID: w.RequestID, Classes: []string{string(class)}, Hops: 1, OrgID: w.OrgID, Sync: w.Sync, Created: w.Created}
}

// WorkMessages lists the worker messages, for registration with the wire codec.
func WorkMessages() []any { return []any{WorkOffer{}} }

// Dispatcher places claimable jobs on the node with free capacity of their work class (actors/placement)
// and queues offers that other nodes send this one. Its Dispatch is the job actor's Deps.Dispatch.
type Dispatcher struct {
	// Self is this node's member id.
	Self  string
	Pools *Pools
	// Members is the cluster's members with their gossiped free slots (this node's entry, if any, is
	// replaced by its pools' live figures).
	Members func() []placement.Node
	// Send delivers an offer to the node with member id node without waiting.
	Send func(node string, o *WorkOffer) error
	// LowDisk reports whether this node is low on disk space now (nil: never), for its own entry in the
	// snapshot; other members' come with Members, as they gossip it.
	LowDisk func() bool
	Logger  zerolog.Logger
}

func (d *Dispatcher) lowDisk() bool { return d.LowDisk != nil && d.LowDisk() }

// snapshot is the members as placement sees them, with this node's live free slots.
func (d *Dispatcher) snapshot() []placement.Node {
	var nodes []placement.Node
	for _, n := range d.Members() {
		if n.ID != d.Self {
			nodes = append(nodes, n)
		}
	}
	return append(nodes, placement.Node{ID: d.Self, Free: d.Pools.Free(), LowDisk: d.lowDisk()})
}

// Dispatch places a claimable job; it never blocks.
func (d *Dispatcher) Dispatch(rec *jobstate.Record) {
	var classes []string
	for _, c := range mediakind.ClassesFor(rec.Media, rec.AcceleratorRequested) {
		classes = append(classes, string(c))
	}
	w := QueuedJobOf(rec)
	d.place(&WorkOffer{RequestID: w.RequestID, Classes: classes, OrgID: w.OrgID, Sync: w.Sync, Created: w.Created})
}

func (d *Dispatcher) place(o *WorkOffer) {
	c, ok := placement.Pick(o.RequestID, o.Classes, d.Self, d.snapshot())
	if !ok {
		d.Logger.Debug().Str("job", o.RequestID).Strs("classes", o.Classes).
			Msg("no node runs the job's work class; the sweeper places it again")
		return
	}
	if c.Node == d.Self {
		if !d.Pools.Offer(o.job(), mediakind.Class(c.Class)) {
			d.Logger.Debug().Str("job", o.RequestID).Msg("this node stopped taking work; the sweeper places the job again")
		}
		return
	}
	if err := d.Send(c.Node, o); err != nil {
		d.Logger.Warn().Err(err).Str("job", o.RequestID).Str("node", c.Node).Msg("offer work; the sweeper places the job again")
	}
}

// Receive handles an offer another node sent: it queues the job here, or, when this node takes no work of
// those classes (draining, or its roles changed since the sender's snapshot), places it again.
func (d *Dispatcher) Receive(o *WorkOffer) {
	for _, c := range o.Classes {
		if d.Pools.Offer(o.job(), mediakind.Class(c)) {
			return
		}
	}
	if o.Hops >= MaxOfferHops {
		return
	}
	next := *o
	next.Hops++
	d.place(&next)
}

// Replace places jobs taken out of this node's queues again (a drain, or Rebalance).
func (d *Dispatcher) Replace(class mediakind.Class, jobs []QueuedJob) {
	for _, w := range jobs {
		d.place(offerOf(w, class))
	}
}

// Rebalance moves jobs that wait in this node's queues to other nodes that advertise free slots of their
// class, as many as those have free: a node that joined, or one that finished its work, takes waiting jobs
// without waiting for the sweeper. A node low on disk space takes none from a node that is not (placement
// would not have sent them there either). It reports how many it moved.
func (d *Dispatcher) Rebalance() int {
	moved, selfLow := 0, d.lowDisk()
	for _, c := range d.Pools.Classes() {
		p := d.Pools.Pool(c)
		if p.Waiting() == 0 || p.Free() > 0 {
			continue
		}
		for _, n := range d.Members() {
			f := n.Free[string(c)]
			if n.ID == d.Self || f <= 0 || (n.LowDisk && !selfLow) {
				continue
			}
			for _, w := range p.TakeQueued(f) {
				if err := d.Send(n.ID, offerOf(w, c)); err != nil {
					d.Logger.Warn().Err(err).Str("job", w.RequestID).Msg("move waiting work; the sweeper places the job again")
				}
				moved++
			}
		}
	}
	return moved
}
