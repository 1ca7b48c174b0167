package cluster

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
)

// distinctLocalIDs makes the ids this actor system gives its futures (one per request) and unnamed actors
// count on from a random point instead of from zero. protoactor numbers them from zero in every process and
// a remote message finds its target by address and id alone, so a peer's late answer to a request of an
// earlier incarnation of this node (killed, or declared dead and restarted on the same address) answered the
// new incarnation's request that had the same number: a job actor's waiter, answered when its job ended,
// reached a synchronous embed of another job on the restarted node, which answered its client with the other
// job's result (bench chaos, a frozen node declared dead and restarted: a charge the client never saw). With
// 2^62 starting points, two incarnations' ranges overlap with a probability of about their length over 2^62.
func distinctLocalIDs(sys *actor.ActorSystem) {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails: crypto/rand ends the program instead
	atomic.StoreUint64(&sys.ProcessRegistry.SequenceID, binary.LittleEndian.Uint64(b[:])>>2)
}

// Kind is a cluster kind (a virtual actor type): activations are created
// from Props on the member that owns the identity.
type Kind struct {
	Name  string
	Props *actor.Props
}

// NewKind returns a Kind. Start adds the envelope middleware to its props.
func NewKind(name string, props *actor.Props) Kind { return Kind{Name: name, Props: props} }

// Config configures a Node.
type Config struct {
	// NodeName is the operator's name for this node; required.
	NodeName string
	// Host is the bind address of the remote (gRPC) and of the gossip.
	// Default "127.0.0.1". Use AdvertiseHost when binding 0.0.0.0.
	Host string
	// AdvertiseHost is the address other nodes use to reach this node, when
	// it differs from Host. It needs a fixed RemotePort: protoactor
	// advertises host:port literally.
	AdvertiseHost string
	// RemotePort is the gRPC port; 0 picks a free one (see Address).
	RemotePort int
	// GossipPort is the memberlist port; 0 picks a free one (see GossipAddr).
	GossipPort int
	// Join lists gossip addresses (host:port) of existing members; empty
	// starts a new cluster.
	Join []string
	// Roles and Capacity (free worker slots) are gossiped in node metadata.
	Roles    []Role
	Capacity int
	// Free is the free worker slots per work class at start (NodeMeta.Free);
	// SetFree changes it. When set, Capacity is taken as its sum.
	Free map[string]int
	// GPUs and GPUMemory (bytes) are the node's CUDA devices as gpu.Discover
	// found them, gossiped in node metadata; zero without a GPU.
	GPUs      int
	GPUMemory uint64
	// LowDisk is NodeMeta.LowDisk at start (SetLowDisk changes it), so that
	// the members learn it with the node's join.
	LowDisk bool
	// Logger receives the node's, protoactor's and memberlist's logs.
	// protoactor logs below Warn only with VerboseActorLogs: at Info it
	// writes several lines per member on every topology change.
	Logger           zerolog.Logger
	VerboseActorLogs bool
	// Kinds this node hosts. Edge-only nodes host none.
	Kinds []Kind
	// Registry holds the message types; required.
	Registry *Registry
	// RequestTimeout bounds Request and RequestPID when ctx has no
	// deadline. Default DefaultRequestTimeout.
	RequestTimeout time.Duration
	// FailureDetection timings; zero fields take DefaultFailureDetection.
	FailureDetection FailureDetection
	// Label names the cluster: protoactor's cluster name and memberlist's
	// label. Nodes only see nodes with the same label. Default "filigrane".
	Label string
	// ActorGossipInterval turns on protoactor's own gossip with this period
	// (protoactor's default is 300 ms). It is off by default (0): memberlist
	// already does membership, and protoactor's gossip has data races
	// (unsynchronised reads of its member list and block list while they are
	// updated, and a process-global random source shared by all nodes of a
	// process). What it would add: it runs over gRPC and blocks a member
	// whose heartbeat stops for 20 s, which catches a node whose gRPC is
	// wedged while its memberlist still answers.
	ActorGossipInterval time.Duration
	// ServerOptions and DialOptions are extra gRPC options for the remote's
	// server and its outgoing connections (TLS credentials, keepalive,
	// message size limits). Without them the remote speaks plain gRPC.
	// DialOptions replace protoactor's default (plain-text transport), so
	// they must include transport credentials.
	ServerOptions []grpc.ServerOption
	DialOptions   []grpc.DialOption
	// GossipKey, when set, encrypts and authenticates gossip (16, 24 or 32
	// bytes, the same on every node). Without it anyone who can reach the
	// gossip port can join the cluster.
	GossipKey []byte
}

