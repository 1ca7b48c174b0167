package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"filigrane/actors"
	"filigrane/actors/jobstate"
	"filigrane/actors/webhooks"
	"filigrane/cluster"
	apihttp "filigrane/http"
	"filigrane/internal/authlimit"
	"filigrane/internal/clientaddr"
	"filigrane/internal/netguard"
	"filigrane/internal/node"
)

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg node.Config
	fs.StringVar(&cfg.DataDir, "data", envOr("FILIGRANE_DATA", "./data"), "data directory (Pebble store and blobs)")
	fs.StringVar(&cfg.APIAddr, "listen", envOr("FILIGRANE_LISTEN", "127.0.0.1:8080"), "API listen address")
	fs.StringVar(&cfg.UploadAddr, "upload-listen", envOr("FILIGRANE_UPLOAD_LISTEN", "127.0.0.1:8081"), "upload host listen address")
	fs.StringVar(&cfg.NodeName, "node-name", envOr("FILIGRANE_NODE_NAME", ""), "node name in the cluster (default: host name)")
	fs.StringVar(&cfg.ClusterBind, "cluster-bind", envOr("FILIGRANE_CLUSTER_BIND", "127.0.0.1:0"), "memberlist gossip address; its host is also the actor remote's (port 0: any free port)")
	fs.IntVar(&cfg.RemotePort, "remote-port", 0, "actor remote (gRPC) port on the cluster-bind host (0: any free port)")
	join := fs.String("join", envOr("FILIGRANE_JOIN", ""), "comma-separated gossip addresses of cluster members to join")
	fs.StringVar(&cfg.PlansFile, "plans", envOr("FILIGRANE_PLANS", ""), "plan catalog file (JSON); built-in defaults when empty")
	level := fs.String("log-level", envOr("FILIGRANE_LOG_LEVEL", "info"), "log level: debug, info, warn, error")
	format := fs.String("log-format", envOr("FILIGRANE_LOG_FORMAT", "auto"), "log format: auto (console on a terminal), json, console")
	s3 := s3Flags(fs)
	roles := fs.String("roles", envOr("FILIGRANE_ROLES", ""), "comma-separated node roles: api (serves HTTP, hosts actors), cpu, cpu-long, gpu (run that work class), worker (cpu and cpu-long), edge (serves HTTP only, hosts no actors); default: edge,worker, plus gpu with a usable GPU")
	workers := fs.Int("workers", 0, "codec workers of the cpu class, and the CPU cores codec work may use (0: one per CPU)")
	fs.IntVar(&cfg.LongWorkers, "long-workers", envInt("FILIGRANE_LONG_WORKERS", 0), "workers of the cpu-long class (videos; 0: half of --workers, at least 1)")
	fs.DurationVar(&cfg.MaxVideoWork, "max-video-work", envDuration("FILIGRANE_MAX_VIDEO_WORK", 0), "the most estimated CPU time of one core a video embed or detection may need, checked when it is probed (413 video_too_large above; 0: 45m, half the longest video deadline, which takes ten minutes of 1080p30; at most 90m); lower it on CPUs slower than the reference machine; a job keeps the bound of the node that accepted it")
	fs.IntVar(&cfg.GPUSlots, "gpu-slots", envInt("FILIGRANE_GPU_SLOTS", 0), fmt.Sprintf("workers of the gpu class per GPU (0: %d)", node.DefaultGPUSlots))
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", envDuration("FILIGRANE_DRAIN_TIMEOUT", 20*time.Second), "on SIGTERM, how long running work may finish before it is handed back to another node (0: cut it short)")
	fs.DurationVar(&cfg.DrainDelay, "drain-delay", envDuration("FILIGRANE_DRAIN_DELAY", 2*time.Second), "on SIGTERM, how long /readyz answers 503 and new work is refused before the listeners close, so that a load balancer stops sending traffic (part of --shutdown-grace; set it to the balancer's probe interval times its failure count)")
	decodeMemory := fs.String("decode-memory", envOr("FILIGRANE_DECODE_MEMORY", ""), "memory for decoding images and parsing PDFs, shared by all decodes of this node, e.g. 4GiB (default: half the available memory)")
	codecKeyFile := fs.String("codec-key-file", envOr("FILIGRANE_CODEC_KEY_FILE", ""), "file holding the watermark secret (else env FILIGRANE_CODEC_KEY, else the public development key)")
	fs.StringVar(&cfg.TLSCertFile, "tls-cert", envOr("FILIGRANE_TLS_CERT", ""), "PEM certificate (chain) for HTTPS on both listeners; with --tls-key")
	fs.StringVar(&cfg.TLSKeyFile, "tls-key", envOr("FILIGRANE_TLS_KEY", ""), "PEM private key of --tls-cert")
	fs.StringVar(&cfg.PublicURL, "public-url", envOr("FILIGRANE_PUBLIC_URL", ""), "base URL clients reach the API at behind a proxy, e.g. https://api.example.com (Location headers are absolute under it)")
	fs.StringVar(&cfg.PublicUploadURL, "public-upload-url", envOr("FILIGRANE_PUBLIC_UPLOAD_URL", ""), "base URL clients PUT signed uploads to (default: http:// + the upload listener)")
	fs.StringVar(&cfg.WebsiteOrigin, "website-origin", envOr("FILIGRANE_WEBSITE_ORIGIN", ""), "the one browser origin allowed to PUT uploads (CORS); empty allows none")
	storageKeyHex := fs.String("storage-secret-key", envOr("FILIGRANE_STORAGE_SECRET_KEY", ""), "64 hex characters (32 bytes) sealing storage destination credentials at rest (default: a key generated into the data directory; a cluster must set one)")
	fs.BoolVar(&cfg.AllowPrivateTargets, "allow-private-targets", envBool("FILIGRANE_ALLOW_PRIVATE_TARGETS"), "FOR DEVELOPMENT AND TESTS: let webhook deliveries and storage destinations reach private, loopback and link-local addresses (cloud metadata stays refused)")
	fs.DurationVar(&cfg.WebhookAttemptTimeout, "webhook-timeout", envDuration("FILIGRANE_WEBHOOK_TIMEOUT", webhooks.AttemptTimeout), "longest wait of one webhook delivery attempt for the receiver (connect, request and answer); a slower attempt fails and is retried on the schedule")
	uploadSecretFile := fs.String("upload-secret-file", envOr("FILIGRANE_UPLOAD_SECRET_FILE", ""), "file holding the upload URL signing secret (default: generated once and kept in the store)")
	fs.IntVar(&cfg.Conns.MaxConns, "max-conns", envInt("FILIGRANE_MAX_CONNS", netguard.DefaultMaxConns), "open connections per listener (API, upload host); more are answered 503")
	fs.IntVar(&cfg.Conns.MaxConnsPerIP, "max-conns-per-ip", envInt("FILIGRANE_MAX_CONNS_PER_IP", netguard.DefaultMaxConnsPerIP), "open connections per client IP and listener; more are answered 503")
	unknownKeys := fs.Int("unknown-keys-per-ip", envInt("FILIGRANE_UNKNOWN_KEYS_PER_IP", authlimit.DefaultBurst), "API-key and console-session lookups that find nothing, per client address (IPv6: per /64) and minute, all of them at once at most; more are answered 429 (0: the default)")
	fs.IntVar(&cfg.UnknownKeys.MaxInFlight, "unknown-key-lookups", envInt("FILIGRANE_UNKNOWN_KEY_LOOKUPS", authlimit.DefaultMaxInFlight), "lookups of API keys and console session cookies this node does not know under way at once, from all clients; more are answered 503 (0: the default)")
	trustedProxies := fs.String("trusted-proxies", envOr("FILIGRANE_TRUSTED_PROXIES", ""), "comma-separated addresses and CIDRs of reverse proxies in front of this node: from them, the client address the per-address limits count is taken from X-Forwarded-For (empty: the connection's address, so all clients behind a proxy share one budget)")
	fs.DurationVar(&cfg.Conns.HeaderTimeout, "header-timeout", envDuration("FILIGRANE_HEADER_TIMEOUT", apihttp.DefaultHeaderTimeout), "time a request has to send its headers; 408 after it")
	fs.DurationVar(&cfg.Conns.BodyProgress, "body-timeout", envDuration("FILIGRANE_BODY_TIMEOUT", netguard.DefaultBodyProgress), "longest wait for the next bytes of a request body or response (progress, not total time)")
	fs.DurationVar(&cfg.Conns.IdleTimeout, "idle-timeout", envDuration("FILIGRANE_IDLE_TIMEOUT", apihttp.DefaultIdleTimeout), "how long a keep-alive connection may wait for its next request")
	fs.BoolVar(&cfg.ConsoleSecureCookies, "console-secure-cookies", envBool("FILIGRANE_CONSOLE_SECURE_COOKIES"), "mark the web console's cookies Secure on a plain-HTTP listener (TLS terminated by a proxy in front); under --tls-cert they are Secure anyway")
	fs.BoolVar(&cfg.GPUStrict, "gpu-strict", envBool("FILIGRANE_GPU_STRICT"), "answer accelerator=gpu with 503 and Retry-After when no GPU is ready, instead of running it on the CPU at the normal charge")
	minFreeDisk := fs.String("min-free-disk", envOr("FILIGRANE_MIN_FREE_DISK", "256MiB"), "free space kept on the data directory's filesystem: files (uploads, inputs, results) are refused below it, record writes below a quarter of it, with 503 and Retry-After (0: keep none)")
	maxDirectEmbed := fs.String("max-direct-embed", envOr("FILIGRANE_MAX_DIRECT_EMBED", ""), "lower the largest file an embed request carries itself (default: the media-kind table's, 40 MB for images; 20MB holds to the spec)")
	fs.DurationVar(&cfg.LeaseDuration, "job-lease", 30*time.Second, "a worker's lease on a job attempt, renewed at a third of its length: how long the jobs a dead node was running wait before they are retried")
	fs.DurationVar(&cfg.SweepInterval, "sweep-interval", 5*time.Second, "how often the sweeper ticks active jobs, delivers owed webhooks and bucket copies and purges expired data")
	fs.DurationVar(&cfg.SweepLease, "sweeper-lease", 30*time.Second, "how long a dead node's sweeper lease keeps the others from sweeping when none saw its cluster member leave (longer than --sweep-interval)")
	debugListen := fs.String("debug-listen", envOr("FILIGRANE_DEBUG_LISTEN", ""), "address serving Go's runtime profiles at /debug/pprof/ (no authentication: loopback or a private interface; empty: off)")
	grace := fs.Duration("shutdown-grace", 30*time.Second, "how long in-flight requests may take to finish on shutdown")
	fd := cluster.DefaultFailureDetection()
	fs.DurationVar(&cfg.FailureDetection.ProbeInterval, "cluster-probe-interval", envDuration("FILIGRANE_CLUSTER_PROBE_INTERVAL", fd.ProbeInterval), "failure detection: how often each node probes another member")
	fs.DurationVar(&cfg.FailureDetection.ProbeTimeout, "cluster-probe-timeout", envDuration("FILIGRANE_CLUSTER_PROBE_TIMEOUT", fd.ProbeTimeout), "failure detection: how long a probe waits for its answer (less than the interval)")
	fs.IntVar(&cfg.FailureDetection.SuspicionMult, "cluster-suspicion-mult", envInt("FILIGRANE_CLUSTER_SUSPICION_MULT", fd.SuspicionMult), "failure detection: a suspected member has this many probe intervals to refute before it is declared dead")
	// A mistyped flag gets the flag package's one line naming it and a pointer to the list, not the list of
	// some sixty flags, which pushed that line off an operator's screen.
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stdout, "usage: filigrane serve [flags]")
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return 0
		}
		fmt.Fprintln(stderr, "filigrane serve: run 'filigrane serve -h' for the flags")
		return 2
	}
	// N a minute, N at once: the bucket holds N and earns one back every minute/N.
	cfg.UnknownKeys.Burst = *unknownKeys
	if *unknownKeys > 0 {
		cfg.UnknownKeys.Every = time.Minute / time.Duration(*unknownKeys)
	}
	if err := checkLimitEnv(); err != nil {
		fmt.Fprintln(stderr, "filigrane serve:", err)
		return 2
	}
	if err := checkLimitFlags(&cfg, *workers); err != nil {
		fmt.Fprintln(stderr, "filigrane serve:", err)
		return 2
	}
	// A negative grace cut every request in flight at the first signal, a negative lease became the 30 s
	// default and a negative sweep interval turned the sweeper off (jobs of a dead node never retried, results
	// never purged), each without a word.
	for _, d := range []struct {
		flag string
		d    time.Duration
	}{{"--shutdown-grace", *grace}, {"--job-lease", cfg.LeaseDuration}, {"--sweep-interval", cfg.SweepInterval}} {
		if d.d < 0 {
			fmt.Fprintf(stderr, "filigrane serve: %s %s: want a duration such as 30s\n", d.flag, d.d)
			return 2
		}
	}
	if cfg.DrainDelay > 0 && cfg.DrainDelay >= *grace {
		// The delay is spent inside the grace: one as long would cut every request in flight at its end. A
		// delay asked for is refused; the default gives way to a short grace (half of it).
		if flagSet(fs, "drain-delay") || os.Getenv("FILIGRANE_DRAIN_DELAY") != "" {
			fmt.Fprintf(stderr, "filigrane serve: --drain-delay %s: want less than --shutdown-grace (%s), which it is part of\n", cfg.DrainDelay, *grace)
			return 2
		}
		cfg.DrainDelay = *grace / 2
	}
	if *join != "" {
		cfg.Join = strings.Split(*join, ",")
	}
	logger, err := newLogger(stderr, *level, *format)
	if err != nil {
		fmt.Fprintln(stderr, "filigrane serve:", err)
		return 2
	}
	cfg.Logger = logger
	if cfg.TrustedProxies, err = clientaddr.ParseProxies(*trustedProxies); err != nil {
		fmt.Fprintf(stderr, "filigrane serve: --trusted-proxies: %v\n", err)
		return 2
	}
	cfg.S3 = s3()
	cfg.Workers = *workers
	if *decodeMemory != "" {
		if cfg.DecodeMemory, err = actors.ParseByteSize(*decodeMemory); err != nil || cfg.DecodeMemory == 0 {
			fmt.Fprintf(stderr, "filigrane serve: --decode-memory %q: want a size such as 4GiB\n", *decodeMemory)
			return 2
		}
	}
	minFree, err := actors.ParseByteSize(*minFreeDisk)
	if err != nil || minFree < 0 {
		fmt.Fprintf(stderr, "filigrane serve: --min-free-disk %q: want a size such as 256MiB, or 0\n", *minFreeDisk)
		return 2
	}
	cfg.MinFreeDisk = uint64(minFree)
	if *maxDirectEmbed != "" {
		if cfg.MaxDirectEmbed, err = actors.ParseByteSize(*maxDirectEmbed); err != nil || cfg.MaxDirectEmbed == 0 {
			fmt.Fprintf(stderr, "filigrane serve: --max-direct-embed %q: want a size such as 20MB\n", *maxDirectEmbed)
			return 2
		}
	}
	if cfg.WebhookAttemptTimeout <= 0 {
		fmt.Fprintf(stderr, "filigrane serve: --webhook-timeout %s: want a positive duration such as 10s\n", cfg.WebhookAttemptTimeout)
		return 2
	}
	if cfg.Roles, err = parseRoles(*roles); err != nil {
		fmt.Fprintln(stderr, "filigrane serve:", err)
		return 2
	}
	if *uploadSecretFile != "" {
		secret, err := os.ReadFile(*uploadSecretFile)
		if err != nil {
			fmt.Fprintln(stderr, "filigrane serve: upload secret:", err)
			return 2
		}
		cfg.UploadSecret = []byte(strings.TrimSpace(string(secret)))
	}
	switch {
	case *codecKeyFile != "":
		key, err := os.ReadFile(*codecKeyFile)
		if err != nil {
			fmt.Fprintln(stderr, "filigrane serve: codec key:", err)
			return 2
		}
		cfg.CodecKey = []byte(strings.TrimSpace(string(key)))
	case os.Getenv("FILIGRANE_CODEC_KEY") != "":
		cfg.CodecKey = []byte(os.Getenv("FILIGRANE_CODEC_KEY"))
	default:
		logger.Warn().Msg("using the public development codec key: set FILIGRANE_CODEC_KEY or --codec-key-file in production")
	}
	if *storageKeyHex != "" {
		k, err := hex.DecodeString(strings.TrimSpace(*storageKeyHex))
		if err != nil || len(k) != 32 {
			fmt.Fprintln(stderr, "filigrane serve: storage secret key: want 64 hex characters")
			return 2
		}
		cfg.StorageSecretKey = k
	}
	cfg.Bootstrap = true
	fitConnsToFileLimit(&cfg, logger)
	if *debugListen != "" {
		addr, err := startDebugListener(ctx, *debugListen, logger)
		if err != nil {
			fmt.Fprintln(stderr, "filigrane serve: --debug-listen:", err)
			return 2
		}
		logger.Info().Str("debug", addr).Msg("profiles served at /debug/pprof/")
	}

	n, err := node.Start(ctx, cfg)
	if err != nil {
		logger.Error().Err(err).Msg("start failed")
		return 1
	}
	logger.Info().Str("api", n.APIAddr()).Str("upload", n.UploadAddr()).Str("gossip", n.GossipAddr()).
		Str("data", cfg.DataDir).Msg("node started")
	if d := n.DevOrg; d != nil {
		fmt.Fprintf(stdout, `
Development organization %s created with an owner key (all scopes). The key is shown once:

    %s

Try it:

    curl -s -H 'X-API-Key: %s' %s/auth/api-key

Lost it? Stop the node (or add --s3-endpoint ... in a cluster) and make a new one:

    filigrane admin key create --org %s --member %s

The web console is at %s/console/ — sign in as %s with this password (shown once):

    %s

`, d.OrgID, d.Secret, d.Secret, apiBase(cfg, n.APIAddr()), d.OrgID, d.MemberID, apiBase(cfg, n.APIAddr()), d.ConsoleEmail, d.ConsolePassword)
	}
	waitErr := n.Wait(ctx)
	if waitErr != nil {
		logger.Error().Err(waitErr).Msg("stopping")
	} else {
		logger.Info().Dur("grace", *grace).
			Msg("shutting down: requests in flight may finish within the grace (a second SIGINT or SIGTERM stops at once)")
	}
	sctx, cancel := context.WithTimeout(context.Background(), *grace)
	defer cancel()
	cut := blocked(n)
	if cut {
		// The cluster declared this member dead while it could not answer (a frozen process, a paused VM):
		// its actors live on other nodes now, and the others refuse its messages. Requests in flight here
		// cannot reach an actor and running work cannot report or hand back its job (its lease expires and
		// the job is retried elsewhere), so the drain and the grace would only hold the restart back, for
		// up to --drain-timeout plus --shutdown-grace while clients still reach this node. Stop at once.
		cancel()
	}
	if err := n.Close(sctx); err != nil {
		if cut && errors.Is(err, context.Canceled) {
			logger.Warn().Err(err).Msg("stopped without waiting for requests in flight (the cluster declared this member dead)")
			return 1
		}
		logger.Error().Err(err).Msg("shutdown")
		return 1
	}
	logger.Info().Msg("stopped cleanly")
	if waitErr != nil {
		return 1
	}
	return 0
}

