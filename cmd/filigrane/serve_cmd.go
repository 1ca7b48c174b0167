package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"filigrane/cluster"
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
	roles := fs.String("roles", envOr("FILIGRANE_ROLES", "edge,worker"), "node roles: edge (serves HTTP), worker (hosts actors, runs codec work), gpu")
	workers := fs.Int("workers", 0, "codec workers (0: one per CPU)")
	codecKeyFile := fs.String("codec-key-file", envOr("FILIGRANE_CODEC_KEY_FILE", ""), "file holding the watermark secret (else env FILIGRANE_CODEC_KEY, else the public development key)")
	fs.StringVar(&cfg.PublicUploadURL, "public-upload-url", envOr("FILIGRANE_PUBLIC_UPLOAD_URL", ""), "base URL clients PUT signed uploads to (default: http:// + the upload listener)")
	fs.StringVar(&cfg.WebsiteOrigin, "website-origin", envOr("FILIGRANE_WEBSITE_ORIGIN", ""), "the one browser origin allowed to PUT uploads (CORS); empty allows none")
	uploadSecretFile := fs.String("upload-secret-file", envOr("FILIGRANE_UPLOAD_SECRET_FILE", ""), "file holding the upload URL signing secret (default: generated once and kept in the store)")
	grace := fs.Duration("shutdown-grace", 30*time.Second, "how long in-flight requests may take to finish on shutdown")
	if err := fs.Parse(args); err != nil {
		return 2
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
	cfg.S3 = s3()
	cfg.Workers = *workers
	for _, r := range strings.Split(*roles, ",") {
		role := cluster.Role(strings.TrimSpace(r))
		if role != cluster.RoleEdge && role != cluster.RoleWorker && role != cluster.RoleGPU {
			fmt.Fprintf(stderr, "filigrane serve: unknown role %q (want edge, worker, gpu)\n", r)
			return 2
		}
		cfg.Roles = append(cfg.Roles, role)
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
	cfg.Bootstrap = true

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

    curl -s -H 'X-API-Key: %s' http://%s/auth/api-key

Lost it? Stop the node (or add --s3-endpoint ... in a cluster) and make a new one:

    filigrane admin key create --org %s --member %s

`, d.OrgID, d.Secret, d.Secret, n.APIAddr(), d.OrgID, d.MemberID)
	}
	waitErr := n.Wait(ctx)
	if waitErr != nil {
		logger.Error().Err(waitErr).Msg("stopping")
	} else {
		logger.Info().Msg("shutting down")
	}
	sctx, cancel := context.WithTimeout(context.Background(), *grace)
	defer cancel()
	if err := n.Close(sctx); err != nil {
		logger.Error().Err(err).Msg("shutdown")
		return 1
	}
	logger.Info().Msg("stopped cleanly")
	if waitErr != nil {
		return 1
	}
	return 0
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