// actorGossipOff is a gossip period that never elapses.
const actorGossipOff = 100 * 365 * 24 * time.Hour

// Node is a running cluster member: actor system, remote, protoactor cluster
// with disthash identity lookup, and memberlist membership. A node alone is a
// cluster of one.
type Node struct {
	cfg      Config
	reg      *Registry
	system   *actor.ActorSystem
	cluster  *pcluster.Cluster
	provider *MemberlistProvider
	log      zerolog.Logger

	stats nodeStats

	blocked     chan struct{}
	blockedOnce sync.Once
	stopOnce    sync.Once
	stopErr     error
}

// Start starts a node and joins the cluster. It takes a little over a second
// (protoactor's StartMember sleeps 1 s). ctx bounds the join retries.
//
// Start sets one piece of process-global state, and not by choice: protoactor's
// remote start replaces gRPC's logger (grpclog.SetLoggerV2) on every start,
// with no option to skip it, and every gRPC server and client of the process
// reads that variable unsynchronised. A process that runs one node (filigrane
// serve, the benches) writes it before its gRPC server starts, which is safe.
// A second node started while another one's gRPC runs is a data race inside
// those libraries; tests order their starts instead (see Tests in the package
// documentation).
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("cluster: start: node name is required")
	}
	if cfg.Registry == nil {
		return nil, errors.New("cluster: start: registry is required")
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if ip := net.ParseIP(cfg.Host); ip != nil && ip.IsUnspecified() && cfg.AdvertiseHost == "" {
		// protoactor would advertise "0.0.0.0:port" as this node's address.
		return nil, fmt.Errorf("cluster: start: host %s needs an advertise host", cfg.Host)
	}
	if cfg.AdvertiseHost != "" && cfg.RemotePort == 0 {
		return nil, errors.New("cluster: start: an advertise host needs a fixed remote port")
	}
	if cfg.RemotePort < 0 || cfg.RemotePort > 65535 {
		return nil, fmt.Errorf("cluster: start: remote port %d out of range", cfg.RemotePort)
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.Label == "" {
		cfg.Label = "filigrane"
	}
	seen := map[string]bool{}
	system := new(atomic.Pointer[actor.ActorSystem]) // for the activations' mailboxes, set below
	kinds := make([]*pcluster.Kind, 0, len(cfg.Kinds))
	for _, k := range cfg.Kinds {
		if k.Name == "" || k.Props == nil {
			return nil, fmt.Errorf("cluster: start: kind %q needs a name and props", k.Name)
		}
		if seen[k.Name] {
			return nil, fmt.Errorf("cluster: start: kind %q registered twice", k.Name)
		}
		seen[k.Name] = true
		props := cfg.Registry.WithEnvelope(k.Props).Configure(actor.WithMailbox(stopAwareMailbox(system)))
		kinds = append(kinds, pcluster.NewKind(k.Name, props))
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cluster: start: %w", err)
	}

	n := &Node{
		cfg:     cfg,
		reg:     cfg.Registry,
		log:     cfg.Logger.With().Str("component", "cluster").Str("node", cfg.NodeName).Logger(),
		blocked: make(chan struct{}),
	}
	joinTimeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		joinTimeout = time.Until(dl)
	}
	provider, err := NewMemberlistProvider(ProviderConfig{
		NodeName:         cfg.NodeName,
		BindHost:         cfg.Host,
		AdvertiseHost:    cfg.AdvertiseHost,
		GossipPort:       cfg.GossipPort,
		Join:             cfg.Join,
		JoinTimeout:      joinTimeout,
		Roles:            cfg.Roles,
		Capacity:         cfg.Capacity,
		Free:             cfg.Free,
		GPUs:             cfg.GPUs,
		GPUMemory:        cfg.GPUMemory,
		LowDisk:          cfg.LowDisk,
		Label:            cfg.Label,
		FailureDetection: cfg.FailureDetection,
		GossipKey:        cfg.GossipKey,
		Logger:           cfg.Logger,
		OnBlocked: func(string) {
			n.blockedOnce.Do(func() { close(n.blocked) })
		},
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: start: %w", err)
	}
	provider.startCtx = ctx
	n.provider = provider

	ropts := []remote.ConfigOption{}
	if len(cfg.ServerOptions) > 0 {
		ropts = append(ropts, remote.WithServerOptions(cfg.ServerOptions...))
	}
	if len(cfg.DialOptions) > 0 {
		ropts = append(ropts, remote.WithDialOptions(cfg.DialOptions...))
	}
	if cfg.AdvertiseHost != "" {
		ropts = append(ropts, remote.WithAdvertisedHost(net.JoinHostPort(cfg.AdvertiseHost, strconv.Itoa(cfg.RemotePort))))
	}
	actorLog := cfg.Logger.With().Str("component", "protoactor").Logger()
	if !cfg.VerboseActorLogs && actorLog.GetLevel() < zerolog.WarnLevel {
		actorLog = actorLog.Level(zerolog.WarnLevel)
	}
	n.system = actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(actorLog)))
	distinctLocalIDs(n.system)
	system.Store(n.system)
	ccfg := pcluster.Configure(cfg.Label, provider, disthash.New(),
		remote.Configure(cfg.Host, cfg.RemotePort, ropts...),
		pcluster.WithKinds(kinds...),
		pcluster.WithRequestTimeout(cfg.RequestTimeout),
	)
	if cfg.ActorGossipInterval > 0 {
		ccfg.GossipInterval = cfg.ActorGossipInterval
	} else {
		// protoactor has no switch: a gossip loop that never ticks sends
		// nothing and expires no heartbeat. Its gossip actor stays, and
		// only records topology locally.
		ccfg.GossipInterval = actorGossipOff
	}
	n.cluster = pcluster.New(n.system, ccfg)
	if err := startMember(n.cluster); err != nil {
		n.abort()
		return nil, fmt.Errorf("cluster: start %s: %w", cfg.NodeName, err)
	}
	n.log.Info().Str("id", n.system.ID).Str("address", n.Address()).Str("gossip_addr", n.GossipAddr()).
		Int("kinds", len(kinds)).Msg("cluster node started")
	return n, nil
}

