// Package node assembles one Filigrane node: storage, the actor cluster, the actor kinds and the HTTP
// listeners, and takes them down again in order. `filigrane serve` and the integration tests use it.
package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"filigrane/actors"
	"filigrane/actors/jobstate"
	"filigrane/actors/mediafiles"
	"filigrane/actors/mediakind"
	"filigrane/actors/outbox"
	"filigrane/actors/storagedest"
	"filigrane/actors/sweep"
	"filigrane/actors/webhooks"
	"filigrane/cluster"
	"filigrane/codec"
	"filigrane/gpu"
	apihttp "filigrane/http"
	"filigrane/http/console"
	"filigrane/internal/accounts"
	"filigrane/internal/admin"
	"filigrane/internal/authlimit"
	"filigrane/internal/clientaddr"
	"filigrane/internal/clock"
	"filigrane/internal/egress"
	"filigrane/persistence"
	"filigrane/persistence/diskspace"
	"filigrane/persistence/opcount"
)

const (
	// storeTimeout bounds each storage call an actor makes while handling one message.
	storeTimeout = 10 * time.Second
	// peerTimeoutMembers is the cluster size the actors' wait for a peer allows for (failure detection's
	// suspicion grows with log10 of the members).
	peerTimeoutMembers = 100
	// maxPeerWait caps the part of peerTimeout that waits out failure detection.
	maxPeerWait = time.Minute
)

// peerTimeout bounds a call to an actor that may live on another node: one made by an actor while it handles
// a message (a job actor asking the organization actor to hold credits) or by the API while it serves a
// request. When that node dies, its actors' identities move only once the survivors declare it dead, so the
// wait covers failure detection in a cluster of up to peerTimeoutMembers nodes, plus a storage call of the
// fresh activation; a shorter wait turned a node's death into 503s for requests that would have been served
// (TestTwelveNodes saw one when its victim hosted the organization).
// Detection slower than maxPeerWait (long suspicion timings) is not waited out: such a request answers 503
// with Retry-After rather than hold its client for minutes.
func peerTimeout(fd cluster.FailureDetection) time.Duration {
	return storeTimeout + min(fd.DetectionTime(peerTimeoutMembers), maxPeerWait)
}

