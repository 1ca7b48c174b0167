package loadbench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/rs/zerolog"

	"filigrane/actors"
	"filigrane/actors/mediakind"
	"filigrane/bench/apibench"
	"filigrane/cluster"
	"filigrane/cluster/clustertest"
	"filigrane/internal/admin"
	"filigrane/internal/clock"
	"filigrane/internal/node"
	"filigrane/persistence/s3test"
)

// The S3 server's root credentials. The server listens on 127.0.0.1 only and lives as long as the run.
const (
	s3AccessKey = "filigrane-bench"
	s3SecretKey = "filigrane-bench-secret"
	s3Bucket    = "filigrane-bench"
	// s3DestBucket is the customer bucket of embed_storage operations, on the same server.
	s3DestBucket = "filigrane-bench-dest"
	s3Region     = "us-east-1"
)

// BenchCredits is the balance of the organization a local cluster creates: far more than any run spends, so
// that insufficient_credits never ends one.
const BenchCredits = 100_000_000

// LocalConfig describes a local cluster: N `filigrane serve` processes in cluster mode sharing one versitygw
// bucket, all on 127.0.0.1.
type LocalConfig struct {
	// Binary is the filigrane executable the nodes run (the harness's own, as a rule).
	Binary string
	// Env is added to the environment of the nodes.
	Env []string
	// Nodes is the node count (at least 1).
	Nodes int
	// Workers is each node's codec worker count; 0 means 1.
	Workers int
	// Detection is the nodes' failure detection; zero fields keep the node's defaults.
	Detection cluster.FailureDetection
	// S3Sidecar makes versitygw keep object metadata in a sidecar directory even where the filesystem has user
	// extended attributes: the mode whose kill -9 tears objects (docs/storage.md), for chaos runs against it.
	S3Sidecar bool
	// Dir holds the nodes' data and the S3 server's files; empty makes (and Close removes) a temporary one.
	Dir string
	// Output receives every process's output lines, prefixed with its index (nil discards them).
	Output io.Writer
	// LogLevel is the nodes' --log-level; empty means warn. Debug logs every request with its status, route
	// and time, which a chaos run's odd operation is traced by.
	LogLevel string
	// Concurrency is the organization's plan's concurrent jobs; 0 lifts the limit (as the rate limit is). A
	// small one makes the run meet 429 concurrency_limited answers, which must not be charged, and shows a
	// slot that outlives its operation as requests refused until the run gives up.
	Concurrency int
}

// Local is a running local cluster with an organization of BenchCredits credits and an owner key.
type Local struct {
	Nodes *clustertest.Processes
	// S3 is the versitygw process (Kill, Pause, Restart like the nodes).
	S3       *clustertest.Processes
	S3Config *node.S3Config
	// Dest is a second bucket on the S3 server, for a storage destination (embed_storage).
	Dest  *StorageDest
	OrgID string
	Key   string
	// Prices are the nodes' catalog prices (the plan catalog file they run with).
	Prices mediakind.Rates
	dir    string
	ownDir bool
	// detection is the nodes' failure detection (zero fields: the node's defaults), which bounds how long
	// a continued node may take to learn that it was declared dead.
	detection cluster.FailureDetection
}