// startMember turns protoactor's panics (listen failure, provider error)
// into an error.
func startMember(c *pcluster.Cluster) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				err = e
			} else {
				err = fmt.Errorf("%v", r)
			}
		}
	}()
	c.StartMember()
	return nil
}

// abort releases what a failed Start created.
func (n *Node) abort() {
	_ = n.provider.shutdown(false)
	func() {
		defer func() { _ = recover() }() // the remote may not have started
		if n.cluster.Remote != nil {
			n.cluster.Remote.Shutdown(false)
		}
	}()
	n.system.Shutdown()
}

// ID is the actor system id, this node's member id for this process start.
func (n *Node) ID() string { return n.system.ID }

// Name is the configured node name.
func (n *Node) Name() string { return n.cfg.NodeName }

// Address is the remote (gRPC) address, host:port.
func (n *Node) Address() string { return n.system.Address() }

// GossipAddr is the memberlist address, host:port; give it to other nodes'
// Join.
func (n *Node) GossipAddr() string { return n.provider.GossipAddr() }

// Registry is the node's message registry.
func (n *Node) Registry() *Registry { return n.reg }

// System is the underlying actor system, for spawning plain actors.
func (n *Node) System() *actor.ActorSystem { return n.system }

// Cluster is the underlying protoactor cluster (its Gossip can carry small
// shared state). Prefer Request over its Request/RequestFuture.
func (n *Node) Cluster() *pcluster.Cluster { return n.cluster }

