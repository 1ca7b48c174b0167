// Package clustertest helps tests run Filigrane clusters.
//
// In one test process: StartNodes (one cluster) or StartClusters (several)
// start cluster.Nodes on free 127.0.0.1 ports, in a way that keeps the race
// detector quiet about protoactor's start-up (read StartNodes first).
//
// Across processes: StartProcesses starts N copies of a binary the test
// already has (it builds nothing) with per-process free ports in their
// flags, waits until each is ready (an output line, a TCP port or an HTTP
// URL), captures their output (WaitLine, Tail), talks to them on stdin
// (Send, Ask) and crashes, freezes, stops and restarts them (Kill,
// Pause/Resume, Stop, Restart). A convenient binary is the test binary
// itself with a switch in TestMain; see this package's process_test.go.
package clustertest

import (
	"context"
	"fmt"
	"slices"
	"time"

	"filigrane/cluster"
	"filigrane/cluster/internal/grpcprobe"
)

// StartNodes starts one in-process cluster, one node per config, on
// 127.0.0.1, and returns when every node sees all of them. Join, Host, the
// ports and ActorGossipInterval of the configs are overridden (free ports,
// all join the first, protoactor's own gossip off: see
// cluster.Config.ActorGossipInterval). On error the nodes already started
// are stopped.
//
// Why not simply cluster.Start each config with Join set: protoactor's remote
// start writes a gRPC package variable that running gRPC servers and clients
// read (see internal/grpcprobe). To keep `go test -race` meaningful,
// StartNodes starts every node alone, waits until each gRPC server is
// accepting, orders all later connections and topology changes after the
// last start (probe barriers, and a Members call that takes each provider's
// lock, which its publisher takes before telling protoactor about new
// members), and only then lets the nodes join. The same rule applies to the
// whole test binary: start all in-process nodes of a binary in one call
// (StartClusters for several clusters), before any of them does work;
// starting more later, in another test, is a data race in gRPC as far as the
// race detector can tell.
func StartNodes(ctx context.Context, cfgs ...cluster.Config) ([]*cluster.Node, error) {
	cs, err := StartClusters(ctx, cfgs)
	if err != nil {
		return nil, err
	}
	return cs[0], nil
}

// StartClusters is StartNodes for several independent clusters at once.
func StartClusters(ctx context.Context, clusters ...[]cluster.Config) ([][]*cluster.Node, error) {
	var all []*cluster.Node
	var probes []*grpcprobe.Probe
	fail := func(err error) ([][]*cluster.Node, error) {
		for _, n := range all {
			_ = n.Stop(ctx, false)
		}
		return nil, err
	}
	out := make([][]*cluster.Node, len(clusters))
	for ci, cfgs := range clusters {
		if len(cfgs) == 0 {
			return fail(fmt.Errorf("clustertest: cluster %d has no node configs", ci))
		}
		for _, cfg := range cfgs {
			probe := grpcprobe.New()
			cfg.Host, cfg.AdvertiseHost = "127.0.0.1", ""
			cfg.RemotePort, cfg.GossipPort = 0, 0
			cfg.Join = nil
			// protoactor's gossip (off by default) races on a
			// process-global random source when several nodes share a
			// process.
			cfg.ActorGossipInterval = 0
			cfg.ServerOptions = append(slices.Clone(cfg.ServerOptions), probe.ServerOption())
			n, err := cluster.Start(ctx, cfg)
			if err != nil {
				return fail(fmt.Errorf("clustertest: %w", err))
			}
			all = append(all, n)
			probes = append(probes, probe)
			out[ci] = append(out[ci], n)
			if err := probe.Wait(ctx, n.Address()); err != nil {
				return fail(fmt.Errorf("clustertest: %s: %w", n.Name(), err))
			}
		}
	}
	for i, n := range all {
		probes[i].Sync()
		_ = n.Members()
	}
	for _, nodes := range out {
		for _, n := range nodes[1:] {
			if err := n.Join(ctx, nodes[0].GossipAddr()); err != nil {
				return fail(fmt.Errorf("clustertest: %s joins %s: %w", n.Name(), nodes[0].Name(), err))
			}
		}
	}
	for _, nodes := range out {
		if err := WaitMembers(ctx, len(nodes), nodes...); err != nil {
			return fail(err)
		}
	}
	return out, nil
}

// WaitMembers polls until each node sees exactly want live members, or ctx
// ends.
func WaitMembers(ctx context.Context, want int, nodes ...*cluster.Node) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		ok := true
		for _, n := range nodes {
			if len(n.Members()) != want {
				ok = false
				break
			}
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			counts := make([]string, 0, len(nodes))
			for _, n := range nodes {
				counts = append(counts, fmt.Sprintf("%s sees %d", n.Name(), len(n.Members())))
			}
			return fmt.Errorf("clustertest: waiting for %d members (%v): %w", want, counts, ctx.Err())
		case <-t.C:
		}
	}
}
