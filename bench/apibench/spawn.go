package apibench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"

	"filigrane/internal/node"
)

// ErrMultiNodeSpawn is why Spawn starts one node only. In-process nodes each have their own Pebble store and
// blob directory: the development key bootstrapped on the first node is unknown to the others (401), and an
// organization's actor or a job activated on another node would load from that node's empty store. Numbers from
// such a "cluster" would measure nothing real, so multi-node runs need cluster mode with shared storage, started
// outside the harness and named with Config.Targets.
var ErrMultiNodeSpawn = errors.New("--spawn supports 1 node: in-process nodes do not share storage yet, so an API key " +
	"and an organization exist on the first node only; for a multi-node run start the nodes in cluster mode with shared " +
	"storage and pass them with --targets")

// UnlimitedRequestsPerMinute is the business plan's per-minute limit in the plan catalog of spawned nodes: high
// enough that the rate limiter never answers 429 in a benchmark.
const UnlimitedRequestsPerMinute = 1_000_000_000

// UnlimitedConcurrency is the business plan's concurrent job limit for spawned nodes, so that many embed or
// detect clients hit the workers, not the plan.
const UnlimitedConcurrency = 1024

// SpawnConfig configures in-process nodes.
type SpawnConfig struct {
	Nodes int
	// Workers is each node's codec worker count; 0 means one per CPU, as `filigrane serve`.
	Workers int
	// CodecKey is the nodes' codec secret; empty uses codec.DevelopmentKey. Give the baseline the same key.
	CodecKey []byte
	// Log receives the nodes' warnings and errors; nil discards them.
	Log io.Writer
	// AllowPrivateTargets lets webhook URLs and storage destinations reach loopback addresses (the client
	// tests deliver to a local S3 server), as `filigrane serve --allow-private-targets`.
	AllowPrivateTargets bool
}

// Spawned is a set of running in-process nodes with the development key of the first.
type Spawned struct {
	Nodes []*node.Node
	// Key is the development organization's API key (business plan, every scope).
	Key string
	// PlansFile is the plan catalog the nodes run with (the business plan without a practical rate limit).
	PlansFile string
	dir       string
}

// Targets returns the nodes' API base URLs.
func (s *Spawned) Targets() []string {
	out := make([]string, len(s.Nodes))
	for i, n := range s.Nodes {
		out[i] = "http://" + n.APIAddr()
	}
	return out
}

// PlanCatalog returns the JSON plan catalog that lifts the business plan's limits (the format of
// `filigrane serve --plans`). bench/apibench/plans-unlimited.json is the same catalog as a file, for benchmarks
// against `filigrane serve`; a test keeps the two equal.
func PlanCatalog() ([]byte, error) {
	type plan struct {
		Name              string   `json:"name"`
		Concurrency       int      `json:"concurrency"`
		RequestsPerMinute int      `json:"requests_per_minute"`
		GPU               bool     `json:"gpu"`
		Formats           []string `json:"formats"`
		JobRetryAfter     string   `json:"job_retry_after"`
	}
	// A plan in the file replaces the built-in one as a whole, so every field of the business plan is repeated.
	cat := struct {
		Plans []plan `json:"plans"`
	}{Plans: []plan{{Name: "business", Concurrency: UnlimitedConcurrency, RequestsPerMinute: UnlimitedRequestsPerMinute,
		GPU: true, Formats: []string{"image", "document", "video"}, JobRetryAfter: "2s"}}}
	b, err := json.MarshalIndent(cat, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode plan catalog: %w", err)
	}
	return append(b, '\n'), nil
}

// Spawn starts cfg.Nodes in-process nodes (only 1 for now, see ErrMultiNodeSpawn) in a temporary directory on
// free loopback ports, with a plan catalog that lifts the rate limit, and returns them with the development
// key. Close stops them and removes the directory.
func Spawn(ctx context.Context, cfg SpawnConfig) (s *Spawned, err error) {
	if cfg.Nodes < 1 {
		cfg.Nodes = 1
	}
	if cfg.Nodes > 1 {
		return nil, ErrMultiNodeSpawn
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	dir, err := os.MkdirTemp("", "filigrane-bench-api-")
	if err != nil {
		return nil, fmt.Errorf("create temporary data directory: %w", err)
	}
	s = &Spawned{dir: dir, PlansFile: filepath.Join(dir, "plans.json")}
	defer func() {
		if err != nil {
			s.Close(context.WithoutCancel(ctx))
		}
	}()
	cat, err := PlanCatalog()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(s.PlansFile, cat, 0o600); err != nil {
		return nil, fmt.Errorf("write plan catalog: %w", err)
	}
	logger := zerolog.New(cfg.Log).With().Timestamp().Logger().Level(zerolog.WarnLevel)
	for i := 0; i < cfg.Nodes; i++ {
		name := fmt.Sprintf("bench-%d", i+1)
		nc := node.Config{
			DataDir:     filepath.Join(dir, name),
			APIAddr:     "127.0.0.1:0",
			UploadAddr:  "127.0.0.1:0",
			ClusterBind: "127.0.0.1:0",
			NodeName:    name,
			PlansFile:   s.PlansFile,
			Logger:      logger.With().Str("node", name).Logger(),
			Bootstrap:   i == 0,
			Workers:     cfg.Workers,
			CodecKey:    cfg.CodecKey,

			AllowPrivateTargets: cfg.AllowPrivateTargets,
		}
		// Unreachable while Nodes is capped at 1; kept so that lifting the cap is the only change once
		// nodes share storage.
		if i > 0 {
			nc.Join = []string{s.Nodes[0].GossipAddr()}
		}
		n, err := node.Start(ctx, nc)
		if err != nil {
			return nil, fmt.Errorf("start in-process node %s: %w", name, err)
		}
		s.Nodes = append(s.Nodes, n)
		if i == 0 {
			if n.DevOrg == nil {
				return nil, errors.New("the first node did not bootstrap a development organization")
			}
			s.Key = n.DevOrg.Secret
		}
	}
	return s, nil
}

// Close stops the nodes (last first) and removes their data.
func (s *Spawned) Close(ctx context.Context) error {
	var errs []error
	for i := len(s.Nodes) - 1; i >= 0; i-- {
		if err := s.Nodes[i].Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop node %d: %w", i+1, err))
		}
	}
	s.Nodes = nil
	if s.dir != "" {
		if err := os.RemoveAll(s.dir); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", s.dir, err))
		}
	}
	return errors.Join(errs...)
}
