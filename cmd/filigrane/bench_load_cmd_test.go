package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filigrane/bench/loadbench"
	"filigrane/cluster/clustertest"
	"filigrane/persistence/s3test"
)

// asMainEnv makes this test binary run as filigrane (main) instead of its tests: `bench load --nodes` starts
// its nodes from its own executable, which in a test is the test binary.
const asMainEnv = "FILIGRANE_TEST_BINARY_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" {
		main()
	}
	// Every process this binary starts of itself (bench load's nodes, bench codec's memory probe) runs main.
	// Set once here rather than with t.Setenv in the tests that start them, which would keep them from
	// running in parallel.
	if err := os.Setenv(asMainEnv, "1"); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// benchCluster prepares a test that starts a local cluster: versitygw must be installed (a skip says why,
// and with CI set it fails). The nodes the command starts from this binary run main (TestMain).
func benchCluster(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a multi-process cluster")
	}
	if s3test.Binary() == "" {
		msg := "versitygw is not installed (scripts/setup.sh --s3)"
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			t.Fatal(msg)
		}
		t.Skip(msg + "; with CI set this fails")
	}
}

// benchImageSide is the side of the photo the bench tests embed: the smallest class a mark fits (a short side
// of 256 pixels), not the command's default 1024×1024. The tests assert accounting and fail-over, which do
// not depend on the image's size, and the codec's work per operation is a sixteenth of the default's.
const benchImageSide = 320

// keepBenchEnv names a folder where a bench test that fails leaves its report folder (report.json, report.md,
// the nodes' log), for a failure seen once in many runs: a test's temporary folder is removed when it ends.
const keepBenchEnv = "FILIGRANE_KEEP_FAILED_BENCH"

