package node

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"filigrane/actors"
	"filigrane/actors/mediakind"
	"filigrane/actors/placement"
	"filigrane/cluster"
	"filigrane/gpu"
)

// Roles is what a node's roles make it do.
type Roles struct {
	// HostsActors: the node hosts the org, job and batch actors (every role but edge does).
	HostsActors bool
	// Classes are the work classes the node runs.
	Classes map[mediakind.Class]bool
}

// NodeRoles reads a role list: edge serves HTTP only; api serves HTTP and hosts actors; worker runs the cpu and
// cpu-long classes; cpu, cpu-long and gpu run that class. Every node serves HTTP on its listeners whatever
// its roles (edge and api say what it is for); only edge alone keeps a node free of actors.
func NodeRoles(rs []cluster.Role) Roles {
	r := Roles{Classes: map[mediakind.Class]bool{}}
	for _, role := range rs {
		switch role {
		case cluster.RoleEdge:
			continue
		case cluster.RoleWorker:
			r.Classes[mediakind.ClassCPU], r.Classes[mediakind.ClassCPULong] = true, true
		case cluster.RoleCPU:
			r.Classes[mediakind.ClassCPU] = true
		case cluster.RoleCPULong:
			r.Classes[mediakind.ClassCPULong] = true
		case cluster.RoleGPU:
			r.Classes[mediakind.ClassGPU] = true
		}
		r.HostsActors = true
	}
	return r
}

// Workers is the worker slots per work class a node with these roles runs: cpu and cpu-long as configured,
// and gpuSlots a device of the gpu class when the node has devices (none without one, whatever its roles).
func (r Roles) Workers(cpu, cpuLong, devices, gpuSlots int) map[mediakind.Class]int {
	workers := map[mediakind.Class]int{}
	if r.Classes[mediakind.ClassCPU] {
		workers[mediakind.ClassCPU] = cpu
	}
	if r.Classes[mediakind.ClassCPULong] {
		workers[mediakind.ClassCPULong] = cpuLong
	}
	if r.Classes[mediakind.ClassGPU] && devices > 0 {
		workers[mediakind.ClassGPU] = devices * gpuSlots
	}
	return workers
}

// DefaultGPUSlots is the gpu class's workers per device by default. On an H200 a device ran 16 12 MP embed jobs
// at once at 4.2 times the node's CPU throughput (bench/README.md, "GPU"); four keep a 40 MP job's ~2 GiB of
// device memory each within a 16 GiB card, and the node's CPU workers take more of the node's GPU jobs when its
// gpu slots are full (they use the device too).
const DefaultGPUSlots = 4

// DefaultRoles is everything this machine can do: serve HTTP, host actors, run both CPU classes, and the gpu
// class when the GPU codec path and a device are present.
func DefaultRoles() []cluster.Role {
	rs := []cluster.Role{cluster.RoleEdge, cluster.RoleWorker}
	if gpu.CodecAvailable() && len(gpu.Devices()) > 0 {
		rs = append(rs, cluster.RoleGPU)
	}
	return rs
}

// startPlacement starts the node's workers actor (it receives the offers of other nodes) and the dispatcher
// that places the jobs of the job actors hosted here.
func (n *Node) startPlacement() error {
	d := &actors.Dispatcher{
		Self:    n.cluster.ID(),
		Pools:   n.pools,
		Members: n.placementMembers,
		Send:    n.sendOffer,
		LowDisk: n.lowDisk.Load,
		Logger:  n.cfg.Logger.With().Str("component", "placement").Logger(),
	}
	_, err := n.cluster.SpawnNamed(actor.PropsFromFunc(func(c actor.Context) {
		if o, ok := c.Message().(*actors.WorkOffer); ok {
			d.Receive(o) // never blocks: it queues or sends on
		}
	}), actors.WorkersActor)
	if err != nil {
		return fmt.Errorf("start the workers actor: %w", err)
	}
	n.dispatcher.Store(d)
	return nil
}

