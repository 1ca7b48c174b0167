package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"maps"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/hashicorp/memberlist"
	"github.com/rs/zerolog"
)

// FailureDetection holds memberlist's failure-detector timings.
//
// A dead node is declared dead after it fails a probe (up to ProbeInterval
// until it is probed, then ProbeTimeout plus the indirect and TCP probes that
// fill the rest of the interval) and then stays suspect for
// SuspicionMult × ProbeInterval (× log10(n) from 10 nodes on). With
// SuspicionMult 2, memberlist expects no confirmations from other members, so
// the suspicion timeout is that minimum whatever the cluster size.
type FailureDetection struct {
	ProbeInterval  time.Duration
	ProbeTimeout   time.Duration
	SuspicionMult  int
	GossipInterval time.Duration
}

// DefaultFailureDetection notices a killed node in about 2 s on a LAN:
// 0-0.5 s until it is probed, 0.5 s of failed probes, 1 s of suspicion,
// then the gossip of its death (measured 1.6-2.5 s on 127.0.0.1 after a
// SIGKILL, with a busy 2-core machine and the race detector).
// The research measured 1.0 s with 200ms/100ms/2/50ms; those timings were
// not taken because a 100 ms probe timeout is within the GC and scheduling
// pauses of a busy 2-core node (and of the race detector), where it would
// produce false suspicions, and every false "dead" costs the node its id
// (protoactor blocks it forever) and a restart. 250 ms leaves margin while
// keeping detection near the 2 s target. Memberlist's Lifeguard awareness
// stretches these timeouts further on a node that sees itself degraded.
func DefaultFailureDetection() FailureDetection {
	return FailureDetection{
		ProbeInterval:  500 * time.Millisecond,
		ProbeTimeout:   250 * time.Millisecond,
		SuspicionMult:  2,
		GossipInterval: 100 * time.Millisecond,
	}
}

// DetectionTime is about the longest the healthy (HealthScore 0) survivors of a cluster of members
// nodes take to declare a crashed member dead on an idle machine (give or
// take timer delays): up to one ProbeInterval until the member is probed, one
// more for the failed direct, indirect and TCP probes (they fill the
// interval), the suspicion, and one GossipInterval for the death to reach the
// others. The suspicion lasts SuspicionMult × ProbeInterval (× log10 of the
// members from 10 on); when SuspicionMult - 2 independent confirmations can
// be expected (members - 2 ≥ SuspicionMult - 2 ≥ 1) it starts at 6 times that
// (memberlist's SuspicionMaxTimeoutMult) and shrinks as they come, so the
// worst case is the 6 times (the usual case, with every survivor confirming,
// is near the 1 time). Zero fields take DefaultFailureDetection's values, as
// Start does. Until then, a request to an actor the member hosted finds no
// answer: a caller that must ride through a node's death waits this long.
func (f FailureDetection) DetectionTime(members int) time.Duration {
	f = f.withDefaults()
	scale := math.Max(1, math.Log10(float64(max(1, members))))
	suspicion := time.Duration(float64(time.Duration(f.SuspicionMult)*f.ProbeInterval) * scale)
	if k := f.SuspicionMult - 2; k >= 1 && members-2 >= k {
		suspicion *= 6
	}
	return 2*f.ProbeInterval + suspicion + f.GossipInterval
}

func (f FailureDetection) withDefaults() FailureDetection {
	d := DefaultFailureDetection()
	if f.ProbeInterval <= 0 {
		f.ProbeInterval = d.ProbeInterval
	}
	if f.ProbeTimeout <= 0 {
		f.ProbeTimeout = d.ProbeTimeout
	}
	if f.SuspicionMult <= 0 {
		f.SuspicionMult = d.SuspicionMult
	}
	if f.GossipInterval <= 0 {
		f.GossipInterval = d.GossipInterval
	}
	return f
}

