package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"filigrane/actors"
	"filigrane/actors/jobstate"
	"filigrane/cluster"
	"filigrane/internal/clock"
	"filigrane/internal/loglines"
	"filigrane/internal/node"
	"filigrane/persistence"
	"filigrane/persistence/diskspace"
)

// smallFS mounts a tmpfs of size bytes on a temporary directory for the test: a real filesystem that fills up.
// Mounting needs root; elsewhere the test is skipped, saying so.
func smallFS(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root (the disk-full tests run as root in CI's container)")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.FormatInt(size, 10)); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fillTo takes the filesystem of dir down to free bytes free with one file, and returns a func that removes it.
func fillTo(t *testing.T, dir string, free uint64) func() {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	avail := st.Bavail * uint64(st.Bsize)
	if avail <= free {
		t.Fatalf("only %d bytes free, want to fill down to %d", avail, free)
	}
	name := filepath.Join(dir, "filler")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, int64(avail-free)); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
}

// A node whose data directory's filesystem runs low refuses new files (below --min-free-disk) and then new
// records (below a quarter of it) with 503 service_unavailable and Retry-After: 30, charges nothing for what
// it refused, keeps running, and takes work again as soon as space is freed, without a restart. Before, a
// full disk answered 503 without Retry-After while files failed, and the node panicked (Pebble's fatal
// commit error) once a record write met the full disk; restarted on it, the start never finished.
func TestLowDiskRefusesThenRecovers(t *testing.T) {
	t.Parallel()
	fs := smallFS(t, 48<<20)
	clk := clock.NewManual(time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC))
	n := startNode(t, filepath.Join(fs, "data"), clk, func(c *node.Config) { c.MinFreeDisk = 16 << 20 })
	defer stopNode(t, n)
	key, org := n.DevOrg.Secret, n.DevOrg.OrgID
	api := "http://" + n.APIAddr()
	img := photo(t, 320, 256, 7)
	embed := func() response { return post(t, api+"/watermarks/images", key, "", img, `{"o":1}`) }
	createUpload := func() response {
		return call(t, "POST", api+"/uploads", key,
			strings.NewReader(`{"filename":"a.jpg","size":1000,"kind":"image"}`))
	}
	refused := func(what string, r response) {
		t.Helper()
		if r.status != 503 || r.header.Get("Retry-After") != "30" {
			t.Fatalf("%s on a low disk: %d Retry-After %q %s, want 503 with Retry-After 30", what, r.status, r.header.Get("Retry-After"), r.body)
		}
		// The rate limiter counted the request before the disk refused it: its headers say so on the 503 too
		// (docs/api.md, Rate limits).
		if r.header.Get("X-RateLimit-Limit") == "" || r.header.Get("X-RateLimit-Remaining") == "" || r.header.Get("X-RateLimit-Reset") == "" {
			t.Fatalf("%s on a low disk: 503 without the X-RateLimit-* headers of the request the limiter counted: %v", what, r.header)
		}
		if p := decodeProblem(t, r); p.Code != "service_unavailable" || !strings.Contains(p.Detail, "disk space") {
			t.Fatalf("%s on a low disk: %+v", what, p)
		}
	}
	balanceNow := func() int64 {
		t.Helper()
		rep, err := actors.OrgClient{Caller: n.Cluster()}.Get(context.Background(), org)
		if err != nil || rep.Code != actors.ReplyOK {
			t.Fatalf("balance: %v %+v", err, rep)
		}
		return rep.Balance
	}

	if r := embed(); r.status != 200 {
		t.Fatalf("embed with space: %d %s", r.status, r.body)
	}
	start := balanceNow()

	// Under the files' reserve: files are refused, records still written; the metric shows what is left.
	free := fillTo(t, fs, 10<<20)
	if m := call(t, "GET", api+"/metrics", "", nil); !regexp.MustCompile(`(?m)^filigrane_data_disk_free_bytes [0-9.e+]+$`).Match(m.body) {
		t.Fatalf("no filigrane_data_disk_free_bytes in the metrics")
	}
	refused("embed", embed())
	if r := createUpload(); r.status != 201 {
		t.Fatalf("upload created above the records' reserve: %d %s", r.status, r.body)
	}
	free()
	if r := embed(); r.status != 200 {
		t.Fatalf("embed once space is freed: %d %s", r.status, r.body)
	}

	// Under the records' reserve: records are refused too, and the node stays up.
	free = fillTo(t, fs, 2<<20)
	refused("embed", embed())
	refused("POST /uploads", createUpload())
	if r := call(t, "GET", api+"/auth/api-key", key, nil); r.status != 200 {
		t.Fatalf("a read on a low disk: %d %s", r.status, r.body)
	}
	// A start on the same filesystem now stops with the reason (it never ended on a full disk).
	_, err := node.Start(context.Background(), node.Config{DataDir: filepath.Join(fs, "other"), APIAddr: "127.0.0.1:0",
		UploadAddr: "127.0.0.1:0", Logger: zerolog.Nop(), Clock: clk, SweepInterval: -1, MinFreeDisk: 16 << 20})
	if err == nil || !strings.Contains(err.Error(), "low on free space") {
		t.Fatalf("start on a low disk: %v, want an error saying the disk is low", err)
	}
	free()
	if r := createUpload(); r.status != 201 {
		t.Fatalf("upload created once space is freed: %d %s", r.status, r.body)
	}
	if r := embed(); r.status != 200 {
		t.Fatalf("embed once space is freed: %d %s", r.status, r.body)
	}
	if got := start - balanceNow(); got != 2 {
		t.Fatalf("charged %d credits for the two embeds that succeeded after the first, want 2", got)
	}
	if r := call(t, "GET", api+"/readyz", "", nil); r.status != 200 {
		t.Fatalf("readyz after recovery: %d %s", r.status, r.body)
	}
}