// blocked reports whether n stopped serving because the cluster blocked its member id.
func blocked(n *node.Node) bool {
	c := n.Cluster()
	return c != nil && c.IsBlocked()
}

// parseRoles reads --roles; empty is the node's default (node.DefaultRoles).
func parseRoles(s string) ([]cluster.Role, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var roles []cluster.Role
	for _, r := range strings.Split(s, ",") {
		role := cluster.Role(strings.TrimSpace(r))
		switch role {
		case cluster.RoleEdge, cluster.RoleAPI, cluster.RoleWorker, cluster.RoleCPU, cluster.RoleCPULong, cluster.RoleGPU:
			roles = append(roles, role)
		default:
			return nil, fmt.Errorf("unknown role %q (want api, cpu, cpu-long, gpu, worker or edge)", r)
		}
	}
	return roles, nil
}

// fitConnsToFileLimit raises the open-file limit to its hard limit and, where even that is too low for the
// connection limits of both listeners plus the store's own files, lowers the connection limits to fit: a
// refused connection (503) is better than a failed accept.
func fitConnsToFileLimit(cfg *node.Config, logger zerolog.Logger) {
	soft, err := netguard.RaiseFileLimit()
	if err != nil {
		logger.Warn().Err(err).Msg("open-file limit")
	}
	const reserve = 512 // Pebble, blobs in flight, the cluster's sockets, ffmpeg pipes
	if soft == 0 || cfg.Conns.MaxConns <= 0 {
		return
	}
	if fit := (int64(soft) - reserve) / 2; fit < int64(cfg.Conns.MaxConns) {
		fit = max(fit, 16)
		logger.Warn().Uint64("open_file_limit", soft).Int("max_conns", cfg.Conns.MaxConns).Int64("lowered_to", fit).
			Msg("the open-file limit is too low for --max-conns on both listeners; lowering it (raise the hard limit: ulimit -Hn)")
		cfg.Conns.MaxConns = int(fit)
	}
}