// Config is a node's configuration; zero values take the documented defaults.
type Config struct {
	DataDir    string // default ./data
	APIAddr    string // default 127.0.0.1:8080
	UploadAddr string // default 127.0.0.1:8081
	NodeName   string // default: the host name
	// ClusterBind is the memberlist gossip address; port 0 picks a free port. Default 127.0.0.1:0.
	ClusterBind string
	// RemotePort is the actor remote (gRPC) port, on the ClusterBind host; 0 picks a free port.
	RemotePort int
	Join       []string // gossip addresses of existing members
	PlansFile  string   // plan catalog (JSON); empty: built-in defaults
	Logger     zerolog.Logger
	Clock      clock.Clock
	// Bootstrap creates the development organization on the first start of an empty data directory.
	Bootstrap bool
	// CodecKey is the deployment's watermark secret (at least 16 bytes); empty uses codec.DevelopmentKey.
	CodecKey []byte
	// Workers is the number of codec workers of the cpu class, and the CPU tokens shared by the CPU classes;
	// 0 means one per CPU.
	Workers int
	// LongWorkers is the number of workers of the cpu-long class (videos); 0 means half of Workers, at least 1.
	LongWorkers int
	// MaxVideoWork bounds a video job's estimated CPU time of one core (codec/video's EmbedCost and
	// DetectCost), checked when the video is probed; above it the request is refused, 413 video_too_large.
	// 0 means the media table's (45 minutes, half the longest video deadline). Nodes on CPUs slower than the
	// reference machine lower it. A job keeps the bound of the node that accepted it (jobstate.Record.MaxWork):
	// its workers recheck it by that bound, whatever their own.
	MaxVideoWork time.Duration
	// GPUSlots is the workers of the gpu class per device; 0 means DefaultGPUSlots. A device runs many jobs at
	// once (each on its own stream), and placement sends accelerator=gpu jobs to the gpu class first: with one
	// slot a device, a cluster's GPU jobs beyond one a device went to CPU slots, often on nodes without a GPU.
	GPUSlots int
	// DrainTimeout is how long Close lets running attempts finish after the node stopped taking work; those
	// still running then are handed back to their job actors (not counted as attempts) for another node.
	// 0 drains nothing: Close cuts running attempts short and their leases expire (tests, single nodes).
	DrainTimeout time.Duration
	// DrainDelay is how long Close keeps the listeners open after the node began draining (/readyz 503, new
	// work refused with 503, synchronous waits answered 202), so that a load balancer sees the node go
	// unready before its connections are refused. It is part of Close's context (the shutdown grace) and
	// overlaps the work's drain. 0: the listeners close at once (tests).
	DrainDelay time.Duration
	// DecodeMemory is the node's budget for decoding images and parsing PDFs, in bytes, shared by its workers and synchronous
	// detections (actors.DecodeBudget); 0 means actors.DefaultDecodeMemory (half the available memory).
	DecodeMemory int64
	// MinFreeDisk is the free space kept on the data directory's filesystem, in bytes: files are refused
	// below it and writes to Pebble below a quarter of it (persistence/diskspace), answered 503 with
	// Retry-After; 0 keeps none (serve's --min-free-disk defaults to 256 MiB).
	MinFreeDisk uint64
	// DiskGuard, when set, is the data directory's disk guard, used instead of one made from MinFreeDisk
	// (tests hand one whose reserve they change, to make the disk look low and then freed).
	DiskGuard *diskspace.Guard
	// LeaseDuration is a worker's lease on a job attempt; it is renewed at a third of its length. Default 30 s.
	LeaseDuration time.Duration
	// SyncWait is how long a synchronous embed waits before answering 202; 0 means 20 s.
	SyncWait time.Duration
	// S3 is the cluster's shared object storage; nil runs a single node on the data directory alone.
	S3 *S3Config
	// Roles are gossiped to other nodes and decide what the node does (NodeRoles): edge serves HTTP only; api
	// serves HTTP and hosts actors; worker runs the cpu and cpu-long classes, cpu and cpu-long one each, gpu
	// the gpu class (with a device); any role but edge hosts actors. Default DefaultRoles.
	Roles []cluster.Role
	// SweepInterval is how often the sweeper ticks active jobs and purges expired results; 0 means 5 s,
	// a negative value disables the background sweeper (tests call Sweep).
	SweepInterval time.Duration
	// SweepLease is how long the sweeper's lease (one node of a cluster sweeps at a time) lasts after its
	// last renewal, so how long a dead holder keeps the others from sweeping; 0 means 30 s. It must be longer
	// than SweepInterval (the holder renews once a round). Tests that kill and restart a node shorten it.
	SweepLease time.Duration
	// UploadSecret keys the HMAC of signed upload URLs (at least 16 bytes); empty: a random secret kept in the
	// Store under node/upload-secret, so that URLs stay valid across restarts.
	UploadSecret []byte
	// TLSCertFile and TLSKeyFile (PEM), when both set, make both listeners serve HTTPS (Etchv's SDKs refuse
	// http:// upload URLs). Behind a TLS-terminating proxy leave them empty and set PublicUploadURL.
	TLSCertFile, TLSKeyFile string
	// PublicUploadURL is the base of signed upload URLs as clients reach the upload listener; empty:
	// "http://" (or "https://" with TLS) + the upload listener's address.
	PublicUploadURL string
	// WebsiteOrigin is the one browser origin allowed to PUT to upload URLs (CORS); empty: none.
	WebsiteOrigin string
	// MaxDirectEmbed, when above 0, lowers the largest file of a direct embed request (apihttp.Config).
	MaxDirectEmbed int64
	// PublicURL is the base URL clients reach the API at behind a proxy: Location headers are absolute under it
	// (apihttp.Config). Empty: relative Location.
	PublicURL string
	// Conns bounds the connections of each listener (API and upload host) and how long they may stall.
	Conns apihttp.ConnLimits
	// UnknownKeys bounds the store reads that API keys and console session cookies the node does not know may
	// cost: per client address and in flight (zero values: authlimit's defaults).
	UnknownKeys authlimit.Config
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names the client that those per-address
	// limits (and the console's sign-in limit) count against; zero: the connection's address.
	TrustedProxies clientaddr.Proxies
	// GPUStrict refuses accelerator=gpu with 503 when no GPU is ready instead of running it on the CPU.
	GPUStrict bool
	// GPUState, when set, is the accelerator state the API reports and wakes instead of the node's own
	// (tests hand a gpu.Tracker driven by their clock).
	GPUState apihttp.GPUState
	// APIListener and UploadListener, when set, are used instead of listening on APIAddr and UploadAddr
	// (tests hand in-memory listeners); the node closes them. PublicUploadURL is then required unless the
	// upload listener's address is a host:port.
	APIListener, UploadListener net.Listener
	// FailureDetection is memberlist's timings; zero fields take cluster.DefaultFailureDetection.
	FailureDetection cluster.FailureDetection
	// StorageSecretKey (32 bytes) seals the secrets of storage destinations at rest; empty: a key generated
	// into the data directory (storage-secret.key), which suits one node; a cluster must configure one.
	StorageSecretKey []byte
	// AllowPrivateTargets lets customer-chosen endpoints (webhook URLs, storage destinations) resolve to
	// private, loopback and link-local addresses: a development and test option (internal/egress); cloud
	// metadata stays refused. Off by default.
	AllowPrivateTargets bool
	// WebhookAttemptTimeout bounds one webhook delivery attempt (connect, request, answer); zero means
	// webhooks.AttemptTimeout (10 s). An attempt that runs out fails and is retried on the schedule.
	WebhookAttemptTimeout time.Duration
	// ConsoleSecureCookies marks the web console's cookies Secure on a plain-HTTP listener (TLS terminated by
	// a proxy in front); under TLSCertFile they are Secure anyway.
	ConsoleSecureCookies bool
	// ConsolePasswordCost is the argon2id cost of console passwords set on this node (the development owner's
	// included); zero: accounts.DefaultArgon2. Tests lower it: a default hash takes 0.5 s on a loaded
	// 2-core machine, over 1 s under the race detector.
	ConsolePasswordCost accounts.Argon2
}