// ProviderConfig configures a MemberlistProvider.
type ProviderConfig struct {
	// NodeName is the operator's name for the node (stable across restarts).
	NodeName string
	// BindHost is the gossip bind address (TCP and UDP), e.g. "0.0.0.0".
	BindHost string
	// AdvertiseHost is the gossip address other nodes use; empty means
	// memberlist's choice (BindHost, or a private IP when BindHost is
	// unspecified).
	AdvertiseHost string
	// GossipPort is the gossip port; 0 picks a free one (see GossipAddr).
	GossipPort int
	// Join lists host:port gossip addresses of existing members. Empty means
	// this node starts a new cluster.
	Join []string
	// JoinTimeout bounds the retries of Join when none of the addresses
	// answers (default 10 s). The node fails to start after it.
	JoinTimeout time.Duration
	// Roles, Capacity and the GPU inventory go into the node's metadata.
	Roles    []Role
	Capacity int
	// Free is the free slots per work class at start (see NodeMeta.Free).
	Free map[string]int
	// LowDisk is NodeMeta.LowDisk at start.
	LowDisk   bool
	GPUs      int
	GPUMemory uint64
	// Label separates clusters that share a network: memberlist drops
	// packets with another label. Default "filigrane".
	Label string
	// FailureDetection timings; zero fields take DefaultFailureDetection.
	FailureDetection FailureDetection
	// GossipKey, when set, encrypts and authenticates gossip (AES-GCM;
	// 16, 24 or 32 bytes). All members must use the same key.
	GossipKey []byte
	// Logger receives memberlist's and the provider's logs.
	Logger zerolog.Logger
	// OnBlocked is called once, from a goroutine of the provider, when this
	// node learns that the cluster has blocked its id. The node cannot serve
	// again under that id; the caller should stop it and start a new one.
	OnBlocked func(reason string)
}

// Member is one node as seen through gossip.
type Member struct {
	NodeMeta
	// GossipAddr is the member's memberlist address, host:port.
	GossipAddr string
	// Self is true for the local node.
	Self bool
}

// MemberlistProvider is a protoactor ClusterProvider backed by memberlist.
//
// Membership comes from memberlist's events; the provider keeps its own map
// of members (memberlist calls the event delegate with its node lock held, so
// the delegate only records and signals) and a goroutine publishes the map to
// protoactor with MemberList.UpdateClusterTopology. It republishes every
// second as well, so that members blocked by protoactor's own gossip
// (expired heartbeats) leave the topology without a memberlist event.
type MemberlistProvider struct {
	cfg ProviderConfig
	log zerolog.Logger

	// startCtx, when set by Node, bounds and cancels the initial join.
	startCtx context.Context

	mu       sync.Mutex
	cluster  *pcluster.Cluster
	ml       *memberlist.Memberlist
	self     NodeMeta
	selfName string // memberlist name: "<NodeName>/<id>"
	metaB    []byte
	members  map[string]memberEntry // by memberlist name
	ignored  map[string]string      // gossip members with unusable metadata: name -> why
	// published is what the last publish gave protoactor (plus clients).
	published []Member
	// leftCh is closed (and replaced) when a publish drops a member.
	leftCh chan struct{}
	// departed holds the members a publish dropped, by id: a member id is never reused (a restarted
	// process is a new member), so a departed id stays departed. Entries older than departedMemory are
	// forgotten.
	departed map[string]departure
	// changedCh is closed (and replaced) when a publish changes Members().
	changedCh chan struct{}
	// owners places identities over the published topology exactly as protoactor's disthash does (the
	// rendezvous hash of the members' remote addresses, per kind), so that a request can tell that the
	// activation it was sent to has been moved to another member.
	owners   *pcluster.Rendezvous
	notified map[string]time.Time // last blocked notice sent, by member id
	// failed holds the peers memberlist dropped (declared dead, or left), by member id, for
	// failedNoticeFor: each publish tells them they are blocked (see publish), so that a peer that was only
	// frozen learns it from the notices queued in its socket while it was, as soon as it runs again.
	failed  map[string]failedPeer
	started bool

	kick         chan struct{}
	exec         chan func() // runs on the publisher goroutine (tests)
	capKick      chan struct{}
	stop         chan struct{}
	wg           sync.WaitGroup
	shutdownOnce sync.Once
	blockedOnce  sync.Once
}

type memberEntry struct {
	meta NodeMeta
	name string
	addr net.IP
	port uint16
}

var _ pcluster.ClusterProvider = (*MemberlistProvider)(nil)

// gossipLogger is memberlist's logger: its lines name component "memberlist" (memberlistLogger) and the node,
// built from the configured logger rather than p.log, whose component would make the key appear twice.
func (p *MemberlistProvider) gossipLogger() *log.Logger {
	return memberlistLogger(p.cfg.Logger.With().Str("node", p.cfg.NodeName).Logger())
}