// Join contacts more gossip addresses (host:port), retrying until one
// answers or ctx ends. Start already joins Config.Join.
func (n *Node) Join(ctx context.Context, addrs ...string) error {
	if err := n.provider.Join(ctx, addrs); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}

// HealthScore is the gossip layer's view of this node's own health (MemberlistProvider.HealthScore): 0 when
// healthy; higher when its probes or its refutations show it cannot keep time, which slows its failure
// detection.
func (n *Node) HealthScore() int { return n.provider.HealthScore() }

// Members lists the live members with their metadata, this node included.
func (n *Node) Members() []Member { return n.provider.Members() }

// HasLeft reports whether the member with this id was in this node's view of the cluster and left it
// (killed, stopped, or declared dead). A member id is never reused: a process restarted on the same name and
// address is a new member. An id this node never saw, or saw over an hour ago, is not reported.
func (n *Node) HasLeft(memberID string) bool { return n.provider.hasLeft(memberID) }

// Gone reports whether the process that was member memberID, of the node named name, is gone: this node saw
// that member leave (HasLeft), or the member is not in the topology and the node's name is, under another
// member id (a node restarted under its name is a new member: the old process was killed, or was declared
// dead and exits as it learns so). The second rule covers a node that joined after the old member left, and
// so never saw it leave: activations move to a restarted node as soon as it joins.
func (n *Node) Gone(name, memberID string) bool {
	return memberID != "" && n.provider.gone(name, memberID)
}

// MembersChanged returns a channel that is closed the next time Members()
// changes (join, leave, capacity or other metadata). Take the channel, read
// Members(), then wait on the channel: no change is missed.
func (n *Node) MembersChanged() <-chan struct{} { return n.provider.Changed() }

// IgnoredMembers lists gossip members kept out of the cluster because their
// metadata is unusable (for example a node of an incompatible version), by
// memberlist name, with the reason. Worth a warning on a status page.
func (n *Node) IgnoredMembers() map[string]string { return n.provider.Ignored() }

// SetCapacity gossips this node's free worker capacity. It does not block.
func (n *Node) SetCapacity(free int) error { return n.provider.SetCapacity(free) }

// SetFree gossips this node's free worker slots per work class (NodeMeta.Free;
// Capacity becomes their sum). It does not block: updates are coalesced and
// go out at most every 100 ms.
func (n *Node) SetFree(free map[string]int) error { return n.provider.SetFree(free) }

// SetLowDisk gossips whether this node is low on disk space (NodeMeta.LowDisk), so that other nodes place
// work elsewhere while they can. It does not block; updates go out like SetFree's.
func (n *Node) SetLowDisk(low bool) error { return n.provider.SetLowDisk(low) }

// Blocked is closed when the cluster has blocked this node's id (it was
// declared dead and came back; with ActorGossipInterval set, also when its
// protoactor heartbeat expired). Peers route nothing to it any more; stop it
// and start a new one (in practice: exit and let the supervisor restart the
// process).
func (n *Node) Blocked() <-chan struct{} { return n.blocked }

// IsBlocked reports whether Blocked is closed already.
func (n *Node) IsBlocked() bool {
	select {
	case <-n.blocked:
		return true
	default:
		return false
	}
}

// Stats counts what Request and Send went through since the node started.
type Stats struct {
	Requests  uint64 // Request calls
	Retries   uint64 // attempts after the first (dead letter, lost owner, no activation yet)
	OwnerLost uint64 // attempts ended because the owner left the topology mid-request
	Failed    uint64 // Request calls that returned an error other than a Failure reply
}

type nodeStats struct {
	requests, retries, ownerLost, failed atomic.Uint64
}