// Layout names the parts of a data directory.
type Layout struct{ Root string }

// StoreDir is the Pebble store.
func (l Layout) StoreDir() string { return filepath.Join(l.Root, "store") }

// BlobDir is the filesystem blob store.
func (l Layout) BlobDir() string { return filepath.Join(l.Root, "blobs") }

// Node is a running node.
type Node struct {
	cfg      Config
	gpus     *gpu.Fleet // this node's GPU devices (none without a usable device and codec path)
	storage  *Storage
	store    persistence.Store
	blobs    persistence.Blobs
	pools    *actors.Pools
	sweeper  actors.Sweeper
	stopWork context.CancelFunc
	cluster  *cluster.Node
	api      *apihttp.Server
	upload   *apihttp.Server
	apiLn    net.Listener
	uploadLn net.Listener
	serving  bool // the listeners were handed to the servers, which close them on Shutdown
	serveErr chan error
	// running joins the goroutines Start started besides the worker pool (the sweeper, the two listeners):
	// Close returns only once they have returned.
	running sync.WaitGroup

	// dispatcher places claimable jobs by capacity; set once the cluster member started.
	dispatcher atomic.Pointer[actors.Dispatcher]

	// endLife ends the actors' lifetime context (Deps.Lifetime).
	endLife context.CancelFunc

	// lastFree is the free worker slots per class last gossiped (nil: none yet).
	freeMu   sync.Mutex
	lastFree map[string]int
	// disk is the data directory's disk guard (nil: none kept); lowDisk is what the node last gossiped of it
	// (advertiseDisk).
	disk    *diskspace.Guard
	lowDisk atomic.Bool

	// decodeBudget is the memory of the node's image decodes and PDF parses.
	decodeBudget *actors.DecodeBudget

	// batchNotices carries "an item job ended" hints to batch actors without blocking job actors.
	batchNotices batchNotices

	// DevOrg is set when this start bootstrapped the development organization.
	DevOrg  *admin.DevOrg
	Metrics *apihttp.Metrics

	// leased runs the sweeper's passes and the outbox delivery on whichever node holds the sweeper lease.
	leased *sweep.Sweeper
	// closing is the context Close was given, set before it stops the work: what the shutdown still allows
	// (the sweeper's lease release ends with it).
	closing   atomic.Pointer[context.Context]
	outbox    outbox.Outbox
	outboxes  *outbox.Registry
	deliverer outbox.Deliverer
	// webhookEndpoints reads and writes webhook endpoint records.
	webhookEndpoints webhooks.Endpoints
}

func (c *Config) defaults() {
	if c.DataDir == "" {
		c.DataDir = "./data"
	}
	if c.APIAddr == "" {
		c.APIAddr = "127.0.0.1:8080"
	}
	if c.UploadAddr == "" {
		c.UploadAddr = "127.0.0.1:8081"
	}
	if c.NodeName == "" {
		c.NodeName, _ = os.Hostname()
	}
	if c.ClusterBind == "" {
		c.ClusterBind = "127.0.0.1:0"
	}
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	if len(c.CodecKey) == 0 {
		c.CodecKey = []byte(codec.DevelopmentKey)
	}
	if c.Workers <= 0 {
		c.Workers = runtime.NumCPU()
	}
	if c.LeaseDuration <= 0 {
		c.LeaseDuration = 30 * time.Second
	}
	if len(c.Roles) == 0 {
		c.Roles = DefaultRoles()
	}
	if c.LongWorkers <= 0 {
		c.LongWorkers = max(1, c.Workers/2)
	}
	if c.GPUSlots <= 0 {
		c.GPUSlots = DefaultGPUSlots
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = 5 * time.Second
	}
	if c.SweepLease == 0 {
		c.SweepLease = 30 * time.Second
	}
}