// lowDiskFixture is a fixture whose disk guard the test sets low (files refused, records still written) and
// back, on the real filesystem of the test's temporary directory: a reserve of twice the free space refuses
// files, and its quarter (half the free space) still lets records through.
func lowDiskFixture(t *testing.T) (f *fixture, low func(), freed func()) {
	t.Helper()
	g := diskspace.New(t.TempDir(), 1)
	f = newFixture(t, func(c *node.Config) { c.DiskGuard = g })
	low = func() {
		free, err := g.Free()
		if err != nil {
			t.Error(err)
			return
		}
		g.SetReserve(2 * free)
	}
	return f, low, func() { g.SetReserve(1) }
}

// lowOnFirstClaim makes the disk low when a worker first claims a job, after its input was stored: the attempt
// then meets the low disk when it stores its result.
func lowOnFirstClaim(f *fixture, low func()) {
	var once sync.Once
	f.n.Pool().OnClaim = func(context.Context, string) bool {
		once.Do(low)
		return true
	}
}

// jobRecord is the job's record as its actor holds it.
func jobRecord(t *testing.T, f *fixture, requestID string) *jobstate.Record {
	t.Helper()
	rep, err := actors.JobClient{Caller: f.n.Cluster()}.Get(context.Background(), f.orgA, requestID)
	if err != nil || rep.Record == nil {
		t.Fatalf("job %s: %v %+v", requestID, err, rep)
	}
	return rep.Record
}