// Stats returns the request counters (for metrics).
func (n *Node) Stats() Stats {
	return Stats{
		Requests:  n.stats.requests.Load(),
		Retries:   n.stats.retries.Load(),
		OwnerLost: n.stats.ownerLost.Load(),
		Failed:    n.stats.failed.Load(),
	}
}

// ErrNoActivation: no member could activate the identity (no member hosts
// the kind, or its activation failed) before the request's deadline.
var ErrNoActivation = errors.New("no activation for identity")

// errOwnerGone: the member holding the activation left the topology while
// a request to it was in flight.
var errOwnerGone = errors.New("owner left the cluster")

// errOwnerMoved: the topology changed (a member joined, or one left) and the activation a request was sent
// to now belongs to another member. disthash stops (poisons) such an activation; a message that reaches its
// mailbox behind the poison gets a dead letter (stopped.go), but only once the activation has finished what
// was queued ahead of it: the request is sent again, to the new owner, at once instead.
var errOwnerMoved = errors.New("the activation moved to another member")

// errReplyPathReset: a member at this node's own address left while a request to a peer was in flight (this
// process restarted on the address before the cluster dropped its previous incarnation). Dropping that member,
// every peer closes its connection to the address, and a reply queued there is lost: the request is sent again
// rather than waiting for its whole deadline.
var errReplyPathReset = errors.New("a member at this node's address left: the reply may be lost")

// errAddressReset: a member at the owner's address (an earlier incarnation of the owner's process) was
// dropped shortly before the request left, and the connection to the address closed after it: the request
// or its reply may be lost.
var errAddressReset = errors.New("a member at the owner's address left just before: the request may be lost")

// replyPathSettle is how long after this node dropped a member at an address its connections to the address,
// and the peers' (each drops the member on its own failure detection, or on the gossip of the first that
// did), may still be closing: a process restarted on the address is reached through them. A request sent in
// that time to the address, or from this node when the address is its own, can be lost with the closing
// connection, with no departure left for this node to see; it is sent again if still unanswered when the time
// is over. Bench chaos, 5 nodes, node0 killed and restarted: a request sent just after the cluster dropped
// node0's old incarnation, to the organization actor on the new one, waited 60 s, and so did the batch read
// that waited on it.
const replyPathSettle = 5 * time.Second

// Request sends msg to the virtual actor kind/identity (activating it on
// its owner if needed) and returns the unwrapped reply. A Failure reply is
// returned as the error.
//
// It waits at most until ctx's deadline (RequestTimeout when ctx has none)
// and then returns an error wrapping context.DeadlineExceeded (and
// ErrNoActivation when no activation could be found).
//
// Delivery is at-least-once: when an attempt fails (dead letter, or the
// owner leaves the topology while the request is in flight) the identity is
// looked up again and the message re-sent, though the first copy may have
// been processed. Handlers must be idempotent.
//
// Why not protoactor's cluster.Request: each of its attempts waits for the
// whole timeout, so a request in flight to a node that dies is not retried
// on the new owner: it fails after the full timeout even though the
// identity is available again about 2 s after the crash. Here an attempt
// also ends when its owner leaves the topology. And protoactor's
// RequestFuture reads a process-wide call configuration bound to the first
// cluster created in the process. The identity lookup (disthash, with a
// fixed 5 s activation timeout) runs in a goroutine that is abandoned when
// the request's deadline passes or the topology loses a member.
func (n *Node) Request(ctx context.Context, identity, kind string, msg any) (any, error) {
	n.stats.requests.Add(1)
	v, err := n.request(ctx, identity, kind, msg)
	var f *Failure
	if err != nil && !errors.As(err, &f) {
		n.stats.failed.Add(1)
	}
	return v, err
}