// NewMemberlistProvider validates cfg and returns an unstarted provider.
func NewMemberlistProvider(cfg ProviderConfig) (*MemberlistProvider, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("cluster provider: node name is required")
	}
	if cfg.BindHost == "" {
		return nil, errors.New("cluster provider: bind host is required")
	}
	if cfg.GossipPort < 0 || cfg.GossipPort > 65535 {
		return nil, fmt.Errorf("cluster provider: gossip port %d out of range", cfg.GossipPort)
	}
	for _, r := range cfg.Roles {
		if !r.valid() {
			return nil, fmt.Errorf("cluster provider: unknown role %q", r)
		}
	}
	if cfg.Capacity < 0 {
		return nil, fmt.Errorf("cluster provider: negative capacity %d", cfg.Capacity)
	}
	switch len(cfg.GossipKey) {
	case 0, 16, 24, 32:
	default:
		return nil, fmt.Errorf("cluster provider: gossip key of %d bytes, want 16, 24 or 32", len(cfg.GossipKey))
	}
	if cfg.JoinTimeout <= 0 {
		cfg.JoinTimeout = 10 * time.Second
	}
	if cfg.Label == "" {
		cfg.Label = "filigrane"
	}
	cfg.FailureDetection = cfg.FailureDetection.withDefaults()
	if cfg.FailureDetection.ProbeTimeout >= cfg.FailureDetection.ProbeInterval {
		return nil, fmt.Errorf("cluster provider: probe timeout %v must be shorter than the probe interval %v",
			cfg.FailureDetection.ProbeTimeout, cfg.FailureDetection.ProbeInterval)
	}
	return &MemberlistProvider{
		cfg:       cfg,
		log:       cfg.Logger.With().Str("component", "cluster-provider").Str("node", cfg.NodeName).Logger(),
		members:   make(map[string]memberEntry),
		ignored:   make(map[string]string),
		notified:  make(map[string]time.Time),
		failed:    make(map[string]failedPeer),
		kick:      make(chan struct{}, 1),
		exec:      make(chan func()),
		leftCh:    make(chan struct{}),
		departed:  make(map[string]departure),
		changedCh: make(chan struct{}),
		capKick:   make(chan struct{}, 1),
		stop:      make(chan struct{}),
	}, nil
}

// StartMember joins the cluster as a member hosting the cluster's kinds.
func (p *MemberlistProvider) StartMember(c *pcluster.Cluster) error {
	return p.start(c, false)
}

// StartClient joins the gossip as a client: it sees the members and can call
// grains, hosts nothing, and is left out of every node's topology.
func (p *MemberlistProvider) StartClient(c *pcluster.Cluster) error {
	return p.start(c, true)
}

func (p *MemberlistProvider) start(c *pcluster.Cluster, client bool) error {
	host, port, err := c.ActorSystem.GetHostPort()
	if err != nil {
		return fmt.Errorf("cluster provider: remote address: %w", err)
	}
	kinds := []string{}
	if !client {
		kinds = c.GetClusterKinds()
		slices.Sort(kinds)
	}
	self := NodeMeta{
		Version:   MetaVersion,
		ID:        c.ActorSystem.ID,
		Name:      p.cfg.NodeName,
		Roles:     slices.Clone(p.cfg.Roles),
		Host:      host,
		Port:      port,
		Kinds:     kinds,
		Capacity:  p.cfg.Capacity,
		Free:      maps.Clone(p.cfg.Free),
		GPUs:      p.cfg.GPUs,
		GPUMemory: p.cfg.GPUMemory,
		LowDisk:   p.cfg.LowDisk,
		Client:    client,
	}
	metaB, err := EncodeMeta(self)
	if err != nil {
		return fmt.Errorf("cluster provider: %w", err)
	}

	p.mu.Lock()
	if p.started {
		p.mu.Unlock()
		return errors.New("cluster provider: already started")
	}
	p.started = true
	p.cluster = c
	p.self = self
	p.metaB = metaB
	// The memberlist name is unique per ActorSystem: protoactor blocks an id
	// forever once it left the topology, so a restarted process must join as
	// a new member, and memberlist must not see it as the old one coming
	// back from another address (which it rejects as a name conflict).
	p.selfName = p.cfg.NodeName + "/" + self.ID
	p.mu.Unlock()

	mc := memberlist.DefaultLANConfig()
	mc.Name = p.selfName
	mc.BindAddr = p.cfg.BindHost
	mc.BindPort = p.cfg.GossipPort
	mc.AdvertisePort = p.cfg.GossipPort
	if p.cfg.AdvertiseHost != "" {
		mc.AdvertiseAddr = p.cfg.AdvertiseHost
	}
	fd := p.cfg.FailureDetection
	mc.ProbeInterval = fd.ProbeInterval
	mc.ProbeTimeout = fd.ProbeTimeout
	mc.SuspicionMult = fd.SuspicionMult
	mc.GossipInterval = fd.GossipInterval
	// Join and push/pull use TCP; a dead seed should not stall start-up for
	// the 10 s LAN default.
	mc.TCPTimeout = 3 * time.Second
	mc.PushPullInterval = 15 * time.Second
	mc.Label = p.cfg.Label
	if len(p.cfg.GossipKey) > 0 {
		mc.SecretKey = slices.Clone(p.cfg.GossipKey)
	}
	mc.Delegate = (*mlDelegate)(p)
	mc.Events = (*mlEvents)(p)
	mc.Logger = p.gossipLogger()

	ml, err := memberlist.Create(mc)
	if err != nil {
		return fmt.Errorf("cluster provider: start gossip on %s:%d: %w", p.cfg.BindHost, p.cfg.GossipPort, err)
	}
	p.mu.Lock()
	p.ml = ml
	p.mu.Unlock()

	p.wg.Add(2)
	go p.publishLoop()
	go p.capacityLoop()
	if len(p.cfg.Join) > 0 {
		// Not in wg: a join to a frozen seed takes TCPTimeout, and Shutdown need not wait for it.
		go p.rejoinLoop(ml)
	}

	if len(p.cfg.Join) > 0 {
		if err := p.join(); err != nil {
			p.shutdown(false)
			return err
		}
	}
	p.log.Info().Str("gossip_addr", p.GossipAddr()).Str("id", self.ID).Bool("client", client).
		Int("members", ml.NumMembers()).Msg("joined gossip")
	return nil
}