// Start opens the data directory, starts the cluster member and the listeners. On error everything already
// started is stopped again.
func Start(ctx context.Context, cfg Config) (n *Node, err error) {
	cfg.defaults()
	if cfg.SweepLease < 0 || (cfg.SweepInterval > 0 && cfg.SweepLease <= cfg.SweepInterval) {
		return nil, fmt.Errorf("sweeper lease %v: want longer than the sweep interval %v", cfg.SweepLease, cfg.SweepInterval)
	}
	catalog, err := actors.LoadCatalog(cfg.PlansFile)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	n = &Node{cfg: cfg, serveErr: make(chan error, 2), Metrics: apihttp.NewMetrics()}
	n.batchNotices.init()
	// Every error return sets n to nil, so the cleanup holds its own reference to the partly started node.
	started := n
	defer func() {
		if err != nil {
			_ = started.Close(context.Background())
			// Listeners handed in are closed by their server's shutdown once served; these never were.
			for _, ln := range []net.Listener{cfg.APIListener, cfg.UploadListener} {
				if ln != nil {
					_ = ln.Close()
				}
			}
		}
	}()
	guard := cfg.DiskGuard
	if guard == nil {
		guard = diskspace.New(cfg.DataDir, cfg.MinFreeDisk)
	}
	storage, err := OpenGuardedStorage(ctx, cfg.DataDir, cfg.S3, cfg.Logger,
		opcount.NewMetrics(n.Metrics.Registry), guard)
	if err != nil {
		return nil, err
	}
	if guard != nil {
		// What an operator alerts on before writes are refused (docs/operations.md, Disk space).
		n.Metrics.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "filigrane_data_disk_free_bytes",
			Help: "Free space on the data directory's filesystem; files are refused below --min-free-disk, records below a quarter of it."},
			func() float64 {
				free, err := guard.Free()
				if err != nil {
					return -1
				}
				return float64(free)
			}))
	}
	n.storage, n.disk = storage, guard
	if guard.Low() { // gossiped from the join on; advertiseDisk keeps it current
		n.lowDisk.Store(true)
		n.logDisk(true)
	}
	store, blobs := storage.Store, storage.Blobs
	n.store, n.blobs = store, blobs
	cdc, err := codec.New(cfg.CodecKey)
	if err != nil {
		return nil, fmt.Errorf("codec key: %w", err)
	}

	reg := cluster.NewRegistry()
	reg.MustRegister(actors.OrgMessages()...)
	reg.MustRegister(actors.JobMessages()...)
	reg.MustRegister(actors.BatchMessages()...)
	reg.MustRegister(actors.WorkMessages()...)
	caller := &actors.LateCaller{}
	n.decodeBudget = actors.NewDecodeBudget(cfg.DecodeMemory)
	// The node's GPUs (none without a device and NVRTC): woken by the API, used by accelerator=gpu image jobs.
	devices := 0
	if gpu.CodecAvailable() {
		devices = len(gpu.Devices())
	}
	n.gpus = gpu.NewFleet(devices, 2*time.Second, cfg.Clock, gpu.CUDAOpener(gpu.OptionsFromEnv()))
	media := actors.Media{Blobs: blobs, Store: store, Codec: cdc, Catalog: catalog, Budget: n.decodeBudget,
		GPUs: n.gpus, Clock: cfg.Clock,
		Files: map[jobstate.Media]mediakind.Adapter{
			jobstate.MediaVideo:    mediafiles.NewVideo(cdc, catalog.Prices, cfg.MaxVideoWork),
			jobstate.MediaDocument: mediafiles.NewPDF(cdc),
		}}
	roles := NodeRoles(cfg.Roles)
	workers := roles.Workers(cfg.Workers, cfg.LongWorkers, devices, cfg.GPUSlots)
	// Handlers of outbox kinds (webhook events, bucket deliveries, batch notices) are registered on
	// n.outboxes; effects of a kind no node handles go dead after outbox.DefaultSchedule.
	n.outbox = outbox.Outbox{Store: store, Clock: cfg.Clock}
	n.outboxes = outbox.NewRegistry()
	n.deliverer = outbox.Deliverer{Outbox: n.outbox, Registry: n.outboxes,
		Logger: cfg.Logger.With().Str("component", "outbox").Logger()}
	n.webhookEndpoints = webhooks.Endpoints{Store: store, Clock: cfg.Clock}
	hooks := &webhooks.Deliverer{
		Endpoints: n.webhookEndpoints, Clock: cfg.Clock, Metrics: webhooks.NewMetrics(n.Metrics.Registry),
		Sender: webhooks.NewSender(&egress.Guard{AllowPrivate: cfg.AllowPrivateTargets}, cfg.WebhookAttemptTimeout)}
	webhooks.RegisterHandlers(n.outboxes, store, hooks) // every webhook kind (webhooks.Kinds)
	n.outboxes.MustRegister(actors.OutboxJobInput, actors.InputCheckHandler(caller, blobs))
	// One node keeps its job records and results on the data directory's disk, where a low disk can refuse the
	// report of a result already stored; the outcome files let the job succeed from it (actors.OutcomeFiles).
	// Only while the disk is near its reserve: elsewhere a report is not refused for space.
	var outcomes *actors.OutcomeFiles
	if !storage.Cluster && n.disk != nil {
		outcomes = &actors.OutcomeFiles{Blobs: blobs, Needed: n.disk.Near}
	}
	n.pools = actors.NewPools(actors.PoolsConfig{Caller: caller, Processor: media, Node: cfg.NodeName, Lease: cfg.LeaseDuration,
		Logger: cfg.Logger.With().Str("component", "workers").Logger(), Workers: workers, CPUTokens: cfg.Workers,
		Metrics: actors.NewWorkMetrics(n.Metrics.Registry, cfg.NodeName), Outcomes: outcomes})
	// The actors' storage calls end with the node (after its cluster member stopped them), not before.
	life, endLife := context.WithCancel(context.WithoutCancel(ctx))
	n.endLife = endLife
	deps := &actors.Deps{
		Store: store, Clock: cfg.Clock, Catalog: catalog, Logger: cfg.Logger.With().Str("component", "actors").Logger(),
		Respond: func(ctx actor.Context, v any) {
			if ctx.Sender() == nil {
				return // a timer's self-sent tick waits for no answer
			}
			if err := cluster.Respond(ctx, reg, v); err != nil {
				cfg.Logger.Error().Err(err).Msgf("respond with %T", v)
			}
		},
		Reply: func(ctx actor.Context, to *actor.PID, v any) {
			wrapped, err := reg.Wrap(v)
			if err != nil {
				cfg.Logger.Error().Err(err).Msgf("reply with %T", v)
				return
			}
			ctx.Send(to, wrapped)
		},
		IdleTimeout:  10 * time.Minute,
		StoreTimeout: storeTimeout,
		PeerTimeout:  peerTimeout(cfg.FailureDetection),
		ActorDelta:   n.Metrics.ActorDelta,
		Caller:       caller,
		Dispatch: func(rec *jobstate.Record) {
			if d := n.dispatcher.Load(); d != nil {
				d.Dispatch(rec)
			} // else the member is still starting: the sweeper's next tick places the job
		},
		Outbox:      n.outbox,
		NotifyBatch: n.batchNotices.notify,
		Outcomes:    outcomes,
		Lifetime:    life,
	}
	var kinds []cluster.Kind
	worker := roles.HostsActors
	if worker {
		kinds = []cluster.Kind{
			cluster.NewKind(actors.KindOrg, actors.OrgProps(deps)),
			cluster.NewKind(actors.KindJob, actors.JobProps(deps)),
			cluster.NewKind(actors.KindBatch, actors.BatchProps(deps, &actors.BatchEnv{Media: media, Blobs: blobs})),
		}
	}
	host, gossipPort, err := splitHostPort(cfg.ClusterBind)
	if err != nil {
		return nil, fmt.Errorf("cluster bind address: %w", err)
	}
	n.cluster, err = cluster.Start(ctx, cluster.Config{
		NodeName:   cfg.NodeName,
		Host:       host,
		GossipPort: gossipPort,
		RemotePort: cfg.RemotePort,
		Join:       cfg.Join,
		Roles:      cfg.Roles,
		Logger:     cfg.Logger, // the cluster package names its own components
		Registry:   reg,
		Kinds:      kinds,
		Free:       n.pools.Free(),
		LowDisk:    n.lowDisk.Load(),

		FailureDetection: cfg.FailureDetection,
	})
	if err != nil {
		return nil, fmt.Errorf("start cluster member: %w", err)
	}
	caller.Set(n.cluster)
	if err := n.startPlacement(); err != nil {
		return nil, err
	}
	workCtx, stopWork := context.WithCancel(context.Background())
	n.stopWork = stopWork
	n.pools.SetMember(n.cluster.ID())
	n.pools.SetOnChange(n.advertiseFree)
	n.advertiseFree()
	n.advertiseDisk()
	n.pools.Run(workCtx)
	n.running.Add(1)
	go func() {
		defer started.running.Done()
		started.rebalance(workCtx)
	}()
	n.running.Add(1)
	go func() { // started, not n: an error return below sets n to nil while this runs
		defer started.running.Done()
		started.batchNotices.run(workCtx, actors.Caller(started.cluster))
	}()
	n.sweeper = actors.Sweeper{Store: store, Blobs: blobs, Caller: n.cluster, Clock: cfg.Clock,
		Logger: cfg.Logger.With().Str("component", "sweeper").Logger()}
	n.leased = sweep.New(sweep.Config{Store: store, Clock: cfg.Clock, Node: cfg.NodeName, Lease: cfg.SweepLease,
		Logger: cfg.Logger.With().Str("component", "sweeper").Logger(), Member: n.cluster.ID(), HolderGone: n.cluster.Gone,
		Shutdown: started.closingCtx})
	n.sweeper.Register(n.leased)
	n.leased.Register("outbox", func(ctx context.Context) error { _, err := n.deliverer.Pass(ctx); return err })
	if cfg.SweepInterval > 0 {
		n.running.Add(1)
		go func() {
			defer started.running.Done()
			started.leased.Run(workCtx, cfg.SweepInterval)
		}()
	}

	sealer, err := storageSealer(cfg.DataDir, cfg.StorageSecretKey)
	if err != nil {
		return nil, fmt.Errorf("storage secret key: %w", err)
	}
	storageLib := &storagedest.Library{Store: store, Sealer: sealer, Guard: &egress.Guard{AllowPrivate: cfg.AllowPrivateTargets}}
	sched := StorageSchedule()
	sd := &storageDelivery{store: store, blobs: blobs, lib: storageLib, outbox: n.outbox, now: cfg.Clock.Now, schedule: sched}
	n.outboxes.MustRegister(actors.OutboxJobStorage, outbox.Handler{Deliver: sd.deliver, Schedule: sched, Timeout: 10 * time.Minute})

	httpLog := cfg.Logger.With().Str("component", "http").Logger()
	// Wake-up calls with a webhook made while a device starts get accelerator.ready when it becomes ready.
	wakeups := &webhooks.Wakeups{Outbox: n.outbox}
	wakeLog := cfg.Logger.With().Str("component", "gpu").Logger()
	n.gpus.OnReady(func(st gpu.State) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := wakeups.Ready(ctx, st.ReadyAt, st.WarmUntil, cfg.Clock.Now()); err != nil {
			wakeLog.Warn().Err(err).Msg("hand over accelerator.ready events; kept for the next try")
		}
	})
	tlsConfig, err := loadTLS(cfg.TLSCertFile, cfg.TLSKeyFile)
	if err != nil {
		return nil, err
	}
	publicURL := ""
	if cfg.PublicURL != "" {
		if publicURL, err = apihttp.ParsePublicURL(cfg.PublicURL); err != nil {
			return nil, err
		}
	}
	// API and console share the key cache; unknown key ids (and the console's unknown session cookies) cost
	// store reads within cfg.UnknownKeys.
	keys := actors.Keys{Store: store, Clock: cfg.Clock, Cache: actors.NewKeyCache(keyCacheTTL),
		Limit: authlimit.New(cfg.UnknownKeys, cfg.Clock)}
	n.api = apihttp.New(apihttp.Config{
		Keys:         keys,
		Orgs:         actors.OrgClient{Caller: n.cluster},
		ActorTimeout: peerTimeout(cfg.FailureDetection),
		Store:        store, Blobs: blobs, Caller: n.cluster, Media: media, Pool: n.pools.Sync(),
		Catalog: catalog, Clock: cfg.Clock, Logger: httpLog, Metrics: n.Metrics,
		Outbox: n.outbox, SyncWait: cfg.SyncWait, Health: n.health, Ready: n.ready, Conns: cfg.Conns,
		Storage:   storageLib,
		GPU:       apiGPU(cfg.GPUState, n.gpus),
		GPUStrict: cfg.GPUStrict,
		Wakeups:   wakeups,
		TLS:       tlsConfig,
		// Lowers the direct embed limit (e.g. to the spec's 20 MB).
		MaxDirectEmbed: cfg.MaxDirectEmbed,
		PublicURL:      publicURL,
		TrustedProxies: cfg.TrustedProxies,
	})
	people := accounts.New(store, cfg.Clock, accounts.Policy{}, 2)
	people.Limit = keys.Limit // one budget of unknown credentials (keys and session cookies) per address and node
	if cfg.ConsolePasswordCost.Time > 0 {
		people.Argon2 = cfg.ConsolePasswordCost
	}
	if err := n.api.MountConsole(console.Config{Accounts: people,
		Orgs: actors.Orgs{Store: store, Clock: cfg.Clock}, OrgCalls: actors.OrgClient{Caller: n.cluster},
		Keys:    keys,
		Catalog: catalog, Clock: cfg.Clock, Logger: httpLog, SecureCookies: cfg.ConsoleSecureCookies,
		Cluster: n.consoleCluster}); err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	// Sessions abandoned without signing out are deleted once expired, 500 a pass, resuming where the last
	// pass stopped (only the lease holder runs passes, one at a time).
	var sessionsFrom []byte
	n.leased.Register("console.sessions", func(ctx context.Context) error {
		next, _, err := people.PurgeSessions(ctx, sessionsFrom, 500)
		if err == nil {
			sessionsFrom = next
		}
		return err
	})
	if n.apiLn, err = listen(cfg.APIListener, cfg.APIAddr); err != nil {
		return nil, fmt.Errorf("listen for the API on %s: %w", cfg.APIAddr, err)
	}
	if n.uploadLn, err = listen(cfg.UploadListener, cfg.UploadAddr); err != nil {
		return nil, fmt.Errorf("listen for uploads on %s: %w", cfg.UploadAddr, err)
	}
	// The upload host is built once its listener is bound: the default public URL names the bound port.
	secret, err := uploadSecret(ctx, store, cfg.UploadSecret)
	if err != nil {
		return nil, fmt.Errorf("upload secret: %w", err)
	}
	publicUpload := cfg.PublicUploadURL
	if publicUpload == "" {
		scheme := "http://"
		if tlsConfig != nil {
			scheme = "https://"
		}
		publicUpload = scheme + n.uploadLn.Addr().String()
		if strings.HasPrefix(publicURL, "https://") && tlsConfig == nil {
			// Behind a TLS proxy the upload host needs its own public https URL: Etchv's SDKs refuse http ones.
			cfg.Logger.Warn().Str("upload_url", publicUpload).Msg("--public-url is https but signed upload URLs are http: set --public-upload-url to the proxy's address of the upload host")
		}
	}
	n.upload, err = apihttp.NewUploadHost(apihttp.Config{Store: store, Blobs: blobs, Clock: cfg.Clock, Logger: httpLog, Metrics: n.Metrics,
		Conns: cfg.Conns, Ready: n.ready, TLS: tlsConfig,
		// A PUT's lease names this member, so that once it is gone another node's PUT of the file is taken.
		PutHolder: actors.PutHolder{Node: cfg.NodeName, Member: n.cluster.ID(), Gone: n.cluster.Gone}},
		apihttp.UploadHostOptions{API: n.api, Secret: secret, PublicURL: publicUpload, WebsiteOrigin: cfg.WebsiteOrigin})
	if err != nil {
		return nil, err
	}
	// The development organization comes last, after every step that can fail: a start that fails must not
	// use up the one-time bootstrap, or the key it prints would be lost with it.
	if cfg.Bootstrap {
		n.DevOrg, err = admin.Admin{Store: store, Clock: cfg.Clock, Catalog: catalog, PasswordCost: cfg.ConsolePasswordCost}.Bootstrap(ctx)
		if err != nil {
			return nil, err
		}
		if n.DevOrg == nil {
			cfg.Logger.Info().Msg("the development organization was created on an earlier start; " +
				"`filigrane admin key create` makes new keys (see docs/operations.md, The development key)")
		}
	}
	n.serving = true
	n.serve(n.api, n.apiLn)
	n.serve(n.upload, n.uploadLn)
	return n, nil
}

