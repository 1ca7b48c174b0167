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

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"filigrane/bench/loadbench"
	"filigrane/cluster"
	"filigrane/cluster/clustertest"
)

const benchLoadUsage = `usage: filigrane bench load [flags]
       filigrane bench chaos [flags]

load: sends a mix of operations (sync embed, async embed followed to the end, sync detect, job status reads,
signed upload then embed, batch of 3 small images with its archive) open-loop at --rate operations/s, or closed-loop with --clients clients, for
--duration, and writes report.json, report.md and chart.png (throughput and p50/p95/p99 over time) to --out:
counts, latency percentiles, failures by problem code, lost and stuck jobs, and the credits the ledger charged
against the successes the client saw (they must be equal).

chaos: the same load on a local cluster while a schedule kills (-9), freezes (SIGSTOP/SIGCONT) and restarts
nodes and the S3 server; the report adds takeover and recovery times.

  filigrane bench load --nodes 3 --rate 20 --duration 30s
  filigrane bench load --nodes 1 --clients 8 --mix status --duration 10s
  filigrane bench load --url http://a:8080,http://b:8080 --key $KEY --s3-endpoint http://s3:7070 --s3-bucket filigrane
  filigrane bench chaos --nodes 3 --rate 10 --duration 60s --schedule 6s:kill:node2,20s:restart:node2

--nodes starts node processes of this binary and versitygw (scripts/setup.sh --s3) on 127.0.0.1 with an
organization of plenty of credits and a plan without a rate limit. With --url, the credit check reads the
organization's ledger from the cluster's store (--s3-* flags, as "filigrane admin"); without them it is skipped.

flags:
`