// join does the initial join of ProviderConfig.Join, bounded by JoinTimeout
// and the start context.
func (p *MemberlistProvider) join() error {
	ctx := p.startCtx
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.JoinTimeout)
	defer cancel()
	return p.Join(ctx, p.cfg.Join)
}

// Join contacts the given gossip addresses (host:port) and merges this
// node's view with theirs. It retries until one address answers or ctx
// ends: seeds that are restarting at the same moment are normal in a rolling
// restart.
func (p *MemberlistProvider) Join(ctx context.Context, addrs []string) error {
	p.mu.Lock()
	ml := p.ml
	p.mu.Unlock()
	if ml == nil {
		return errors.New("cluster provider: join before start")
	}
	if len(addrs) == 0 {
		return errors.New("cluster provider: join: no addresses")
	}
	for attempt := 1; ; attempt++ {
		n, err := ml.Join(addrs)
		if n > 0 {
			if err != nil {
				p.log.Warn().Err(err).Int("contacted", n).Msg("some join addresses did not answer")
			}
			return nil
		}
		p.log.Warn().Err(err).Int("attempt", attempt).Strs("join", addrs).Msg("join failed, retrying")
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster provider: join %v: %w (last error: %v)", addrs, ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// rejoinInterval is how often a node alone in its gossip contacts its seeds again.
const rejoinInterval = 2 * time.Second

// rejoinLoop contacts the seeds again while this node is the only member it knows of. The initial join
// succeeds as soon as one address answers, and the seed list may name this node itself: a node restarted
// while its peers were frozen or stalled (their push-pull answers timed out) joined only itself, and
// learned of them only when one of them pushed its state to it (memberlist's push-pull, every 15 s or more),
// or never, when none of them had read its join either (2026-11-28: a restarted node was not seen in 16 s).
func (p *MemberlistProvider) rejoinLoop(ml *memberlist.Memberlist) {
	t := time.NewTicker(rejoinInterval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		if ml.NumMembers() > 1 {
			continue
		}
		_, err := ml.Join(p.cfg.Join)
		if m := ml.NumMembers(); m > 1 {
			p.log.Info().Int("members", m).Msg("was alone in the gossip: found the others through the seeds")
		} else {
			p.log.Debug().Err(err).Msg("alone in the gossip: no seed answered")
		}
	}
}

// Shutdown leaves the gossip. Graceful broadcasts the leave first, so that
// peers drop the node at once instead of after failure detection.
func (p *MemberlistProvider) Shutdown(graceful bool) error {
	return p.shutdown(graceful)
}

func (p *MemberlistProvider) shutdown(graceful bool) error {
	var err error
	p.shutdownOnce.Do(func() {
		close(p.stop)
		p.wg.Wait()
		p.mu.Lock()
		ml := p.ml
		p.mu.Unlock()
		if ml == nil {
			return
		}
		if graceful {
			if lerr := ml.Leave(2 * time.Second); lerr != nil {
				err = fmt.Errorf("cluster provider: leave: %w", lerr)
			}
		}
		if serr := ml.Shutdown(); serr != nil && err == nil {
			err = fmt.Errorf("cluster provider: shutdown gossip: %w", serr)
		}
	})
	return err
}

// GossipAddr is this node's memberlist address (host:port), "" before start.
func (p *MemberlistProvider) GossipAddr() string {
	p.mu.Lock()
	ml := p.ml
	p.mu.Unlock()
	if ml == nil {
		return ""
	}
	n := ml.LocalNode()
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
}

// HealthScore is memberlist's Lifeguard awareness of this node: 0 when healthy; each point (up to 7) comes
// from a probe of its that went without the answers it expected, or from having to refute a suspicion of
// itself, and stretches this node's probe interval and timeout by one more base interval, so that a node
// that cannot keep time (starved of CPU) accuses others less; each probe answered in time takes a point off.
// A degraded node detects a crashed peer later than FailureDetection.DetectionTime. -1 before start.
func (p *MemberlistProvider) HealthScore() int {
	p.mu.Lock()
	ml := p.ml
	p.mu.Unlock()
	if ml == nil {
		return -1
	}
	return ml.GetHealthScore()
}

// Members returns the members of the topology last given to protoactor
// (alive or suspect in memberlist, not blocked, not an earlier incarnation of
// this node at its gossip address; clients included and
// flagged), sorted by name then id, the local node included. Because it is
// the topology protoactor routes with, a caller that sees every node here
// knows this node's identity placement already accounts for them.
func (p *MemberlistProvider) Members() []Member {
	p.mu.Lock()
	out := make([]Member, len(p.published))
	for i, m := range p.published {
		m.Roles = slices.Clone(m.Roles)
		m.Free = maps.Clone(m.Free)
		m.Kinds = slices.Clone(m.Kinds)
		out[i] = m
	}
	p.mu.Unlock()
	return out
}

// Ignored returns the gossip members that are kept out of the topology
// because their metadata is unusable (another NodeMeta version, another
// program on the gossip port), by memberlist name, with the reason.
func (p *MemberlistProvider) Ignored() map[string]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]string, len(p.ignored))
	for k, v := range p.ignored {
		out[k] = v
	}
	return out
}