// advertiseFree gossips the pools' free slots per class (none for a class the node does not run, or while
// it drains). The cluster coalesces updates (at most one every 100 ms), and an unchanged value is not sent
// again.
func (n *Node) advertiseFree() {
	free := n.pools.Free()
	n.freeMu.Lock()
	defer n.freeMu.Unlock()
	if n.lastFree != nil && maps.Equal(n.lastFree, free) {
		return
	}
	n.lastFree = free
	if err := n.cluster.SetFree(free); err != nil {
		n.cfg.Logger.Warn().Err(err).Msg("advertise free worker slots")
	}
}

// advertiseDisk gossips whether the data directory is below its free-space reserve (cluster.NodeMeta.LowDisk),
// when that changed since the last call, so that placement sends work to nodes with room while there are any
// (actors/placement). The node reads the guard once a second and whenever the members change (rebalance).
// Start calls it once before the rebalance loop begins, and then that loop alone does, so the gossiped value
// follows the last change.
func (n *Node) advertiseDisk() {
	low := n.disk.Low()
	if n.lowDisk.Swap(low) == low {
		return
	}
	n.logDisk(low)
	if err := n.cluster.SetLowDisk(low); err != nil {
		n.cfg.Logger.Warn().Err(err).Msg("advertise low disk space")
	}
}

