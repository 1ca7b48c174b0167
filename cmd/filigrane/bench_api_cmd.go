package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"filigrane/bench/apibench"
)

const benchAPIUsage = `usage: filigrane bench api [flags]

Load-tests the HTTP API: --clients concurrent clients send one endpoint's requests at a time (auth, status, embed,
then detect), round-robin over --targets, for --duration or --requests per endpoint, and report per endpoint
the requests, successes, 429s, other errors by status, throughput and latency p50/p95/p99/max (of the
successes, and apart of the 429s: how fast a node sheds).

  filigrane bench api --spawn 1 --endpoints auth --clients 16 --duration 10s
  filigrane bench api --targets http://127.0.0.1:8080 --key $KEY --endpoints embed,detect --clients 2 --codec-baseline

Endpoints: auth (GET /auth/api-key), status (GET /watermarks/jobs/{id} of one async embed made first),
embed, detect.

A development node limits the business plan to 1000 requests/minute: run it with "filigrane serve --plans FILE"
and a catalog lifting requests_per_minute (bench/README.md), or 429s will dominate. --spawn starts a node in
this process with such a catalog.

flags:
`

func runBenchAPI(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("filigrane bench api", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, benchAPIUsage)
		fs.PrintDefaults()
	}
	var (
		targets     = fs.String("targets", "http://127.0.0.1:8080", "comma-separated node base URLs; requests go round-robin")
		key         = fs.String("key", "", "API key (default: $FILIGRANE_API_KEY)")
		clients     = fs.Int("clients", 16, "concurrent clients")
		duration    = fs.Duration("duration", 10*time.Second, "length of each endpoint's phase (when no --requests count applies)")
		requests    = fs.String("requests", "", `requests per endpoint instead of --duration: "N", or "auth=500,embed=20"`)
		endpoints   = fs.String("endpoints", "auth", "comma-separated endpoints, run one after another: auth, status, embed, detect")
		imagePath   = fs.String("image", "", "image file to embed and detect (default: a generated 1024x1024 photo-like JPEG)")
		jsonOut     = fs.String("json", "", "also write the report as JSON to this file")
		warmup      = fs.Duration("warmup", time.Second, "unrecorded warm-up before each endpoint's phase (0: none)")
		data        = fs.String("data", `{"benchmark":"api"}`, "embed data (JSON object)")
		detectOrig  = fs.Bool("detect-original", false, "detect the unmarked image (default: a marked copy made by one embed request)")
		timeout     = fs.Duration("timeout", 2*time.Minute, "limit of one request")
		baseline    = fs.Bool("codec-baseline", false, "time decode+embed+PNG and decode+detect in this process to show the service overhead")
		baseRuns    = fs.Int("baseline-runs", 10, "codec runs per operation (and goroutine) for --codec-baseline, after one warm-up (median reported)")
		baseAtOnce  = fs.Int("baseline-parallel", 1, "codec runs at once for --codec-baseline (set it to --clients to separate CPU contention from service overhead)")
		codecKey    = fs.String("key-file", "", "codec key file for the baseline and spawned nodes (default: $FILIGRANE_CODEC_KEY, else the development key)")
		spawn       = fs.Int("spawn", 0, "start this many in-process nodes (only 1 for now) with a plan catalog lifting the rate limit, and test them")
		workers     = fs.Int("workers", 0, "codec workers of a spawned node (0: one per CPU)")
		nodeLogFile = fs.String("node-log", "", "with --spawn: write the node's warnings and errors to this file (default: stderr)")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "filigrane bench api: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	fail := func(code int, err error) int {
		fmt.Fprintln(stderr, "filigrane bench api:", err)
		return code
	}
	eps, err := apibench.ParseEndpoints(*endpoints)
	if err != nil {
		return fail(2, err)
	}
	all, per, err := apibench.ParseRequests(*requests)
	if err != nil {
		return fail(2, err)
	}
	cfg := apibench.Config{Clients: *clients, Endpoints: eps, Requests: all, PerEndpoint: per, Duration: *duration,
		Warmup: *warmup, Data: *data, DetectOriginal: *detectOrig, Timeout: *timeout, CodecBaseline: *baseline,
		BaselineRuns: *baseRuns, BaselineParallel: *baseAtOnce, Log: stderr}
	if *imagePath != "" {
		if cfg.Image, err = os.ReadFile(*imagePath); err != nil {
			return fail(2, fmt.Errorf("read --image: %w", err))
		}
		cfg.ImageName = *imagePath
	}
	cf := &codecFlags{keyFile: *codecKey}
	if cfg.CodecKey, err = cf.key(io.Discard); err != nil {
		return fail(2, err)
	}

	if *spawn > 0 {
		if flagSet(fs, "targets") || flagSet(fs, "key") {
			return fail(2, errors.New("--spawn starts its own node: leave out --targets and --key"))
		}
		nodeLog := stderr
		if *nodeLogFile != "" {
			f, err := os.Create(*nodeLogFile)
			if err != nil {
				return fail(1, fmt.Errorf("create --node-log: %w", err))
			}
			defer f.Close()
			nodeLog = f
		}
		sp, err := apibench.Spawn(ctx, apibench.SpawnConfig{Nodes: *spawn, Workers: *workers, CodecKey: cfg.CodecKey, Log: nodeLog})
		if err != nil {
			return fail(1, err)
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if err := sp.Close(cctx); err != nil {
				fmt.Fprintln(stderr, "filigrane bench api: stop nodes:", err)
			}
		}()
		cfg.Targets, cfg.Key = sp.Targets(), sp.Key
		fmt.Fprintf(stderr, "bench api: started %d in-process node(s) at %s (plan catalog %s)\n", len(sp.Nodes),
			strings.Join(cfg.Targets, ", "), sp.PlansFile)
	} else {
		cfg.Targets = strings.Split(*targets, ",")
		cfg.Key = *key
		if cfg.Key == "" {
			cfg.Key = os.Getenv("FILIGRANE_API_KEY")
		}
		if cfg.Key == "" {
			return fail(2, errors.New("no API key: pass --key or set FILIGRANE_API_KEY (or use --spawn 1)"))
		}
	}

	rep, err := apibench.Run(ctx, cfg)
	interrupted := err != nil && rep != nil && ctx.Err() != nil
	if err != nil && !interrupted {
		return fail(1, err)
	}
	if interrupted {
		// Ctrl-C: what was measured so far is still worth printing, marked as partial.
		rep.Notes = append(rep.Notes, "interrupted: the last phase is partial and later phases did not run")
	}
	rep.Command = "filigrane bench api " + strings.Join(args, " ")
	if *spawn > 0 {
		rep.Spawned = *spawn
		rep.Notes = append(rep.Notes, "the node ran in the benchmark's own process: clients and server share its CPUs")
	}
	rep.WriteMarkdown(stdout)
	if *jsonOut != "" {
		if err := rep.WriteJSON(*jsonOut); err != nil {
			return fail(1, err)
		}
		fmt.Fprintf(stdout, "\nwrote %s\n", *jsonOut)
	}
	if interrupted {
		return fail(1, err)
	}
	for _, e := range rep.Endpoints {
		if e.Successes == 0 {
			return fail(1, fmt.Errorf("%s: no request succeeded", e.Endpoint))
		}
	}
	return 0
}