// checkLimitEnv refuses malformed limit variables, which envInt and envDuration would otherwise replace by
// their defaults without a word.
func checkLimitEnv() error {
	for _, name := range []string{"FILIGRANE_MAX_CONNS", "FILIGRANE_MAX_CONNS_PER_IP"} {
		if v := os.Getenv(name); v != "" {
			if n, err := strconv.Atoi(v); err != nil || n < 0 {
				return fmt.Errorf("%s=%q: want a whole number of connections", name, v)
			}
		}
	}
	for _, name := range []string{"FILIGRANE_UNKNOWN_KEYS_PER_IP", "FILIGRANE_UNKNOWN_KEY_LOOKUPS"} {
		if v := os.Getenv(name); v != "" {
			if n, err := strconv.Atoi(v); err != nil || n < 0 {
				return fmt.Errorf("%s=%q: want a whole number of key lookups (0: the default)", name, v)
			}
		}
	}
	for _, name := range []string{"FILIGRANE_LONG_WORKERS", "FILIGRANE_GPU_SLOTS"} {
		if v := os.Getenv(name); v != "" {
			if n, err := strconv.Atoi(v); err != nil || n < 0 {
				return fmt.Errorf("%s=%q: want a whole number of workers (0: the default)", name, v)
			}
		}
	}
	for _, name := range []string{"FILIGRANE_HEADER_TIMEOUT", "FILIGRANE_BODY_TIMEOUT", "FILIGRANE_IDLE_TIMEOUT", "FILIGRANE_DRAIN_TIMEOUT", "FILIGRANE_DRAIN_DELAY", "FILIGRANE_MAX_VIDEO_WORK"} {
		if v := os.Getenv(name); v != "" {
			if d, err := time.ParseDuration(v); err != nil || d < 0 {
				return fmt.Errorf("%s=%q: want a duration such as 10s", name, v)
			}
		}
	}
	for _, name := range []string{"FILIGRANE_CLUSTER_PROBE_INTERVAL", "FILIGRANE_CLUSTER_PROBE_TIMEOUT", "FILIGRANE_WEBHOOK_TIMEOUT"} {
		if v := os.Getenv(name); v != "" {
			if d, err := time.ParseDuration(v); err != nil || d <= 0 {
				return fmt.Errorf("%s=%q: want a duration such as 500ms", name, v)
			}
		}
	}
	if v := os.Getenv("FILIGRANE_CLUSTER_SUSPICION_MULT"); v != "" {
		if n, err := strconv.Atoi(v); err != nil || n < 1 {
			return fmt.Errorf("FILIGRANE_CLUSTER_SUSPICION_MULT=%q: want a whole number from 1", v)
		}
	}
	for _, name := range []string{"FILIGRANE_GPU_STRICT", "FILIGRANE_ALLOW_PRIVATE_TARGETS", "FILIGRANE_CONSOLE_SECURE_COOKIES"} {
		if v := os.Getenv(name); v != "" {
			if _, err := strconv.ParseBool(v); err != nil {
				return fmt.Errorf("%s=%q: want true or false", name, v)
			}
		}
	}
	return nil
}