// logDisk says once that the node went low on disk space, or has room again.
func (n *Node) logDisk(low bool) {
	if low {
		n.cfg.Logger.Warn().Msg("the data directory is below --min-free-disk: new files are refused here, and other nodes take new work while they have room (docs/operations.md, Disk space)")
		return
	}
	n.cfg.Logger.Info().Msg("the data directory is above --min-free-disk again: taking new work")
}

// listen is ln when the configuration hands one in, else a TCP listener on addr.
// loadTLS reads the listeners' certificate and key; nil without them. One without the other is an error, not
// a silent fallback to plain HTTP.
func loadTLS(certFile, keyFile string) (*tls.Config, error) {
	if certFile == "" && keyFile == "" {
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, errors.New("TLS needs both a certificate (--tls-cert) and its key (--tls-key)")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load the TLS certificate and key: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

func listen(ln net.Listener, addr string) (net.Listener, error) {
	if ln != nil {
		return ln, nil
	}
	return net.Listen("tcp", addr)
}

// serve runs srv on ln until Close shuts it down; Wait learns of a listener that fails before.
func (n *Node) serve(srv *apihttp.Server, ln net.Listener) {
	n.running.Add(1)
	go func() {
		defer n.running.Done()
		n.serveErr <- srv.Serve(ln)
	}()
}

// APIAddr is the address the API listens on.
func (n *Node) APIAddr() string { return n.apiLn.Addr().String() }

// UploadAddr is the address the upload host listens on.
func (n *Node) UploadAddr() string { return n.uploadLn.Addr().String() }

// GossipAddr is the memberlist address other nodes join.
func (n *Node) GossipAddr() string { return n.cluster.GossipAddr() }

// Store is the node's record store.
func (n *Node) Store() persistence.Store { return n.store }

// Blobs is the node's blob store.
func (n *Node) Blobs() persistence.Blobs { return n.blobs }

// DecodeBudget is the node's decode memory budget.
func (n *Node) DecodeBudget() *actors.DecodeBudget { return n.decodeBudget }

// Pool is the node's pool of the cpu class (the one the edge uses for synchronous work).
func (n *Node) Pool() *actors.Pool { return n.pools.Sync() }

// Pools is the node's worker pools, one per work class it runs.
func (n *Node) Pools() *actors.Pools { return n.pools }

// Sweep runs every sweeper pass once now, lease or not (tests move the clock, then sweep): the job, result,
// asset and upload passes, then the outbox delivery.
func (n *Node) Sweep(ctx context.Context) (ticked, purged int, err error) {
	ticked, purged, err = n.sweeper.Sweep(ctx)
	if err != nil {
		return ticked, purged, err
	}
	if _, err := n.deliverer.Pass(ctx); err != nil {
		return ticked, purged, err
	}
	return ticked, purged, nil
}

// closingCtx is the context Close was given, nil before Close.
func (n *Node) closingCtx() context.Context {
	if p := n.closing.Load(); p != nil {
		return *p
	}
	return nil
}

// Outbox is the node's outbox and its handler registry (register handlers before effects of their kind are
// due; tests read entries).
func (n *Node) Outbox() (outbox.Outbox, *outbox.Registry) { return n.outbox, n.outboxes }

// Cluster is the node's cluster member.
func (n *Node) Cluster() *cluster.Node { return n.cluster }

// Wait blocks until a listener fails, the cluster blocks this member, or ctx ends.
func (n *Node) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-n.serveErr:
		return fmt.Errorf("listener stopped: %w", err)
	case <-n.cluster.Blocked():
		return errors.New("the cluster declared this member dead; restart the node")
	}
}