// placementMembers is the cluster's members as placement sees them.
func (n *Node) placementMembers() []placement.Node {
	ms := n.cluster.Members()
	nodes := make([]placement.Node, 0, len(ms))
	for _, m := range ms {
		if !m.Client {
			nodes = append(nodes, placement.Node{ID: m.ID, Free: m.Free, LowDisk: m.LowDisk})
		}
	}
	return nodes
}

// sendOffer delivers an offer to the workers actor of the member with id.
func (n *Node) sendOffer(id string, o *actors.WorkOffer) error {
	for _, m := range n.cluster.Members() {
		if m.ID == id {
			return n.cluster.SendPID(cluster.MemberPID(m, actors.WorkersActor), o)
		}
	}
	return fmt.Errorf("member %s left", id)
}

// rebalance moves waiting jobs to members that advertise free slots, whenever the members change (a node
// joined, another finished work) and every second, until ctx ends; each time it first reads whether this
// node is low on disk space and gossips a change (advertiseDisk), so that a disk filled or freed by something
// else than the node's own writes is seen within the second.
func (n *Node) rebalance(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		changed := n.cluster.MembersChanged()
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-t.C:
		}
		n.advertiseDisk()
		if d := n.dispatcher.Load(); d != nil {
			d.Rebalance()
		}
	}
}

// drain stops taking work: the node advertises no free slot, refuses offers (passing them on) and places the
// jobs waiting in its queues on other nodes. The function it returns lets running attempts finish until
// DrainTimeout after the drain began (and no longer than ctx), then hands back those still running, so that
// no job fails or counts an attempt because this node stops. Nothing happens with DrainTimeout 0.
func (n *Node) drain(ctx context.Context) (finish func()) {
	d := n.dispatcher.Load()
	if n.cfg.DrainTimeout <= 0 || d == nil {
		return func() {}
	}
	log := n.cfg.Logger.With().Str("component", "placement").Logger()
	waiting := n.pools.BeginDrain()
	n.advertiseFree()
	moved := 0
	for c, ids := range waiting {
		d.Replace(c, ids)
		moved += len(ids)
	}
	// running counts the jobs that workers are still claiming (actors.Pool.Running): "drained" comes only
	// after those too. A short attempt finishes within the second, so the drained line says how long it
	// waited and for how many.
	began, running := n.cfg.Clock.Now(), n.pools.Running()
	log.Info().Int("waiting_moved", moved).Int("running", running).Dur("timeout", n.cfg.DrainTimeout).
		Msg("draining: taking no more work")
	// The timeout runs from now, not from finish: the balancer's delay (DrainDelay) is part of it.
	dctx, cancel := context.WithTimeout(ctx, n.cfg.DrainTimeout)
	return func() {
		defer cancel()
		if n.pools.AwaitIdle(dctx) {
			log.Info().Int("finished", running).Dur("waited", n.cfg.Clock.Now().Sub(began)).Msg("drained: no work running")
			return
		}
		log.Warn().Int("running", n.pools.Running()).Msg("drain timeout: handing back the running attempts")
		n.pools.HandBackRunning()
		// The hand-backs go through the cluster, still up; they are bounded by the pool's call timeout.
		hctx, cancel2 := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel2()
		n.pools.AwaitIdle(hctx)
	}
}

// holdForBalancer keeps the listeners open for DrainDelay (or until ctx ends: a second signal, the grace, a
// member the cluster blocked) after the servers began draining, so that a load balancer probing /readyz sees
// 503 and stops sending traffic before connections are refused.
func (n *Node) holdForBalancer(ctx context.Context) {
	if n.cfg.DrainDelay <= 0 || !n.serving {
		return
	}
	n.cfg.Logger.Info().Dur("drain_delay", n.cfg.DrainDelay).
		Msg("draining: /readyz answers 503 and new work is refused; the listeners close after the drain delay")
	t := time.NewTimer(n.cfg.DrainDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
