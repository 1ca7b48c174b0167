// Command filigrane is the one Filigrane binary: the server (serve), offline administration of a stopped node's
// data directory (admin), the offline watermark codec (codec), the benchmarks (bench) and
// the GPU diagnostic (gpu).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage: filigrane <command> [flags]

commands:
  serve    run a node (single node with embedded storage by default)
  admin    administer a stopped node's data directory (organizations, members, keys, credits)
  codec    embed or detect a watermark in a local file
  bench    run a benchmark (codec, api, load, chaos, video)
  gpu      show the GPUs this machine can use (gpu info)
  version  print the version

API client (against a running server: $FILIGRANE_URL, key $FILIGRANE_API_KEY; docs/cli.md):
  embed    embed a watermark in a file and save the result (signed upload with progress for large files)
  detect   detect a watermark in a file
  jobs     show or follow a job (jobs get REQUEST_ID [--wait])
  batches  embed a folder or zip as a batch (batches create DIR|ZIP [--wait]; batches get|cancel BATCH_ID)
  webhooks manage webhook endpoints (webhooks list; create URL; update|delete|rotate-secret ID;
           deliveries ID; redeliver ID EVENT_ID)
  storage  storage destinations (storage list|create; get|update|verify|delete|deliveries DST_ID;
           move DST_ID ASSET_ID; delivery|retry STD_ID)
  assets   the asset library (assets list; assets get|update|download ASSET_ID; assets delete ASSET_ID...)
  uploads  signed uploads (uploads create FILE; uploads get UPLOAD_ID)
  accelerator  the server's GPU (accelerator status; accelerator wake [--webhook-id wh_...])
`

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go stopOnSignals(sigs, cancel, os.Stderr, os.Exit)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	os.Exit(code)
}

// stopOnSignals cancels the command's context at the first SIGINT or SIGTERM (serve then stops gracefully:
// requests in flight finish for up to --shutdown-grace) and exits at once at the second, as an operator who
// signals again expects: without it, the second signal was swallowed and the node still waited out its grace.
// The exit status is 128 plus the signal's number, as a shell reports a process a signal ended.
func stopOnSignals(sigs <-chan os.Signal, cancel context.CancelFunc, stderr io.Writer, exit func(int)) {
	<-sigs
	cancel()
	s := <-sigs
	fmt.Fprintf(stderr, "filigrane: second %s signal: stopping at once, without waiting for requests and work in flight\n", signalName(s))
	code := 1
	if n, ok := s.(syscall.Signal); ok {
		code = 128 + int(n)
	}
	exit(code)
}

// signalName is the signal's conventional name (SIGTERM, SIGINT), which an operator greps for.
func signalName(s os.Signal) string {
	switch s {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// run dispatches to a subcommand and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return runServe(ctx, args[1:], stdout, stderr)
	case "admin":
		return runAdmin(ctx, args[1:], stdout, stderr)
	case "codec":
		return runCodec(ctx, args[1:], stdout, stderr)
	case "bench":
		return runBench(ctx, args[1:], stdout, stderr)
	case "gpu":
		return runGPU(ctx, args[1:], stdout, stderr)
	case "embed":
		return runEmbed(ctx, args[1:], stdout, stderr)
	case "detect":
		return runDetect(ctx, args[1:], stdout, stderr)
	case "jobs":
		return runJobs(ctx, args[1:], stdout, stderr)
	case "batches":
		return runBatches(ctx, args[1:], stdout, stderr)
	case "webhooks":
		return runWebhooks(ctx, args[1:], stdout, stderr)
	case "assets":
		return runAssets(ctx, args[1:], stdout, stderr)
	case "storage":
		return runStorage(ctx, args[1:], stdout, stderr)
	case "uploads":
		return runUploads(ctx, args[1:], stdout, stderr)
	case "accelerator":
		return runAccelerator(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "filigrane", version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "filigrane: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}