// Close stops the node in order: stop accepting requests and let in-flight ones finish (until ctx ends), stop
// the workers and the sweeper, leave the cluster, then close the store so that Pebble shuts down cleanly. It
// returns only once every goroutine Start started has returned. Past ctx's end only bounded steps remain: the
// sweeper's lease release ends with ctx (a frozen store would hold it 5 s more; the lease expires by itself)
// and the cluster leave takes up to a few seconds (the gossip leave, up to 2 s; the cluster's stop waits
// for the local activations and the gRPC streams only until ctx ends: an activation blocked on a frozen
// store would hold it 10 s). It is safe on a node that started only partly
// (Start calls it when a step fails) and on nil.
func (n *Node) Close(ctx context.Context) error {
	if n == nil {
		return nil
	}
	var errs []error
	// The servers refuse new work and answer their synchronous waits first, then the pools stop taking work,
	// so that no request accepted from here on waits for work this node will not run.
	for _, srv := range []*apihttp.Server{n.api, n.upload} {
		if srv != nil {
			srv.BeginDrain()
		}
	}
	finishDrain := n.drain(ctx)
	// Running work finishes (or is handed back at DrainTimeout) while the balancer's delay runs and the
	// listeners wait for the requests in flight: the stop takes the longest of the three, not their sum.
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		finishDrain()
	}()
	n.holdForBalancer(ctx)
	if n.serving {
		errs = append(errs, n.api.Shutdown(ctx), n.upload.Shutdown(ctx))
	} else {
		// Bound but never served: nothing else closes them.
		for _, ln := range []net.Listener{n.apiLn, n.uploadLn} {
			if ln != nil {
				_ = ln.Close()
			}
		}
	}
	<-drained
	n.closing.Store(&ctx)
	if n.stopWork != nil {
		n.stopWork()
		n.pools.Wait()
	}
	// The listeners' goroutines return once their server is shut down, the sweeper once stopWork ran; both
	// happened above whenever the goroutines were started.
	n.running.Wait()
	if n.cluster != nil {
		// A graceful stop announces the leave (up to 2 s) and lets the local activations and the remote's gRPC
		// streams end (each up to 10 s in protoactor, but only until ctx ends), so the others need not wait
		// for failure detection. A member the cluster blocked was
		// dropped by the others already, and must exit and be restarted at once: it stops without grace.
		errs = append(errs, n.cluster.Stop(ctx, !n.cluster.IsBlocked()))
	}
	if n.endLife != nil {
		n.endLife()
	}
	if n.gpus != nil {
		errs = append(errs, n.gpus.Close())
	}
	if n.storage != nil {
		errs = append(errs, n.storage.Close())
	}
	return errors.Join(errs...)
}

func splitHostPort(addr string) (string, int, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	var p int
	if _, err := fmt.Sscanf(port, "%d", &p); err != nil {
		return "", 0, fmt.Errorf("port %q: %w", port, err)
	}
	return host, p, nil
}

// apiGPU is the accelerator state the API reports: the configured one (tests), else this node's devices.
func apiGPU(configured apihttp.GPUState, fleet *gpu.Fleet) apihttp.GPUState {
	if configured != nil {
		return configured
	}
	return fleet
}