func (n *Node) request(ctx context.Context, identity, kind string, msg any) (any, error) {
	timeout, err := requestTimeout(ctx, n.cfg.RequestTimeout)
	if err != nil {
		return nil, fmt.Errorf("cluster: request %s/%s: %w", kind, identity, err)
	}
	a, err := n.reg.Wrap(msg)
	if err != nil {
		return nil, fmt.Errorf("cluster: request %s/%s: %w", kind, identity, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var lastErr error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			n.stats.retries.Add(1)
			// A lost owner needs the topology to change; a missing kind
			// needs a member to join. Neither happens in microseconds.
			d := min(time.Duration(attempt*attempt)*50*time.Millisecond, 500*time.Millisecond)
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		if err := ctx.Err(); err != nil {
			if lastErr != nil {
				return nil, fmt.Errorf("cluster: request %s/%s: %w (after %d attempts, last: %w)", kind, identity, err, attempt, lastErr)
			}
			return nil, fmt.Errorf("cluster: request %s/%s: %w", kind, identity, err)
		}
		pid, err := n.lookup(ctx, identity, kind)
		if err != nil {
			lastErr = err
			continue
		}
		resp, err := n.ask(ctx, identity, kind, pid, a)
		if err == nil {
			v, err := n.reg.DecodeReply(resp)
			if err != nil {
				return nil, fmt.Errorf("cluster: request %s/%s: %w", kind, identity, err)
			}
			return v, nil
		}
		if ctx.Err() != nil {
			continue // reported at the top of the loop
		}
		switch {
		case errors.Is(err, errOwnerGone), errors.Is(err, errOwnerMoved), errors.Is(err, errReplyPathReset), errors.Is(err, errAddressReset),
			errors.Is(err, actor.ErrDeadLetter), errors.Is(err, remote.ErrDeadLetter),
			errors.Is(err, actor.ErrTimeout), errors.Is(err, remote.ErrTimeout):
			// Stale PID: the activation stopped, moved, or its node died.
			if errors.Is(err, errOwnerGone) {
				n.stats.ownerLost.Add(1)
			}
			n.cluster.PidCache.RemoveByValue(identity, kind, pid)
			n.log.Debug().Err(err).Str("identity", identity).Str("kind", kind).Str("pid", pid.String()).
				Int("attempt", attempt+1).Msg("request attempt failed, retrying")
			lastErr = err
		default:
			return nil, fmt.Errorf("cluster: request %s/%s: %w", kind, identity, err)
		}
	}
}

// lookup resolves the identity's activation: the PID cache, else disthash
// (which asks the owner to activate it). The lookup is abandoned when ctx
// ends or a member leaves (the owner may have been the one).
func (n *Node) lookup(ctx context.Context, identity, kind string) (*actor.PID, error) {
	if pid, ok := n.cluster.PidCache.Get(identity, kind); ok && pid != nil {
		return pid, nil
	}
	gone := n.provider.departures()
	ch := make(chan *actor.PID, 1)
	go func() { ch <- n.cluster.Get(identity, kind) }()
	select {
	case pid := <-ch:
		if pid == nil {
			return nil, ErrNoActivation
		}
		n.cluster.PidCache.Set(identity, kind, pid)
		return pid, nil
	case <-gone:
		return nil, fmt.Errorf("lookup: %w", errOwnerGone)
	case <-ctx.Done():
		return nil, ErrNoActivation
	}
}

// ask sends the envelope to pid, the activation of kind/identity, and waits for the reply, for ctx's
// deadline, until pid's member leaves the topology, or until the topology gives the identity to a member
// at another address (errOwnerMoved).
func (n *Node) ask(ctx context.Context, identity, kind string, pid *actor.PID, a any) (any, error) {
	gone := n.provider.departures() // before the membership check: no gap
	changed := n.provider.Changed() // before the ownership check: no gap
	sent := time.Now()
	// A PID cached before a member joined names an activation that disthash is stopping: protoactor drops
	// the cache entries of members that leave, not those of activations that move to a member that joins.
	moved := func() bool {
		owner := n.provider.ownerAddress(identity, kind)
		return owner != "" && owner != pid.Address
	}
	if moved() {
		return nil, errOwnerMoved
	}
	// The owner is the member (by id, not by address) that held pid when the request left: a node killed
	// and restarted on the same address is a new member with a new id, which never answers for the old
	// one's activations, so a request the dead process took with it must be abandoned when the old id
	// leaves even though the address is in the topology again. While both are in the topology, the address
	// names either; a request to it is abandoned (and retried on a fresh lookup) when any member with that
	// address leaves: requests are retried anyway when an owner leaves, and one the old process took would
	// otherwise wait for its whole deadline (a minute for an actor's request to a peer).
	local := pid.Address == n.system.Address()
	owner, ok := n.provider.memberAt(pid.Address)
	if !local && !ok {
		return nil, errOwnerGone
	}
	dl, _ := ctx.Deadline() // always set by Request
	left := time.Until(dl)
	if left <= 0 {
		return nil, context.DeadlineExceeded
	}
	// This node dropped a member at the owner's address, or at its own, shortly before: the connections to
	// that address may close after the request left, with the request or its reply queued (replyPathSettle).
	var settled <-chan time.Time
	settledErr := errReplyPathReset
	if !local {
		var until time.Time
		if at, ok := n.provider.lastAddressLeft(pid.Address); ok && at.Add(replyPathSettle).After(sent) {
			until, settledErr = at.Add(replyPathSettle), errAddressReset
		}
		if at, ok := n.provider.lastAddressLeft(n.system.Address()); ok && at.Add(replyPathSettle).After(sent) &&
			at.Add(replyPathSettle).After(until) {
			until, settledErr = at.Add(replyPathSettle), errReplyPathReset
		}
		if !until.IsZero() {
			t := time.NewTimer(time.Until(until))
			defer t.Stop()
			settled = t.C
		}
	}
	f := n.system.Root.RequestFuture(pid, a, left)
	type result struct {
		v   any
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f.Result()
		ch <- result{v, err}
	}()
	for {
		select {
		case r := <-ch:
			if r.err != nil {
				return nil, r.err
			}
			return r.v, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-settled:
			return nil, settledErr
		case <-gone:
			if !local && (!n.provider.hasMember(owner) || n.provider.addressLeftSince(pid.Address, sent)) {
				return nil, errOwnerGone
			}
			if !local && n.provider.addressLeftSince(n.system.Address(), sent) {
				return nil, errReplyPathReset
			}
			gone = n.provider.departures()
		case <-changed:
			if moved() {
				return nil, errOwnerMoved
			}
			changed = n.provider.Changed()
		}
	}
}

// Send delivers msg to the virtual actor kind/identity without waiting for
// a reply (activating the identity if needed). It returns once the message
// is handed to the transport: delivery is at-most-once and unconfirmed; use
// Request when the outcome matters.
func (n *Node) Send(ctx context.Context, identity, kind string, msg any) error {
	timeout, err := requestTimeout(ctx, n.cfg.RequestTimeout)
	if err != nil {
		return fmt.Errorf("cluster: send %s/%s: %w", kind, identity, err)
	}
	a, err := n.reg.Wrap(msg)
	if err != nil {
		return fmt.Errorf("cluster: send %s/%s: %w", kind, identity, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		pid, err := n.lookup(ctx, identity, kind)
		if err == nil {
			n.system.Root.Send(pid, a)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: send %s/%s: %w: %w", kind, identity, ctx.Err(), err)
		case <-time.After(min(time.Duration(attempt+1)*50*time.Millisecond, 500*time.Millisecond)):
		}
	}
}

// SpawnNamed starts a plain (non-virtual) actor on this node under a fixed
// name, with the envelope middleware, so that other nodes can reach it at
// MemberPID(member, name): for example a per-node GPU actor.
func (n *Node) SpawnNamed(props *actor.Props, name string) (*actor.PID, error) {
	pid, err := n.system.Root.SpawnNamed(n.reg.WithEnvelope(props), name)
	if err != nil {
		return nil, fmt.Errorf("cluster: spawn %q: %w", name, err)
	}
	return pid, nil
}

// SendPID delivers msg to a plain actor by PID (for example a named
// per-node actor) without waiting: at most once, unconfirmed.
func (n *Node) SendPID(pid *actor.PID, msg any) error {
	a, err := n.reg.Wrap(msg)
	if err != nil {
		return fmt.Errorf("cluster: send to %s: %w", pid, err)
	}
	n.system.Root.Send(pid, a)
	return nil
}

// MemberPID is the PID of the actor spawned with SpawnNamed(…, name) on
// member m.
func MemberPID(m Member, name string) *actor.PID {
	return actor.NewPID(m.Address(), name)
}

// RequestPID sends msg to a plain actor by PID (for example a named per-node
// actor) and returns the unwrapped reply; see Registry.RequestPID.
func (n *Node) RequestPID(ctx context.Context, pid *actor.PID, msg any) (any, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, n.cfg.RequestTimeout)
		defer cancel()
	}
	return n.reg.RequestPID(ctx, n.system.Root, pid, msg)
}