func sortMembers(ms []Member) {
	slices.SortFunc(ms, func(a, b Member) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// SetCapacity records the free worker capacity and gossips it. It does not
// block: updates are coalesced and broadcast by a provider goroutine, at most
// every capacityMinInterval, because capacity changes with every job.
func (p *MemberlistProvider) SetCapacity(n int) error {
	if n < 0 {
		return fmt.Errorf("cluster provider: negative capacity %d", n)
	}
	return p.setMeta(func(m *NodeMeta) { m.Capacity = n }, func(c *ProviderConfig) { c.Capacity = n })
}

// SetFree records the free worker slots per work class (Capacity becomes
// their sum) and gossips them, coalesced like SetCapacity.
func (p *MemberlistProvider) SetFree(free map[string]int) error {
	total := 0
	for _, n := range free {
		total += n
	}
	free = maps.Clone(free)
	return p.setMeta(func(m *NodeMeta) { m.Free, m.Capacity = free, total },
		func(c *ProviderConfig) { c.Free, c.Capacity = free, total })
}

// SetLowDisk records whether the node is low on disk space (NodeMeta.LowDisk) and gossips it, coalesced
// like SetCapacity.
func (p *MemberlistProvider) SetLowDisk(low bool) error {
	return p.setMeta(func(m *NodeMeta) { m.LowDisk = low }, func(c *ProviderConfig) { c.LowDisk = low })
}

func (p *MemberlistProvider) setMeta(change func(*NodeMeta), before func(*ProviderConfig)) error {
	p.mu.Lock()
	if !p.started {
		before(&p.cfg)
		p.mu.Unlock()
		return nil
	}
	meta := p.self
	change(&meta)
	b, err := EncodeMeta(meta)
	if err != nil {
		p.mu.Unlock()
		return fmt.Errorf("cluster provider: set capacity: %w", err)
	}
	p.self, p.metaB = meta, b
	p.mu.Unlock()
	select {
	case p.capKick <- struct{}{}:
	default:
	}
	return nil
}

const capacityMinInterval = 100 * time.Millisecond

func (p *MemberlistProvider) capacityLoop() {
	defer p.wg.Done()
	for {
		select {
		case <-p.stop:
			return
		case <-p.capKick:
		}
		// UpdateNode re-reads NodeMeta, so the latest capacity goes out even
		// when several SetCapacity calls happened since the kick. It waits
		// until the update has been retransmitted enough times (several
		// gossip rounds); nothing here needs that, so the wait is short and
		// its timeout (the update stays queued for gossip) is expected.
		_ = p.ml.UpdateNode(10 * time.Millisecond)
		select {
		case <-p.stop:
			return
		case <-time.After(capacityMinInterval):
		}
	}
}

func (p *MemberlistProvider) signal() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// blockedFunc returns a predicate over protoactor's block list, or one that
// is always false before the cluster's remote exists.
func (p *MemberlistProvider) blockedFunc() func(id string) bool {
	p.mu.Lock()
	c := p.cluster
	p.mu.Unlock()
	if c == nil || c.Remote == nil {
		return func(string) bool { return false }
	}
	bl := c.Remote.BlockList()
	// Len takes the block list's lock; IsBlocked does not (upstream), so
	// taking it once orders our reads after earlier Block calls.
	_ = bl.Len()
	return bl.IsBlocked
}

const republishInterval = time.Second

// publishLoop pushes the member map to protoactor whenever it changes and
// every republishInterval.
func (p *MemberlistProvider) publishLoop() {
	defer p.wg.Done()
	t := time.NewTicker(republishInterval)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-p.kick:
		case <-t.C:
		case f := <-p.exec:
			f()
			continue // f publishes itself
		}
		p.publish()
	}
}