// waitDiskWaits polls the job actor until the job waits for disk space for the n-th time.
func waitDiskWaits(t *testing.T, f *fixture, requestID string, n int) *jobstate.Record {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rec := jobRecord(t, f, requestID)
		if rec.DiskWaits == n && rec.Status == jobstate.StatusRetrying {
			return rec
		}
		if rec.Attempts > 0 && rec.Status != jobstate.StatusRunning || time.Now().After(deadline) {
			t.Fatalf("job %s never waited for disk space %d times (%s, %d waits, %d attempts, last error %+v)",
				requestID, n, rec.Status, rec.DiskWaits, rec.Attempts, rec.LastError)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An async job whose result cannot be stored because the node is low on disk space waits for space instead of
// spending its attempts: more tries than a job's 5 attempts go by, each wait doubling up to 30 s, and the job
// is still retrying with no attempt counted; once space is freed it succeeds on its first counted attempt and
// is charged once. Before, each low-disk try counted, and the job failed for good with processing_error after
// 5 attempts (about a minute).
func TestJobWaitsForDiskSpace(t *testing.T) {
	t.Parallel()
	f, low, freed := lowDiskFixture(t)
	lowOnFirstClaim(f, low)
	rc, before := submitAsyncEmbed(t, f, 11, `{"disk":"low"}`)
	waits := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, wait := range waits {
		rec := waitDiskWaits(t, f, rc.RequestID, i+1)
		if rec.Attempts != 0 || rec.NextAttemptAt.Sub(f.clk.Now()) != wait {
			t.Fatalf("after low-disk try %d: %d attempts, next try in %v, want 0 attempts and a wait of %v",
				i+1, rec.Attempts, rec.NextAttemptAt.Sub(f.clk.Now()), wait)
		}
		if st := decodeReceipt(t, call(t, "GET", f.base+rc.StatusURL, f.keyA, nil)); st.Status != "retrying" || st.Attempts != 0 {
			t.Fatalf("receipt while waiting for disk space: %s", st.raw)
		}
		f.clk.Advance(wait)
		if i == len(waits)-1 {
			freed()
		}
		if _, _, err := f.n.Sweep(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	requireSucceededOnce(t, f, rc, before)
}

// A job still waiting for disk space at its deadline (30 minutes for an image) fails then with
// deadline_exceeded, saying the disk was low, and its hold is refunded. Before, it failed long before the
// deadline with processing_error, its attempts spent on a condition an operator clears by freeing space.
func TestJobLowOnDiskAtDeadlineFailsRefunded(t *testing.T) {
	t.Parallel()
	f, low, _ := lowDiskFixture(t)
	lowOnFirstClaim(f, low)
	rc, before := submitAsyncEmbed(t, f, 12, `{"disk":"full"}`)
	waitDiskWaits(t, f, rc.RequestID, 1)
	f.clk.Advance(jobstate.BaseDeadline)
	if _, _, err := f.n.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitJob(t, f, rc.RequestID, "failed")
	final := decodeReceipt(t, call(t, "GET", f.base+rc.StatusURL, f.keyA, nil))
	if final.ErrorCode == nil || *final.ErrorCode != "deadline_exceeded" || final.Attempts != 0 {
		t.Fatalf("receipt at the deadline: %s, want failed with deadline_exceeded after 0 attempts", final.raw)
	}
	res := call(t, "GET", f.base+rc.ResultURL, f.keyA, nil)
	var p struct{ Code, Detail string }
	if err := json.Unmarshal(res.body, &p); err != nil || res.status != 503 || p.Code != "deadline_exceeded" ||
		!strings.Contains(p.Detail, "low on disk space") {
		t.Fatalf("result at the deadline: %d %s", res.status, res.body)
	}
	if after, held := balance(t, f, f.orgA); after != before || held != 0 {
		t.Fatalf("balance %d (held %d) after the failure, want %d refunded", after, held, before)
	}
}

// A synchronous detection sent with an Idempotency-Key runs as a job that the edge claims; when its node is low
// on disk space and cannot store the detection, the request is answered at once with 503 service_unavailable
// and Retry-After 30 (a synchronous detection has no 202), nothing is charged, and once space is freed a retry
// with the same key replays the job to its result. Before, the job spent its 5 attempts on the low disk and the
// request answered 500 processing_error (about 30 s later); with the jobs' waits alone, it would wait out its
// whole budget (about 5 minutes) and answer 202, which a synchronous detection does not have.
func TestSyncDetectLowOnDiskAnswers503(t *testing.T) {
	t.Parallel()
	f, low, freed := lowDiskFixture(t)
	before, _ := balance(t, f, f.orgA)
	u := uploaded(t, f, f.keyA, "detect", "a.png", photo(t, 320, 256, 13))
	low()
	detect := func() response {
		return postUpload(t, f.base+"/watermarks/images/detect", f.keyA, "detect-low-disk", u.UploadID, "")
	}
	r := detect()
	if p := decodeProblem(t, r); r.status != 503 || r.header.Get("Retry-After") != "30" || p.Code != "service_unavailable" ||
		!strings.Contains(p.Detail, "disk space") {
		t.Fatalf("sync detect on a low disk: %d Retry-After %q %s", r.status, r.header.Get("Retry-After"), r.body)
	}
	if after, held := balance(t, f, f.orgA); after != before {
		t.Fatalf("balance %d (held %d) after the refusal, want %d", after, held, before)
	}
	reqID := r.header.Get("X-Request-ID")
	if rec := jobRecord(t, f, reqID); !rec.WaitingForDisk() || rec.Attempts != 0 {
		t.Fatalf("the refused detection's job: %s, %d attempts, last error %+v, want waiting for disk space", rec.Status, rec.Attempts, rec.LastError)
	}
	freed()
	f.clk.Advance(2 * time.Second)
	if _, _, err := f.n.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitJob(t, f, reqID, "succeeded")
	if r := detect(); r.status != 200 {
		t.Fatalf("the same detection once space is freed: %d %s", r.status, r.body)
	}
	if after, _ := balance(t, f, f.orgA); before-after != 1 {
		t.Fatalf("charged %d, want 1", before-after)
	}
}

// A node below its free-space reserve tells the cluster so (its member's LowDisk, which placement reads to send
// work to nodes with room) and says so on /readyz while staying ready, 200: it still serves reads, downloads
// and the deletes that free space, and every refused write answers 503 with Retry-After on its own. Below a
// quarter of the reserve the check says records are refused too. Once space is freed both clear without a
// restart. Before, neither the cluster nor /readyz showed anything.
func TestLowDiskAdvertisedAndReady(t *testing.T) {
	t.Parallel()
	g := diskspace.New(t.TempDir(), 1)
	clk := clock.NewManual(time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC))
	n := startNode(t, t.TempDir(), clk, func(c *node.Config) { c.DiskGuard = g })
	t.Cleanup(func() { stopNode(t, n) })
	ready := "http://" + n.APIAddr() + "/readyz"
	gossipsLow := func(want bool) {
		t.Helper()
		timeout := time.After(10 * time.Second) // the node reads its disk every second
		for {
			changed := n.Cluster().MembersChanged()
			if slices.ContainsFunc(n.Cluster().Members(), func(m cluster.Member) bool { return m.Self && m.LowDisk == want }) {
				return
			}
			select {
			case <-changed:
			case <-timeout:
				t.Fatalf("the node's member never showed LowDisk %v", want)
			}
		}
	}
	diskCheck := func(want string) {
		t.Helper()
		if r := getReady(t, ready); r.status != 200 || !strings.HasPrefix(r.checks["disk"], want) || r.checks["storage"] != "ok" {
			t.Fatalf("/readyz = %+v, want 200 with storage ok and a disk check beginning %q", r, want)
		}
	}
	diskCheck("ok")
	free, err := g.Free()
	if err != nil {
		t.Fatal(err)
	}
	g.SetReserve(2 * free) // files refused, records still written
	gossipsLow(true)
	diskCheck("low: under the free-space reserve, new files are refused")
	g.SetReserve(8 * free) // records refused too
	diskCheck("low: under a quarter of the free-space reserve, new files and records are refused")
	if r := call(t, "GET", "http://"+n.APIAddr()+"/healthz", "", nil); r.status != 200 {
		t.Fatalf("/healthz on a low disk: %d %s", r.status, r.body)
	}
	g.SetReserve(1)
	gossipsLow(false)
	diskCheck("ok")
}

// Below an eighth of the reserve even a worker's reports on its attempt cannot be written (below a quarter they
// still are: TestWorkerReportsBelowTheRecordsReserveSurviveRestart, actors): the worker's report that its
// attempt met a low disk is refused, and so are its renewals, so the attempt's lease runs out with nothing
// recorded.
// Once space is freed, the sweeper's tick ends that attempt as a wait for disk space, not counted (the job
// actor kept the refused report), and the job succeeds on its first counted attempt, charged once. Before, the
// lapsed lease counted as a lost worker (worker_lost, attempt 1 of 5).
func TestJobLowOnRecordsWaitsUncounted(t *testing.T) {
	t.Parallel()
	lines := loglines.New(256)
	g := diskspace.New(t.TempDir(), 1)
	f := newFixture(t, func(c *node.Config) {
		c.DiskGuard, c.Logger = g, zerolog.New(lines).Level(zerolog.WarnLevel)
	})
	var once sync.Once
	f.n.Pool().OnClaim = func(context.Context, string) bool {
		once.Do(func() { // outcomes refused too: a reserve of 16 times the free space has an eighth of twice it
			free, err := g.Free()
			if err != nil {
				t.Error(err)
			}
			g.SetReserve(16 * free)
		})
		return true
	}
	rc, before := submitAsyncEmbed(t, f, 14, `{"disk":"records"}`)
	lines.Wait(t, "outcome not recorded", 30*time.Second) // the worker's low-disk report was refused
	f.clk.Advance(time.Minute)                            // past the attempt's 30 s lease, never renewed
	g.SetReserve(1)                                       // space freed
	if _, _, err := f.n.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rec := jobRecord(t, f, rc.RequestID); !rec.WaitingForDisk() || rec.Attempts != 0 || rec.DiskWaits != 1 {
		t.Fatalf("after the lapse: %s, %d attempts, %d disk waits, last error %+v; want waiting for disk space, no attempt counted",
			rec.Status, rec.Attempts, rec.DiskWaits, rec.LastError)
	}
	f.clk.Advance(2 * time.Second)
	if _, _, err := f.n.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	requireSucceededOnce(t, f, rc, before)
}

// Below an eighth of the reserve a worker's report that its result is stored is refused, and the job's
// activation keeps it in memory only (TestJobLowOnRecordsWaitsUncounted): here the node then stops while that
// low and starts again once space is freed, which loses it. The worker wrote the result's outcome file beside
// it before reporting, so once the lapsed lease is ticked the job succeeds from the stored result, on its one
// attempt, charged once, and the file is deleted. Before, the lapse counted as a lost worker (retrying,
// worker_lost) and the next attempt made the stored result again.
func TestRefusedSuccessSurvivesRestart(t *testing.T) {
	t.Parallel()
	lines := loglines.New(256)
	g := diskspace.New(t.TempDir(), 1)
	// Near the reserve, not below it: workers keep outcome files only then (OutcomeFiles.Needed).
	free, err := g.Free()
	if err != nil {
		t.Fatal(err)
	}
	g.SetReserve(free / 3 * 2)
	// A short lease: the worker stops sending its refused report again after one lease of wall time (the
	// record's lease runs on the manual clock).
	config := func(c *node.Config) {
		c.DiskGuard, c.Logger, c.LeaseDuration = g, zerolog.New(lines).Level(zerolog.WarnLevel), time.Second
	}
	f := newFixture(t, config)
	var once sync.Once
	f.n.Pool().OnReport = func(context.Context, string) {
		once.Do(func() { // the result and its outcome file are stored; now outcomes are refused too
			free, err := g.Free()
			if err != nil {
				t.Error(err)
			}
			g.SetReserve(16 * free)
		})
	}
	rc, before := submitAsyncEmbed(t, f, 15, `{"disk":"restart"}`)
	lines.Wait(t, "report outcome", 30*time.Second) // the worker gave up sending its refused success
	outcome := "outputs/" + f.orgA + "/" + rc.RequestID + "/outcome"
	if _, err := f.n.Blobs().Stat(context.Background(), outcome); err != nil {
		t.Fatalf("the outcome file before the restart: %v", err)
	}

	f.stop(t)
	g.SetReserve(1) // space freed: a node does not start below a quarter of the reserve
	f.n = startNode(t, f.dataDir, f.clk, config)
	f.base = "http://" + f.n.APIAddr()
	f.clk.Advance(time.Minute) // past the attempt's lease, never renewed
	if _, _, err := f.n.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rec := jobRecord(t, f, rc.RequestID); rec.Status != jobstate.StatusSucceeded || rec.Attempts != 1 {
		t.Fatalf("after the restart and the lapse: %s, %d attempts, last error %+v; want succeeded from the stored result",
			rec.Status, rec.Attempts, rec.LastError)
	}
	requireSucceededOnce(t, f, rc, before)
	if _, err := f.n.Blobs().Stat(context.Background(), outcome); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("the outcome file once the job succeeded: %v; want deleted", err)
	}
}

// requireSucceededOnce: the job of receipt rc, once space is back, serves its result, succeeded after one counted
// attempt, and cost exactly one credit from the balance before, nothing left held.
func requireSucceededOnce(t *testing.T, f *fixture, rc receipt, before int64) {
	t.Helper()
	if res := waitResult(t, f, f.keyA, rc.ResultURL); res.status != 200 {
		t.Fatalf("result once space is freed: %d %s", res.status, res.body)
	}
	if final := decodeReceipt(t, call(t, "GET", f.base+rc.StatusURL, f.keyA, nil)); final.Status != "succeeded" || final.Attempts != 1 {
		t.Fatalf("final receipt: %s, want succeeded after 1 attempt", final.raw)
	}
	if after, held := balance(t, f, f.orgA); before-after != 1 || held != 0 {
		t.Fatalf("charged %d (held %d), want exactly 1", before-after, held)
	}
}

// submitAsyncEmbed sends an async embed of a 320x256 photo (seed) with data for organization A and returns its
// 202 receipt and the balance before it.
func submitAsyncEmbed(t *testing.T, f *fixture, seed uint64, data string) (receipt, int64) {
	t.Helper()
	before, _ := balance(t, f, f.orgA)
	r := post(t, f.base+"/watermarks/images/async", f.keyA, "", photo(t, 320, 256, seed), data)
	if r.status != 202 {
		t.Fatalf("async embed: %d %s", r.status, r.body)
	}
	return decodeReceipt(t, r), before
}