// Stop leaves the cluster and stops the node; it is idempotent.
//
// Graceful: leave the gossip first (peers drop the node at once and move its
// identities), stop the local activations (they receive Stopping/Stopped),
// then stop the remote, letting in-flight gRPC streams finish for a moment.
// Not graceful: like a crash as far as peers can tell: gossip and gRPC stop
// without a word and peers notice through failure detection.
//
// ctx bounds the graceful steps that wait on others: protoactor waits up to
// 10 s for the local activations to stop (one blocked in a call, as on a
// frozen object store, never takes the stop) and up to 10 s more for the gRPC
// streams. Once ctx ends Stop waits for neither: the remote is stopped at once
// and the activations are left to the actor system's end (their state is
// durable; their next activation elsewhere reloads it). protoactor gives no
// way to cut its own wait for the activations short, so that one goroutine
// outlives Stop by up to 10 s (it only waits on a future and logs). The
// gossip leave itself is bounded (2 s) and still broadcast, so that peers
// drop the node at once rather than after failure detection. A stop cut
// short returns an error wrapping ctx's.
func (n *Node) Stop(ctx context.Context, graceful bool) error {
	n.stopOnce.Do(func() {
		n.stopErr = n.provider.Shutdown(graceful)
		cut := false
		if graceful {
			stopped := make(chan struct{})
			go func() {
				defer close(stopped)
				n.cluster.IdentityLookup.Shutdown()
			}()
			select {
			case <-stopped:
			case <-ctx.Done():
				n.log.Warn().Msg("local activations still stopping when the shutdown's time ran out: stopping without them")
				cut = true
				n.stopErr = errors.Join(n.stopErr, fmt.Errorf("cluster stop: local activations left stopping: %w", context.Cause(ctx)))
			}
		}
		if graceful {
			// Graceful even when ctx is already over: that stop also closes the endpoints' client connections,
			// whose goroutines would otherwise outlive the node (and race with the next node's gRPC logger
			// set-up in the same process); its wait for the streams is cut below at once.
			stopped := make(chan struct{})
			go func() {
				defer close(stopped)
				n.cluster.Remote.Shutdown(true)
			}()
			select {
			case <-stopped:
			case <-ctx.Done():
				// gRPC's Stop ends a GracefulStop in progress, so the goroutine above returns at once.
				n.cluster.Remote.Shutdown(false)
				<-stopped
				cut = true
				n.stopErr = errors.Join(n.stopErr, fmt.Errorf("cluster stop: gRPC streams cut: %w", context.Cause(ctx)))
			}
		} else {
			n.cluster.Remote.Shutdown(false)
		}
		n.system.Shutdown()
		n.log.Info().Bool("graceful", graceful).Bool("cut_short", cut).Msg("cluster node stopped")
	})
	return n.stopErr
}

// Identity returns the cluster identity of a virtual actor, or "" for an
// actor that is not a cluster activation.
func Identity(ctx actor.Context) (id string) {
	defer func() {
		if recover() != nil { // protoactor type-asserts a missing extension
			id = ""
		}
	}()
	if ci := pcluster.GetClusterIdentity(ctx); ci != nil {
		return ci.Identity
	}
	return ""
}