// onPublisher runs f on the publisher goroutine, then publishes, and
// returns after both. protoactor reads its block list without a lock from
// that goroutine (inside UpdateClusterTopology), so tests that change the
// block list do it there.
func (p *MemberlistProvider) onPublisher(f func()) {
	done := make(chan struct{})
	select {
	case p.exec <- func() { f(); p.publish(); close(done) }:
		<-done
	case <-p.stop:
	}
}

func (p *MemberlistProvider) publish() {
	blocked := p.blockedFunc()
	// Taken before p.mu: LocalNode takes memberlist's node lock, under which memberlist calls upsert, which
	// takes p.mu.
	selfGossip := p.GossipAddr()
	p.mu.Lock()
	c, ml, selfID := p.cluster, p.ml, p.self.ID
	members := make([]*pcluster.Member, 0, len(p.members))
	snapshot := make([]Member, 0, len(p.members))
	var notify []memberEntry
	now := time.Now()
	for _, e := range p.members {
		gossipAddr := net.JoinHostPort(e.addr.String(), strconv.Itoa(int(e.port)))
		if e.meta.ID != selfID && gossipAddr == selfGossip {
			// An earlier incarnation of this process (declared dead, blocked, restarted on the same
			// ports): its refutation, sent before it stopped, can bring it back alive in the others' gossip
			// for as long as they take to declare it dead again (up to DetectionTime with one member more).
			// Its address is ours now, so it cannot be a peer: left out, it is not counted or routed to.
			continue
		}
		if e.meta.ID != selfID && blocked(e.meta.ID) {
			// A peer we blocked is gossiping again (it was declared dead and
			// refuted, or protoactor expired its heartbeat while gossip still
			// worked). Tell it, so it restarts instead of lingering unused.
			if now.Sub(p.notified[e.meta.ID]) >= 2*time.Second {
				p.notified[e.meta.ID] = now
				notify = append(notify, e)
			}
			continue
		}
		snapshot = append(snapshot, Member{
			NodeMeta:   e.meta,
			GossipAddr: gossipAddr,
			Self:       e.meta.ID == selfID,
		})
		if e.meta.Client {
			continue
		}
		members = append(members, &pcluster.Member{
			Id:    e.meta.ID,
			Host:  e.meta.Host,
			Port:  int32(e.meta.Port),
			Kinds: slices.Clone(e.meta.Kinds),
		})
	}
	// Forget notices to members that are gone from gossip.
	var failed []failedPeer
	for id, f := range p.failed {
		switch {
		case now.Sub(f.at) > failedNoticeFor:
			delete(p.failed, id)
		case now.Sub(p.notified[id]) >= 2*time.Second:
			p.notified[id] = now
			failed = append(failed, f)
			f.told = true
			p.failed[id] = f
		}
	}
	for id := range p.notified {
		if _, ok := p.failed[id]; !ok && !p.hasMemberIDLocked(id) {
			delete(p.notified, id)
		}
	}
	p.mu.Unlock()

	if blocked(selfID) {
		p.reportBlocked("this node's id is in its own block list")
	}
	for _, e := range notify {
		msg := append([]byte(blockedNoticePrefix), e.meta.ID...)
		node := &memberlist.Node{Name: e.name, Addr: e.addr, Port: e.port}
		if err := ml.SendBestEffort(node, msg); err != nil {
			p.log.Debug().Err(err).Str("member", e.name).Msg("blocked notice not sent")
		} else {
			p.log.Warn().Str("member", e.name).Msg("told a blocked member that it is blocked")
		}
	}
	// UpdateClusterTopology blocks the members that left (BlockList.Block, under the list's lock), while
	// protoactor's endpoint reader checks an incoming connection with BlockList.IsBlocked, which takes no lock
	// (upstream, remote/blocklist.go): a connection that arrives during a departure is a data race inside
	// protoactor that nothing here can order (the race detector reported it once in about 20 warm suites, in
	// TestFailover, 2026-11-28). The set is immutable and replaced by one pointer store, so on amd64 a reader
	// sees the old or the new set; fixing it needs the lock upstream.
	c.MemberList.UpdateClusterTopology(members)
	// A peer declared dead may only be frozen (SIGSTOP, a paused VM, a long stall): when it runs again it
	// would serve from its stale activations until its refutation reached the others and their notice came
	// back (10 s in a chaos run, 2026-11-28: a completed batch's archive answered 409 batch_not_started from
	// the old activation). The notices sent now wait in its socket and reach it first. Sent after
	// UpdateClusterTopology, which blocks the members it drops, and only to ids blocked here.
	for _, f := range failed {
		e := f.entry
		if !blocked(e.meta.ID) {
			continue
		}
		msg := append([]byte(blockedNoticePrefix), e.meta.ID...)
		node := &memberlist.Node{Name: e.name, Addr: e.addr, Port: e.port}
		switch err := ml.SendBestEffort(node, msg); {
		case err != nil:
			p.log.Debug().Err(err).Str("member", e.name).Msg("blocked notice to a dropped member not sent")
		case !f.told:
			p.log.Warn().Str("member", e.name).Dur("for", failedNoticeFor).Msg("telling a dropped member that it is blocked, every 2 s")
		}
	}
	sortMembers(snapshot)
	p.mu.Lock()
	still := make(map[string]bool, len(snapshot))
	for _, m := range snapshot {
		still[m.ID] = true
	}
	dropped := false
	for _, m := range p.published {
		if !still[m.ID] && !m.Self {
			p.departed[m.ID] = departure{at: now, addr: m.Address()}
			dropped = true
		}
	}
	if dropped {
		close(p.leftCh)
		p.leftCh = make(chan struct{})
	}
	for id, d := range p.departed {
		if now.Sub(d.at) > departedMemory {
			delete(p.departed, id)
		}
	}
	if !slices.EqualFunc(p.published, snapshot, sameMember) {
		rdv := pcluster.NewRendezvous()
		rdv.UpdateMembers(members)
		p.owners = rdv
		close(p.changedCh)
		p.changedCh = make(chan struct{})
	}
	p.published = snapshot
	p.mu.Unlock()
}