// StartLocal starts the S3 server, creates the bucket and the organization in it (as `filigrane admin
// --s3-endpoint` would), then the nodes, and returns once every node answers /healthz and sees all members.
func StartLocal(ctx context.Context, cfg LocalConfig) (l *Local, err error) {
	if cfg.Nodes < 1 {
		cfg.Nodes = 1
	}
	if cfg.Workers < 1 {
		cfg.Workers = 1
	}
	if cfg.Binary == "" {
		return nil, errors.New("loadbench: no filigrane binary given")
	}
	gw := s3test.Binary()
	if gw == "" {
		return nil, errors.New("versitygw not found on PATH, in $FILIGRANE_TOOLS or in ~/.cache/filigrane/bin: install it with `scripts/setup.sh --s3`, or target running nodes with --url")
	}
	l = &Local{dir: cfg.Dir, detection: cfg.Detection}
	if l.dir == "" {
		if l.dir, err = os.MkdirTemp("", "filigrane-bench-load-"); err != nil {
			return nil, fmt.Errorf("create temporary directory: %w", err)
		}
		l.ownDir = true
	}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	s3root := filepath.Join(l.dir, "s3", "root")
	s3meta := filepath.Join(l.dir, "s3", "meta")
	for _, d := range []string{s3root, s3meta} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	// versitygw keeps object metadata in user extended attributes, or, where the filesystem has none, in a
	// sidecar directory (as persistence/s3test does).
	gwArgs := []string{"posix", s3root}
	if cfg.S3Sidecar || !s3test.UserXattrs(s3root) {
		gwArgs = []string{"posix", "--sidecar", s3meta, s3root}
	}
	l.S3, err = clustertest.StartProcesses(ctx, clustertest.ProcessConfig{
		Binary: gw, N: 1, Ports: 1,
		Args: func(_ int, ports [][]int) []string {
			return append([]string{"--port", "127.0.0.1:" + strconv.Itoa(ports[0][0]), "--quiet"}, gwArgs...)
		},
		Env:    []string{"ROOT_ACCESS_KEY_ID=" + s3AccessKey, "ROOT_SECRET_ACCESS_KEY=" + s3SecretKey},
		Ready:  clustertest.ReadyTCP(0),
		Output: cfg.Output,
	})
	if err != nil {
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	endpoint := "127.0.0.1:" + strconv.Itoa(l.S3.List[0].Ports[0])
	l.S3Config = &node.S3Config{Endpoint: "http://" + endpoint, Bucket: s3Bucket, AccessKey: s3AccessKey,
		SecretKey: s3SecretKey, Region: s3Region}
	mc, err := minio.New(endpoint, &minio.Options{Creds: credentials.NewStaticV4(s3AccessKey, s3SecretKey, ""), Region: s3Region})
	if err != nil {
		return nil, fmt.Errorf("S3 client: %w", err)
	}
	for _, b := range []string{s3Bucket, s3DestBucket} {
		if err := mc.MakeBucket(ctx, b, minio.MakeBucketOptions{Region: s3Region}); err != nil {
			return nil, fmt.Errorf("create bucket %s: %w", b, err)
		}
	}
	l.Dest = &StorageDest{Endpoint: endpoint, Region: s3Region, Bucket: s3DestBucket, AccessKey: s3AccessKey, SecretKey: s3SecretKey}
	// Every node must open the destinations' sealed secrets: one sealing key for the cluster.
	var sealKey [32]byte
	if _, err := rand.Read(sealKey[:]); err != nil {
		return nil, err
	}
	if err := l.createOrg(ctx); err != nil {
		return nil, err
	}
	plans := filepath.Join(l.dir, "plans.json")
	cat, err := apibench.PlanCatalog()
	if err != nil {
		return nil, err
	}
	if cfg.Concurrency > 0 {
		if cat, err = withConcurrency(cat, cfg.Concurrency); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(plans, cat, 0o600); err != nil {
		return nil, fmt.Errorf("write plan catalog: %w", err)
	}
	// The prices as the nodes read them: the file's, over the defaults.
	loaded, err := actors.LoadCatalog(plans)
	if err != nil {
		return nil, err
	}
	l.Prices = loaded.Prices
	fd := cfg.Detection
	logLevel := cfg.LogLevel
	if logLevel == "" {
		logLevel = "warn"
	}
	l.Nodes, err = clustertest.StartProcesses(ctx, clustertest.ProcessConfig{
		Binary: cfg.Binary, N: cfg.Nodes, Ports: 4, Output: cfg.Output,
		// The run's webhook receiver listens on 127.0.0.1 (embed_webhook): a local benchmark cluster may
		// deliver there, as `serve --allow-private-targets` allows in development.
		// The same for a storage destination on the local S3 server (embed_storage).
		Env: append([]string{"FILIGRANE_ALLOW_PRIVATE_TARGETS=1", "FILIGRANE_STORAGE_SECRET_KEY=" + hex.EncodeToString(sealKey[:])}, cfg.Env...),
		Args: func(i int, ports [][]int) []string {
			p := ports[i]
			args := []string{"serve", "--data", filepath.Join(l.dir, fmt.Sprintf("node%d", i)), "--node-name", fmt.Sprintf("node%d", i),
				"--listen", fmt.Sprintf("127.0.0.1:%d", p[0]), "--upload-listen", fmt.Sprintf("127.0.0.1:%d", p[1]),
				"--cluster-bind", fmt.Sprintf("127.0.0.1:%d", p[2]), "--remote-port", strconv.Itoa(p[3]),
				"--s3-endpoint", l.S3Config.Endpoint, "--s3-bucket", s3Bucket, "--s3-access-key", s3AccessKey,
				"--s3-secret-key", s3SecretKey, "--workers", strconv.Itoa(cfg.Workers), "--plans", plans,
				"--log-format", "json", "--log-level", logLevel}
			if fd.ProbeInterval > 0 {
				args = append(args, "--cluster-probe-interval", fd.ProbeInterval.String())
			}
			if fd.ProbeTimeout > 0 {
				args = append(args, "--cluster-probe-timeout", fd.ProbeTimeout.String())
			}
			if fd.SuspicionMult > 0 {
				args = append(args, "--cluster-suspicion-mult", strconv.Itoa(fd.SuspicionMult))
			}
			return append(args, "--join", clustertest.SeedList(ports, 2))
		},
		Ready: clustertest.ReadyHTTP(0, "/healthz"),
	})
	if err != nil {
		return nil, fmt.Errorf("start nodes: %w", err)
	}
	for i := range l.Nodes.List {
		if err := WaitMembers(ctx, l.Target(i), cfg.Nodes); err != nil {
			return nil, err
		}
	}
	return l, nil
}

func (l *Local) createOrg(ctx context.Context) error {
	return l.Admin(ctx, func(a admin.Admin) error {
		st, err := a.CreateOrg(ctx, "Load benchmark", "business", BenchCredits)
		if err != nil {
			return fmt.Errorf("create organization: %w", err)
		}
		m, err := a.AddMember(ctx, st.ID, "bench", actors.RoleOwner)
		if err != nil {
			return fmt.Errorf("add member: %w", err)
		}
		key, _, err := a.CreateKey(ctx, actors.NewKeySpec{OrgID: st.ID, MemberID: m, Scopes: actors.AllScopes()})
		if err != nil {
			return fmt.Errorf("create key: %w", err)
		}
		l.OrgID, l.Key = st.ID, key
		return nil
	})
}

// Admin opens the cluster's shared store from this process, as `filigrane admin --s3-endpoint` does, and runs
// fn on it.
func (l *Local) Admin(ctx context.Context, fn func(admin.Admin) error) error {
	return OpenAdmin(ctx, l.S3Config, fn)
}

// OpenAdmin opens the shared store of a cluster behind s3 with a throw-away local directory and runs fn on it.
func OpenAdmin(ctx context.Context, s3 *node.S3Config, fn func(admin.Admin) error) error {
	dir, err := os.MkdirTemp("", "filigrane-bench-admin-")
	if err != nil {
		return fmt.Errorf("create temporary directory: %w", err)
	}
	defer os.RemoveAll(dir)
	st, err := node.OpenStorage(ctx, dir, s3, zerolog.Nop())
	if err != nil {
		return fmt.Errorf("open the cluster's store: %w", err)
	}
	defer st.Close()
	return fn(admin.Admin{Store: st.Store, Clock: clock.System{}, Catalog: actors.DefaultCatalog()})
}

// Targets returns the nodes' API base URLs.
func (l *Local) Targets() []string {
	out := make([]string, len(l.Nodes.List))
	for i := range out {
		out[i] = l.Target(i)
	}
	return out
}

// Target returns node i's API base URL.
func (l *Local) Target(i int) string {
	return "http://127.0.0.1:" + strconv.Itoa(l.Nodes.List[i].Ports[0])
}

// Close kills every process (a paused one too) and removes the temporary directory.
func (l *Local) Close() {
	for _, ps := range []*clustertest.Processes{l.Nodes, l.S3} {
		if ps == nil {
			continue
		}
		for _, p := range ps.List {
			_ = p.Resume() // a stopped process dies of SIGKILL anyway; this keeps its exit prompt
		}
		ps.KillAll()
	}
	if l.ownDir {
		os.RemoveAll(l.dir)
	}
}

// WaitMembers waits until the node at base answers /healthz with want members (a fresh cluster's joins, or a
// restarted node finding the others again).
func WaitMembers(ctx context.Context, base string, want int) error {
	c := newHTTPClient(4, 2*time.Second)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	last := -1
	for {
		var h struct {
			Members int `json:"members"`
		}
		if status, err := c.getJSON(base+"/healthz", "", &h); err == nil && status == 200 {
			if h.Members == want {
				return nil
			}
			last = h.Members
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s sees %d members, want %d: %w", base, last, want, ctx.Err())
		case <-t.C:
		}
	}
}

// OrgOfKey asks a node which organization key belongs to (GET /auth/api-key).
func OrgOfKey(ctx context.Context, base, key string) (string, error) {
	var info struct {
		OrganizationID string `json:"organization_id"`
	}
	status, err := newHTTPClient(1, 10*time.Second).getJSON(base+"/auth/api-key", key, &info)
	if err != nil {
		return "", fmt.Errorf("GET %s/auth/api-key: %w", base, err)
	}
	if status != 200 || info.OrganizationID == "" {
		return "", fmt.Errorf("GET %s/auth/api-key answered %d", base, status)
	}
	return info.OrganizationID, ctx.Err()
}

// withConcurrency sets every plan of a plan catalog (bench/apibench's) to n concurrent jobs.
func withConcurrency(catalog []byte, n int) ([]byte, error) {
	var cat struct {
		Plans []map[string]any `json:"plans"`
	}
	if err := json.Unmarshal(catalog, &cat); err != nil {
		return nil, fmt.Errorf("plan catalog: %w", err)
	}
	for _, p := range cat.Plans {
		p["concurrency"] = n
	}
	return json.MarshalIndent(cat, "", "  ")
}