// runBenchCmd runs a bench command in this process, on a benchImageSide photo, and reads its report files.
// The tests pass --retry-for 2m: they assert that no operation fails, not how fast one succeeds on a loaded
// machine.
func runBenchCmd(t *testing.T, args ...string) (*loadbench.Report, string, string) {
	t.Helper()
	out := t.TempDir()
	if keep := os.Getenv(keepBenchEnv); keep != "" {
		t.Cleanup(func() {
			if !t.Failed() {
				return
			}
			dst, err := os.MkdirTemp(keep, t.Name()+"-")
			if err == nil {
				err = os.CopyFS(dst, os.DirFS(out))
			}
			if err != nil {
				t.Logf("%s: the report folder was not kept: %v", keepBenchEnv, err)
				return
			}
			t.Logf("%s: the report folder is kept in %s", keepBenchEnv, dst)
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	img := filepath.Join(t.TempDir(), "photo.jpg")
	writePhoto(t, img, benchImageSide, benchImageSide, 3)
	args = append(args, "--image", img, "--out", out, "--progress", "never", "--node-log", filepath.Join(out, "nodes.log"))
	code := run(ctx, append([]string{"bench"}, args...), &stdout, &stderr)
	if code != 0 {
		logs, _ := os.ReadFile(filepath.Join(out, "nodes.log"))
		t.Fatalf("exit %d\nstderr:\n%s\nstdout:\n%s\nnode output (tail):\n%s", code, stderr.String(), stdout.String(), tail(string(logs), 40))
	}
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep loadbench.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Image != img {
		t.Errorf("the report names the image %q, want --image %q", rep.Image, img)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(out, "chart.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil || cfg.Width < 400 || cfg.Height < 300 {
		t.Fatalf("chart.png: %v %dx%d", err, cfg.Width, cfg.Height)
	}
	return &rep, string(md), stdout.String()
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// checkAccounting asserts what every run must show: the counts add up, nothing failed, no job lost or stuck,
// and the ledger charged exactly the operations the client saw succeed, each once.
func checkAccounting(t *testing.T, rep *loadbench.Report) {
	t.Helper()
	sum := 0
	for _, o := range rep.Ops {
		if o.OK+o.Failed != o.Count {
			t.Errorf("%s: %d ok + %d failed != %d", o.Op, o.OK, o.Failed, o.Count)
		}
		sum += o.Count
	}
	if sum != rep.Total.Count || rep.Total.OK+rep.Total.Failed != rep.Total.Count || rep.Total.Count == 0 {
		t.Errorf("total %+v, operations sum to %d", rep.Total, sum)
	}
	if rep.Total.Failed != 0 || len(rep.Errors) != 0 {
		t.Errorf("%d operations failed: %v", rep.Total.Failed, rep.Errors)
	}
	if rep.Jobs.Accepted == 0 || rep.Jobs.Terminal != rep.Jobs.Accepted || rep.Jobs.Lost != 0 || rep.Jobs.Stuck != 0 || rep.Jobs.Unchecked != 0 {
		t.Errorf("jobs %+v", rep.Jobs)
	}
	c := rep.Credits
	if c == nil {
		t.Fatalf("no credit check in the report: %v", rep.Notes)
	}
	// Every operation of the run but status reads is charged once it succeeds, a batch once per item (a
	// cancelled batch for the items that finished before the cancel: 0 to all); the set-up adds an embed and
	// an async embed.
	charged, maybe := 2, 0
	for _, o := range rep.Ops {
		switch {
		case o.Op == loadbench.OpBatch:
			charged += o.OK * loadbench.BatchItems
		case o.Op == loadbench.OpBatchCancel:
			maybe += o.OK * loadbench.BatchItems
		case o.Op.Charged():
			charged += o.OK
		}
	}
	if !c.Equal || c.ChargedOps != c.ClientSuccesses || c.ChargedOps < charged || c.ChargedOps > charged+maybe || c.ChargedTwice != 0 ||
		len(c.ChargedNotSeen) != 0 || len(c.SeenNotCharged) != 0 || c.ChargedCredits < int64(c.ChargedOps) || c.HeldAfter != c.HeldBefore {
		t.Errorf("credits %+v; charged kinds of operations that succeeded (with the set-up's 2): %d, and up to %d items of cancelled batches", c, charged, maybe)
	}
}

// bench load: 3 s open loop on one node process (and versitygw): every operation kind runs and succeeds,
// the report's counts add up and the ledger charged exactly the successes (a batch's items each once: the
// batch operation books its items' request ids, which the ledger charges; an accelerator=gpu embed, run on the
// CPU here, the plain price).
func TestBenchLoadOneNode(t *testing.T) {
	t.Parallel()
	benchCluster(t)
	// Seed 22: the sequence's 18 arrivals include every operation of the mix (the sequence is a pure function of
	// the seed; with the default seed two operations of weight 1 drew no arrival).
	rep, md, stdout := runBenchCmd(t, "load", "--nodes", "1", "--rate", "6", "--duration", "3s", "--retry-for", "2m", "--seed", "22",
		"--mix", "embed=1,embed_async=1,detect=1,status=2,upload_embed=1,batch=2,batch_cancel=1,embed_webhook=1,embed_storage=1,embed_gpu=1")
	checkAccounting(t, rep)
	// Each job of embed_webhook got its event, each result of embed_storage is in the destination bucket.
	if w := rep.Webhooks; w == nil || w.Jobs == 0 || w.Delivered != w.Jobs || !w.OK() {
		t.Errorf("webhook check %+v", w)
	}
	if st := rep.Storage; st == nil || st.Jobs == 0 || st.Stored != st.Jobs || !st.OK() {
		t.Errorf("storage check %+v", st)
	}
	if rep.Mode != "open" || rep.Rate != 6 || rep.LocalNodes != 1 || len(rep.Targets) != 1 {
		t.Errorf("run description: mode %s rate %v nodes %d targets %v", rep.Mode, rep.Rate, rep.LocalNodes, rep.Targets)
	}
	// 18 arrivals at 6/s over 3 s, none dropped; set-up operations come on top.
	if rep.Total.Dropped != 0 || rep.Total.Count < 18 {
		t.Errorf("total %+v, want 18 arrivals and no drop", rep.Total)
	}
	for _, op := range loadbench.AllOps {
		found := false
		for _, o := range rep.Ops {
			if o.Op == op && o.OK > 0 && o.Latency.P50Ms > 0 && o.Latency.P99Ms >= o.Latency.P50Ms {
				found = true
			}
		}
		if !found {
			t.Errorf("no successful %s in %+v", op, rep.Ops)
		}
	}
	if len(rep.Series) < 3 {
		t.Errorf("series has %d seconds", len(rep.Series))
	}
	// Each batch operation created one batch, seen ended; a batch_cancel one ends cancelled unless its three
	// items were done before the cancel (it comes right after the start, so they rarely are; completed is an
	// end the operation's own check accepts, so this only bounds the count).
	batches, cancels := 0, 0
	for _, o := range rep.Ops {
		switch o.Op {
		case loadbench.OpBatch:
			batches += o.Count
		case loadbench.OpBatchCancel:
			batches += o.Count
			cancels += o.Count
		}
	}
	if rep.Jobs.Batches != batches || rep.Jobs.BatchesEnded != batches || rep.Jobs.BatchesCancelled > cancels {
		t.Errorf("%d batch operations (%d cancelled), jobs report %+v", batches, cancels, rep.Jobs)
	}
	for _, want := range []string{"| upload_embed |", "| batch |", "0 lost, 0 stuck", "equal; charged twice: 0", "(all delivered)", "(all stored)"} {
		if !strings.Contains(md, want) || !strings.Contains(stdout, want) {
			t.Errorf("report.md or stdout lacks %q:\n%s", want, md)
		}
	}
}

// bench chaos with embed_webhook: the run's receiver answers 500 for the first 9 s (an outbox pass runs every
// 5 s, so one falls between 4 s and 9 s, when jobs have ended), then accepts. Every job of the operation ends and its final event arrives, signed, naming the job's
// outcome, none missing; the deliveries refused while the receiver failed came again on the outbox's schedule
// (30 s later), so some events arrived late and the refusals show in the report. The load is an open loop of
// 2 operations a second (about 15 jobs; what is checked is each job's events, not throughput): a closed loop of
// 2 clients submitted and polled as fast as the machine allowed, 9.8 CPU-s a run where this takes 2.5.
func TestBenchChaosWebhookReceiverFails(t *testing.T) {
	t.Parallel()
	benchCluster(t)
	rep, md, _ := runBenchCmd(t, "chaos", "--nodes", "1", "--rate", "2", "--duration", "10s", "--retry-for", "2m",
		"--mix", "embed_webhook=3,status=1", "--schedule", "0s:stop:webhook,9s:cont:webhook")
	checkAccounting(t, rep)
	w := rep.Webhooks
	if w == nil {
		t.Fatalf("no webhook check in the report: %v", rep.Notes)
	}
	if w.Jobs == 0 || w.Delivered != w.Jobs || w.Missing != 0 || w.Mismatched != 0 || w.NotEnded != 0 || !w.OK() {
		t.Errorf("webhook events: %+v", w)
	}
	if w.BadSignature != 0 || w.Malformed != 0 {
		t.Errorf("deliveries that did not verify: %+v", w)
	}
	if w.Refused == 0 || w.Late == 0 || w.MaxDelayS < 20 {
		t.Errorf("the receiver's failure did not show: %+v", w)
	}
	if !strings.Contains(md, "0 missing, 0 mismatched** (all delivered)") {
		t.Errorf("report.md:\n%s", md)
	}
}

// bench chaos: a closed loop of 4 clients on 3 node processes; node2 is killed (-9) 2 s in and restarted
// 2 s later, the load ending 2 s after that. No operation fails (each retries on another node with its
// Idempotency-Key), no job is lost, stuck or charged twice, the operations in flight at the kill all end, and
// the restarted node serves again. (Restart at 6 s and 10 s of load before: the closed loop's extra seconds
// were routine operations on the nodes, 6.5 -> 3.5 CPU-s.)
func TestBenchChaosKillOneOfThree(t *testing.T) {
	t.Parallel()
	benchCluster(t)
	rep, md, _ := runBenchCmd(t, "chaos", "--nodes", "3", "--clients", "4", "--duration", "6s", "--retry-for", "2m",
		"--mix", "embed=2,embed_async=2,detect=2,status=1,upload_embed=1", "--schedule", "2s:kill:node2,4s:restart:node2")
	checkAccounting(t, rep)
	ch := rep.Chaos
	if ch == nil || len(ch.Actions) != 2 {
		t.Fatalf("chaos section %+v", ch)
	}
	kill, restart := ch.Actions[0], ch.Actions[1]
	if kill.Action != "kill" || kill.Target != "node2" || kill.Error != "" || kill.OpsInFlight == 0 ||
		kill.OpsEnded != kill.OpsInFlight || kill.OpsSucceeded != kill.OpsInFlight || kill.TakeoverS == nil {
		t.Errorf("kill: %+v", kill)
	}
	if restart.Action != "restart" || restart.Error != "" || restart.RecoveryS == nil || *restart.RecoveryS <= 0 {
		t.Errorf("restart: %+v", restart)
	}
	if ch.JobsLost != 0 || ch.JobsStuck != 0 || ch.ChargedTwice != 0 || !ch.CreditsEqual {
		t.Errorf("chaos totals %+v", ch)
	}
	if !strings.Contains(md, "jobs lost 0, stuck 0, charged twice 0") {
		t.Errorf("report.md:\n%s", md)
	}
}

// bench chaos: node2 is frozen (SIGSTOP) longer than the cluster's failure detection allows (quick detection,
// the chaos default: its budget for 3 members is about 16 s; frozen 2 s longer), so the others declare it
// dead; continued, it learns so and exits at once (serve does not drain a node the cluster declared dead),
// and the harness restarts it as a process supervisor would. The report says so, the node serves again, and
// nothing is lost, stuck or charged twice. The load ends 5 s after the continue: the harness watches the node
// exit and restarts it after that (an action under way outlives the load). The load is an open loop of 4
// operations a second, round-robin over the nodes, so the frozen node holds a request or two of every second it
// is frozen, whatever the others answer (a closed loop of 2 clients before: 9.2 CPU-s against 5.0, the extra
// being routine operations on the two live nodes).
//
// It was gated for a while as load-dependent: the node was declared dead in about 6 s even at load 40, but
// once continued it drained for --drain-timeout (20 s) before exiting, past the harness's watch.
//
// Gated again for a while for a bug it found, 1 run in 4: one embed answered 410 result_gone although its job
// succeeded and was charged. The continued node answered a request it had held while frozen, its reads
// cancelled as it stopped, and a failed read was taken for a missing file (TestResultFileReadFailureIsRetryable);
// 30 runs in a row passed after the fix.
//
// Gated a third time for another bug it found, about 1 run in 35: a job stayed `running` for minutes after
// the frozen node resumed ("stuck 1"), and polls of an embed's receipt answered 404 meanwhile: another node's
// activation of the job actor had found no record and kept that, and the sweeper's tick dropped the job's
// active-index entry before the resumed node's late commit of the record landed (TestPausedSubmissionsLateCommit).
// After the fix, 102 runs in a row passed without a stuck job.
//
// A fourth, once in a warm-suite run: the ledger charged an embed job the client never saw succeed, and
// another embed was answered with a job that was not its own. A job actor answered its waiters when the job
// ended, one of them a request of the frozen node from before it was declared dead; the restarted node, its
// requests numbered from zero again, had a request with the same number, which took that answer
// (cluster/clustertest TestLateReplyToEarlierIncarnation).
func TestBenchChaosFrozenNodeRestarted(t *testing.T) {
	t.Parallel()
	benchCluster(t)
	freeze := clustertest.DetectionBudget(clustertest.QuickDetection(), 3) + 2*time.Second
	cont := time.Second + freeze
	rep, md, _ := runBenchCmd(t, "chaos", "--nodes", "3", "--rate", "4", "--duration", (cont + 5*time.Second).String(),
		"--retry-for", "2m", "--mix", "embed=1,status=2", "--schedule", "1s:stop:node2,"+cont.String()+":cont:node2")
	checkAccounting(t, rep)
	ch := rep.Chaos
	if ch == nil || len(ch.Actions) != 2 {
		t.Fatalf("chaos section %+v", ch)
	}
	if c := ch.Actions[1]; c.Action != "cont" || c.Error != "" || !c.SelfExit || c.RecoveryS == nil || *c.RecoveryS <= 0 {
		t.Errorf("cont of a node frozen for %s: %+v (want it restarted after exiting on its own)", freeze, c)
	}
	if ch.JobsLost != 0 || ch.JobsStuck != 0 || ch.ChargedTwice != 0 || !ch.CreditsEqual {
		t.Errorf("chaos totals %+v", ch)
	}
	if !strings.Contains(md, "the node had been declared dead, exited and was restarted") {
		t.Errorf("report.md does not say the node was restarted:\n%s", md)
	}
}

// The live display: not on a terminal, a plain line every 5 s and a last one at the end; with "always", the
// bar's line carries the counts; "never" shows nothing.
func TestBenchLoadProgressDisplay(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	show := progressDisplay(&buf, "auto")
	for s := 1; s <= 7; s++ {
		show(loadbench.Progress{Elapsed: time.Duration(s) * time.Second, Duration: 10 * time.Second, OK: s * 10})
	}
	show(loadbench.Progress{Elapsed: 7500 * time.Millisecond, Duration: 10 * time.Second, OK: 75, Failed: 1, Done: true})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "ok 10 ") || !strings.Contains(lines[1], "ok 60 ") ||
		!strings.Contains(lines[2], "ok 75  failed 1") {
		t.Fatalf("plain progress:\n%s", buf.String())
	}
	buf.Reset()
	show = progressDisplay(&buf, "always")
	show(loadbench.Progress{Elapsed: time.Second, Duration: 10 * time.Second, OK: 12, InFlight: 3, Done: true})
	if !strings.Contains(buf.String(), "ok 12  failed 0  in flight 3") {
		t.Fatalf("bar progress: %q", buf.String())
	}
	if progressDisplay(&buf, "never") != nil {
		t.Fatal("never shows a display")
	}
}