func (p *MemberlistProvider) hasMemberIDLocked(id string) bool {
	for _, e := range p.members {
		if e.meta.ID == id {
			return true
		}
	}
	return false
}

func sameMember(a, b Member) bool {
	return a.ID == b.ID && a.Name == b.Name && a.Capacity == b.Capacity && a.Client == b.Client &&
		maps.Equal(a.Free, b.Free) && a.LowDisk == b.LowDisk &&
		a.Address() == b.Address() && a.GossipAddr == b.GossipAddr &&
		slices.Equal(a.Roles, b.Roles) && slices.Equal(a.Kinds, b.Kinds)
}

// Changed returns a channel that is closed the next time Members() changes
// (a member joins, leaves or changes its metadata, capacity included).
func (p *MemberlistProvider) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changedCh
}

// ownerAddress returns the remote address of the member that owns the activation of kind/identity in the
// published topology (protoactor's disthash placement over the same members), or "" when none is known.
func (p *MemberlistProvider) ownerAddress(identity, kind string) string {
	p.mu.Lock()
	rdv := p.owners
	p.mu.Unlock()
	if rdv == nil {
		return ""
	}
	return rdv.GetByClusterIdentity(&pcluster.ClusterIdentity{Identity: identity, Kind: kind})
}

// departures returns a channel that is closed the next time a member
// leaves the published topology.
func (p *MemberlistProvider) departures() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leftCh
}

// departedMemory is how long a departed member's id is remembered: far longer than any lease or request that
// could name it (a worker's job lease is 30 s by default).
const departedMemory = time.Hour

// departure is when a member was dropped from the published topology, and its remote address: a process
// restarted on the same address joins as a new member while the old one is still in the topology, and a PID
// names an address, not a member.
type departure struct {
	at   time.Time
	addr string
}

// hasLeft reports whether the member with this id was in the published topology and was dropped from it
// (within departedMemory).
func (p *MemberlistProvider) hasLeft(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.departed[id]
	return ok
}

// gone is Node.Gone: the member left, or is not in the published topology while a member of the node named
// name is.
func (p *MemberlistProvider) gone(name, id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.departed[id]; ok {
		return true
	}
	replaced := false
	for _, m := range p.published {
		if m.ID == id {
			return false
		}
		replaced = replaced || (name != "" && m.Name == name)
	}
	return replaced
}

// addressLeftSince reports whether a member with remote address addr was dropped from the topology at or
// after t.
func (p *MemberlistProvider) addressLeftSince(addr string, t time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range p.departed {
		if d.addr == addr && !d.at.Before(t) {
			return true
		}
	}
	return false
}

// lastAddressLeft returns when the latest member with remote address addr was dropped from the topology
// (within departedMemory), and false when none was.
func (p *MemberlistProvider) lastAddressLeft(addr string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var last time.Time
	for _, d := range p.departed {
		if d.addr == addr && d.at.After(last) {
			last = d.at
		}
	}
	return last, !last.IsZero()
}