// checkLimitFlags holds the flags to what checkLimitEnv holds their variables to: the node reads a count or
// timeout of zero or less as its default, so a negative value (or a suspicion multiplier below 1, or a probe
// timing of zero) would otherwise start a node that does something else than was asked without a word.
func checkLimitFlags(cfg *node.Config, workers int) error {
	for _, c := range []struct {
		flag string
		n    int
	}{
		{"--max-conns", cfg.Conns.MaxConns}, {"--max-conns-per-ip", cfg.Conns.MaxConnsPerIP},
		{"--workers", workers}, {"--long-workers", cfg.LongWorkers}, {"--gpu-slots", cfg.GPUSlots},
		{"--unknown-keys-per-ip", cfg.UnknownKeys.Burst}, {"--unknown-key-lookups", cfg.UnknownKeys.MaxInFlight},
	} {
		if c.n < 0 {
			return fmt.Errorf("%s %d: want a whole number, 0 or more (0: the default)", c.flag, c.n)
		}
	}
	for _, d := range []struct {
		flag string
		d    time.Duration
	}{
		{"--header-timeout", cfg.Conns.HeaderTimeout}, {"--body-timeout", cfg.Conns.BodyProgress},
		{"--idle-timeout", cfg.Conns.IdleTimeout}, {"--drain-timeout", cfg.DrainTimeout}, {"--drain-delay", cfg.DrainDelay}, {"--max-video-work", cfg.MaxVideoWork},
	} {
		if d.d < 0 {
			return fmt.Errorf("%s %s: want a duration such as 10s", d.flag, d.d)
		}
	}
	if cfg.MaxVideoWork > jobstate.MaxVideoDeadline {
		// The bound travels with each job to every worker (jobstate.Record.MaxWork): one above the longest
		// deadline would have the cluster accept work that no attempt can finish in time.
		return fmt.Errorf("--max-video-work %s: want at most %s, the longest video deadline", cfg.MaxVideoWork, jobstate.MaxVideoDeadline)
	}
	for _, d := range []struct {
		flag string
		d    time.Duration
	}{
		{"--cluster-probe-interval", cfg.FailureDetection.ProbeInterval},
		{"--cluster-probe-timeout", cfg.FailureDetection.ProbeTimeout},
	} {
		if d.d <= 0 {
			return fmt.Errorf("%s %s: want a positive duration such as 500ms", d.flag, d.d)
		}
	}
	if m := cfg.FailureDetection.SuspicionMult; m < 1 {
		return fmt.Errorf("--cluster-suspicion-mult %d: want a whole number from 1", m)
	}
	return nil
}