func runBenchLoad(ctx context.Context, args []string, stdout, stderr io.Writer, chaos bool) int {
	name := "filigrane bench load"
	if chaos {
		name = "filigrane bench chaos"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, benchLoadUsage)
		fs.PrintDefaults()
	}
	defNodes, defOut := 0, "bench/results/load"
	if chaos {
		defNodes, defOut = 3, "bench/results/chaos"
	}
	var (
		nodes       = fs.Int("nodes", defNodes, "start this many local node processes and an S3 server (0: use --url)")
		urls        = fs.String("url", "", "comma-separated base URLs of running nodes (load only)")
		key         = fs.String("key", "", "API key for --url (default: $FILIGRANE_API_KEY)")
		rate        = fs.Float64("rate", 0, "open loop: operations started per second, whatever the answers take (0: closed loop)")
		clients     = fs.Int("clients", 8, "closed loop: clients, each with one operation in flight")
		duration    = fs.Duration("duration", 30*time.Second, "how long operations start")
		drain       = fs.Duration("drain", 2*time.Minute, "after --duration, how long operations in flight may take to end")
		mix         = fs.String("mix", loadbench.DefaultMix, "operation weights: embed, embed_async, detect, detect_nokey, status, upload_embed, batch, batch_cancel, embed_webhook, embed_storage, embed_gpu, embed_pdf, embed_video, batch_media, detect_pdf, detect_video, upload_video, batch_media_cancel, video_storage (video ones need ffmpeg)")
		imagePath   = fs.String("image", "", "image to embed (default: a generated 1024x1024 photo-like JPEG)")
		videoSecs   = fs.Int("video-seconds", loadbench.VideoSeconds, "length of the video operations' generated 320x240 clip (over 60: charged per started minute)")
		outDir      = fs.String("out", defOut, "directory for report.json, report.md and chart.png")
		timeout     = fs.Duration("timeout", time.Minute, "limit of one HTTP request")
		retryFor    = fs.Duration("retry-for", time.Minute, "how long an operation retries on the next node after no answer, 429 or 5xx")
		poll        = fs.Duration("poll", 250*time.Millisecond, "pause between status reads of a job followed to its end")
		inflight    = fs.Int("max-inflight", 512, "open loop: operations in flight beyond which an arrival is dropped (and counted)")
		workers     = fs.Int("workers", 1, "codec workers per local node")
		concurrency = fs.Int("concurrency", 0, "local nodes: the organization's plan's concurrent jobs (0: unlimited); a small one makes the run meet 429 concurrency_limited answers (retried, never charged)")
		seed        = fs.Uint64("seed", 1, "seed of the operation sequence")
		progress    = fs.String("progress", "auto", "live progress: auto (a bar on a terminal, a line every 5 s otherwise), always, never")
		nodeLog     = fs.String("node-log", "", "write the local processes' output to this file")
		nodeLevel   = fs.String("node-log-level", "warn", "local nodes' --log-level (debug logs every request: route, status, time, request id)")
		s3Sidecar   = fs.Bool("s3-sidecar", false, "local S3 server (versitygw) keeps object metadata in a sidecar directory, not in extended attributes (the mode a kill -9 can tear; see docs/storage.md)")
		detection   = fs.String("detection", "", "local nodes' failure detection: production, quick (1 s probes, 4x suspicion) or stable (5 s, 6x); default stable for load, quick for chaos")
		schedule    = fs.String("schedule", "", "chaos: AT:ACTION:TARGET,... with ACTION kill, term (SIGTERM: graceful shutdown), stop, cont, restart and TARGET nodeN, s3 or webhook (the run's webhook receiver: stop answers 500, cont accepts again, kill closes it and its connections, restart listens again) (default: kill and restart the last node, freeze node0, kill and restart S3)")
	)
	s3cfg := s3Flags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return code
	}
	if fs.NArg() > 0 {
		return fail(2, fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	m, err := loadbench.ParseMix(*mix)
	if err != nil {
		return fail(2, err)
	}
	if *nodes > 0 && *urls != "" {
		return fail(2, errors.New("give --nodes or --url, not both"))
	}
	if *nodes <= 0 && *urls == "" {
		return fail(2, errors.New("give --nodes N (a local cluster) or --url"))
	}
	if chaos && *nodes <= 0 {
		return fail(2, errors.New("chaos needs a local cluster it can kill: --nodes N"))
	}
	fd, err := detectionFlag(*detection, chaos)
	if err != nil {
		return fail(2, err)
	}
	var sched []loadbench.Action
	if chaos {
		if *schedule == "" {
			sched = loadbench.DefaultSchedule(*duration, *nodes)
		} else if sched, err = loadbench.ParseSchedule(*schedule, *nodes); err != nil {
			return fail(2, err)
		}
	}
	cfg := loadbench.Config{Rate: *rate, Clients: *clients, Duration: *duration, Drain: *drain, Mix: m,
		Timeout: *timeout, RetryFor: *retryFor, PollInterval: *poll, MaxInFlight: *inflight, Seed: *seed, Log: stderr,
		VideoSeconds: *videoSecs}
	if *imagePath != "" {
		if cfg.Image, err = os.ReadFile(*imagePath); err != nil {
			return fail(2, err)
		}
		cfg.ImageName = *imagePath
	}
	var local *loadbench.Local
	if *nodes > 0 {
		bin, err := os.Executable()
		if err != nil {
			return fail(1, fmt.Errorf("find this binary for the nodes: %w", err))
		}
		lc := loadbench.LocalConfig{Binary: bin, Nodes: *nodes, Workers: *workers, Detection: fd, S3Sidecar: *s3Sidecar, LogLevel: *nodeLevel,
			Concurrency: *concurrency}
		if *nodeLog != "" {
			f, err := os.Create(*nodeLog)
			if err != nil {
				return fail(2, err)
			}
			defer f.Close()
			lc.Output = f
		}
		fmt.Fprintf(stderr, "%s: starting versitygw and %d node(s) on 127.0.0.1\n", name, *nodes)
		sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		local, err = loadbench.StartLocal(sctx, lc)
		cancel()
		if err != nil {
			return fail(1, err)
		}
		defer local.Close()
		cfg.Targets, cfg.Key, cfg.Dest, cfg.Prices = local.Targets(), local.Key, local.Dest, &local.Prices
		cfg.Ledger = loadbench.StoreLedger{S3: local.S3Config, OrgID: local.OrgID}
	} else {
		cfg.Targets = strings.Split(*urls, ",")
		cfg.Key = *key
		if cfg.Key == "" {
			cfg.Key = os.Getenv("FILIGRANE_API_KEY")
		}
		if s3 := s3cfg(); s3 != nil {
			org, err := loadbench.OrgOfKey(ctx, strings.TrimRight(cfg.Targets[0], "/"), cfg.Key)
			if err != nil {
				return fail(1, err)
			}
			cfg.Ledger = loadbench.StoreLedger{S3: s3, OrgID: org}
		}
	}
	cfg.Progress = progressDisplay(stderr, *progress)

	var rep *loadbench.Report
	if chaos {
		rep, err = loadbench.RunChaos(ctx, loadbench.ChaosConfig{Load: cfg, Local: local, Schedule: sched})
	} else {
		rep, err = loadbench.Run(ctx, cfg)
	}
	if err != nil {
		return fail(1, err)
	}
	if local != nil {
		rep.LocalNodes = *nodes
	}
	rep.Command = name + " " + strings.Join(args, " ")
	if err := rep.WriteFiles(*outDir); err != nil {
		return fail(1, err)
	}
	rep.WriteMarkdown(stdout)
	fmt.Fprintf(stderr, "%s: report in %s (report.json, report.md, chart.png)\n", name, *outDir)
	// A run fails when a job was lost or stuck, when the outcome of a job could not be read, or when the
	// credits could be checked and did not match or could not be checked although the store was given.
	creditsBad := cfg.Ledger != nil && (rep.Credits == nil || !rep.Credits.Equal)
	if rep.Webhooks != nil && !rep.Webhooks.OK() {
		fmt.Fprintf(stderr, "%s: FAILED: webhook events missing %d, mismatched %d, bad signatures %d, malformed %d\n",
			name, rep.Webhooks.Missing, rep.Webhooks.Mismatched, rep.Webhooks.BadSignature, rep.Webhooks.Malformed)
		return 1
	}
	if rep.Storage != nil && !rep.Storage.OK() {
		fmt.Fprintf(stderr, "%s: FAILED: storage deliveries failed %d, pending %d, unreadable %d\n",
			name, rep.Storage.Failed, rep.Storage.Pending, rep.Storage.Unreadable)
		return 1
	}
	if rep.Jobs.Lost > 0 || rep.Jobs.Stuck > 0 || rep.Jobs.Unchecked > 0 || creditsBad {
		fmt.Fprintf(stderr, "%s: FAILED: jobs lost %d, stuck %d, not checked %d; credits checked and equal to successes: %v\n",
			name, rep.Jobs.Lost, rep.Jobs.Stuck, rep.Jobs.Unchecked, rep.Credits != nil && rep.Credits.Equal)
		return 1
	}
	return 0
}

func detectionFlag(s string, chaos bool) (cluster.FailureDetection, error) {
	if s == "" {
		s = "stable"
		if chaos {
			s = "quick"
		}
	}
	switch s {
	case "production":
		return cluster.FailureDetection{}, nil
	case "quick":
		return clustertest.QuickDetection(), nil
	case "stable":
		return clustertest.StableDetection(), nil
	}
	return cluster.FailureDetection{}, fmt.Errorf("--detection %q: want production, quick or stable", s)
}

// progressDisplay returns the live display: a spinner bar with the counts on a terminal (or with "always"),
// otherwise a plain line every 5 seconds, which logs read well.
func progressDisplay(w io.Writer, mode string) func(loadbench.Progress) {
	if mode == "never" {
		return nil
	}
	line := func(p loadbench.Progress) string {
		return fmt.Sprintf("%3.0fs/%.0fs  ok %d  failed %d  in flight %d  last second: %d ok, p95 %s  late %d dropped %d",
			p.Elapsed.Seconds(), p.Duration.Seconds(), p.OK, p.Failed, p.InFlight, p.LastOKPerS,
			p.LastP95.Round(time.Millisecond), p.Late, p.Dropped)
	}
	f, isFile := w.(*os.File)
	if mode == "always" || (isFile && term.IsTerminal(int(f.Fd()))) {
		bar := progressbar.NewOptions(-1, progressbar.OptionSetWriter(w), progressbar.OptionSpinnerType(14),
			progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionClearOnFinish())
		return func(p loadbench.Progress) {
			bar.Describe(line(p))
			_ = bar.Add(0)
			if p.Done {
				_ = bar.Finish()
				fmt.Fprintln(w, "bench:", line(p))
			}
		}
	}
	var last time.Duration = -5 * time.Second
	return func(p loadbench.Progress) {
		if p.Done || p.Elapsed-last >= 5*time.Second {
			last = p.Elapsed
			fmt.Fprintln(w, "bench:", line(p))
		}
	}
}