// memberAt returns the id of the member of the published topology whose
// remote address is addr.
func (p *MemberlistProvider) memberAt(addr string) (id string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.published {
		if m.Address() == addr {
			return m.ID, true
		}
	}
	return "", false
}

// hasMember reports whether the member with this id is in the published
// topology.
func (p *MemberlistProvider) hasMember(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.published {
		if m.ID == id {
			return true
		}
	}
	return false
}

const blockedNoticePrefix = "filigrane-cluster/blocked/"

// failedNoticeFor is how long a peer declared dead is told, every 2 s, that it is blocked: longer than the
// freezes a supervisor leaves a stuck process in. One frozen longer learns it as before, from the notice
// its refuted membership brings.
const failedNoticeFor = 2 * time.Minute

// failedPeer is a peer memberlist dropped, and when.
type failedPeer struct {
	entry memberEntry
	at    time.Time
	told  bool // a notice was sent already (the first is logged)
}

func (p *MemberlistProvider) reportBlocked(reason string) {
	p.blockedOnce.Do(func() {
		p.log.Error().Str("reason", reason).Msg("this node is blocked by the cluster; it must restart with a new actor system")
		if p.cfg.OnBlocked != nil {
			go p.cfg.OnBlocked(reason)
		}
	})
}

// upsert records a member from a memberlist event. It runs under
// memberlist's node lock: no memberlist calls here.
func (p *MemberlistProvider) upsert(n *memberlist.Node) {
	meta, err := DecodeMeta(n.Meta)
	p.mu.Lock()
	if err != nil {
		delete(p.members, n.Name)
		p.ignored[n.Name] = err.Error()
		p.mu.Unlock()
		p.log.Warn().Err(err).Str("member", n.Name).Msg("ignoring member with unusable metadata")
		p.signal()
		return
	}
	p.members[n.Name] = memberEntry{meta: meta, name: n.Name, addr: slices.Clone(n.Addr), port: n.Port}
	delete(p.ignored, n.Name)
	p.mu.Unlock()
	p.signal()
}

func (p *MemberlistProvider) remove(n *memberlist.Node) {
	p.mu.Lock()
	// memberlist does not tell a failure from a leave here (the Node it passes keeps no state), so a member
	// that left gracefully is told too: it has stopped its gossip (a leave is its last step), or ignores the
	// notice while it shuts down (NotifyMsg).
	if e, ok := p.members[n.Name]; ok && e.meta.ID != p.self.ID {
		p.failed[e.meta.ID] = failedPeer{entry: e, at: time.Now()}
	}
	delete(p.members, n.Name)
	delete(p.ignored, n.Name)
	p.mu.Unlock()
	p.signal()
}

// mlEvents is the provider seen as memberlist's EventDelegate.
type mlEvents MemberlistProvider

func (e *mlEvents) NotifyJoin(n *memberlist.Node) {
	(*MemberlistProvider)(e).log.Debug().Str("member", n.Name).Msg("member joined")
	(*MemberlistProvider)(e).upsert(n)
}

func (e *mlEvents) NotifyUpdate(n *memberlist.Node) { (*MemberlistProvider)(e).upsert(n) }

func (e *mlEvents) NotifyLeave(n *memberlist.Node) {
	(*MemberlistProvider)(e).log.Info().Str("member", n.Name).Msg("member left or failed")
	(*MemberlistProvider)(e).remove(n)
}

// mlDelegate is the provider seen as memberlist's Delegate.
type mlDelegate MemberlistProvider

func (d *mlDelegate) NodeMeta(limit int) []byte {
	p := (*MemberlistProvider)(d)
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.metaB) > limit {
		// EncodeMeta enforces MaxMetaSize, so this means memberlist lowered
		// its limit; gossiping no metadata makes peers ignore us loudly
		// instead of memberlist panicking.
		p.log.Error().Int("size", len(p.metaB)).Int("limit", limit).Msg("node metadata over memberlist's limit")
		return nil
	}
	return slices.Clone(p.metaB)
}

func (d *mlDelegate) NotifyMsg(b []byte) {
	p := (*MemberlistProvider)(d)
	id, ok := bytes.CutPrefix(b, []byte(blockedNoticePrefix))
	if !ok {
		return
	}
	select {
	case <-p.stop:
		return // shutting down: a graceful leave's peers tell it what it knows
	default:
	}
	p.mu.Lock()
	self := p.self.ID
	p.mu.Unlock()
	if string(id) == self {
		p.reportBlocked("a peer has blocked this node's id")
	}
}

func (d *mlDelegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *mlDelegate) LocalState(join bool) []byte                { return nil }
func (d *mlDelegate) MergeRemoteState(buf []byte, join bool)     {}