// envBool reads a boolean environment variable, false when unset or malformed (checkLimitEnv refuses the
// latter).
func envBool(name string) bool {
	v, _ := strconv.ParseBool(os.Getenv(name))
	return v
}

// envInt reads an integer environment variable, def when unset or not a number (checkLimitEnv refuses
// the latter).
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// envDuration reads a duration environment variable (e.g. 10s), def when unset or malformed (checkLimitEnv
// refuses the latter).
func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// newLogger writes JSON lines, or the console format when asked or when w is a terminal.
func newLogger(w io.Writer, level, format string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		return zerolog.Logger{}, fmt.Errorf("log level %q: %w", level, err)
	}
	console := format == "console"
	if format == "auto" {
		if f, ok := w.(*os.File); ok {
			if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
				console = true
			}
		}
	} else if format != "json" && format != "console" {
		return zerolog.Logger{}, fmt.Errorf("log format %q: want auto, json or console", format)
	}
	if console {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

// apiBase is the URL to show for the node's API: the public URL behind a proxy, else the listener's address.
func apiBase(cfg node.Config, addr string) string {
	switch {
	case cfg.PublicURL != "":
		return strings.TrimRight(cfg.PublicURL, "/")
	case cfg.TLSCertFile != "":
		return "https://" + addr
	}
	return "http://" + addr
}
