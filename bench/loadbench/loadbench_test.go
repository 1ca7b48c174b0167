package loadbench

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"filigrane/actors"
	"filigrane/bench/apibench"
	"filigrane/internal/whsign"
)

func TestParseMix(t *testing.T) {
	m, err := ParseMix(" embed=2, status ,detect=0")
	if err != nil || m[OpEmbed] != 2 || m[OpStatus] != 1 || m[OpDetect] != 0 || m.String() != "embed=2,status=1" {
		t.Fatalf("%v %v", m, err)
	}
	for _, bad := range []string{"", "detect=0", "embed=x", "embed=-1", "resize=1"} {
		if _, err := ParseMix(bad); err == nil {
			t.Errorf("ParseMix(%q) accepted", bad)
		}
	}
}

// The operation sequence follows the weights (within a few percent over 20,000 arrivals) and is the same for
// the same seed.
func TestPickFollowsWeights(t *testing.T) {
	m, _ := ParseMix("embed=1,status=3")
	r := &runner{cfg: Config{Seed: 7, Mix: m}}
	counts := map[Op]int{}
	for n := uint64(0); n < 20000; n++ {
		counts[r.pick(n)]++
	}
	if got := float64(counts[OpStatus]) / 20000; got < 0.72 || got > 0.78 || counts[OpEmbed]+counts[OpStatus] != 20000 {
		t.Fatalf("status share %.3f, counts %v", got, counts)
	}
	r2 := &runner{cfg: Config{Seed: 7, Mix: m}}
	for n := uint64(0); n < 100; n++ {
		if r.pick(n) != r2.pick(n) {
			t.Fatal("same seed, different sequence")
		}
	}
}

func TestParseSchedule(t *testing.T) {
	s, err := ParseSchedule("9s:restart:node1, 5s:kill:node1,12s:stop:s3,14s:cont:s3,1s:stop:webhook,2s:cont:webhook", 3)
	if err != nil || len(s) != 6 || s[0].Target != "webhook" || s[2].Kind != "kill" || s[3].Kind != "restart" {
		t.Fatalf("%v %v", s, err)
	}
	for _, bad := range []string{
		"", "5s:kill", "x:kill:node1", "5s:explode:node1", "5s:kill:node3", "5s:kill:nodeX",
		"5s:restart:node1",               // not killed
		"5s:cont:s3",                     // not stopped
		"5s:kill:node1,6s:kill:node1",    // killed twice
		"5s:stop:node0,6s:restart:node0", // stopped, not killed
		"5s:term:webhook",                // the receiver is killed, not shut down
		"5s:restart:webhook",             // not killed
	} {
		if _, err := ParseSchedule(bad, 3); err == nil {
			t.Errorf("ParseSchedule(%q) accepted", bad)
		}
	}
	// The webhook receiver may be killed and restarted.
	if _, err := ParseSchedule("1s:kill:webhook,2s:restart:webhook", 1); err != nil {
		t.Error(err)
	}
	// A frozen process may be killed, then restarted.
	if _, err := ParseSchedule("1s:stop:node0,2s:kill:node0,3s:restart:node0", 1); err != nil {
		t.Error(err)
	}
	// A node terminated (SIGTERM: its graceful shutdown) is restarted like a killed one, and not terminated twice.
	if s, err := ParseSchedule("1s:term:node0,2s:restart:node0,3s:term:node0", 1); err != nil || s[0].Kind != "term" {
		t.Errorf("%v %v", s, err)
	}
	for _, bad := range []string{"1s:term:node0,2s:term:node0", "1s:term:node0,2s:cont:node0", "1s:term:webhook"} {
		if _, err := ParseSchedule(bad, 1); err == nil {
			t.Errorf("ParseSchedule(%q) accepted", bad)
		}
	}
}

// The default schedule is one ParseSchedule accepts, for one node and for several.
func TestDefaultSchedule(t *testing.T) {
	for _, nodes := range []int{1, 3} {
		var parts []string
		for _, a := range DefaultSchedule(time.Minute, nodes) {
			parts = append(parts, a.String())
		}
		s, err := ParseSchedule(strings.Join(parts, ","), nodes)
		if err != nil || len(s) != len(parts) {
			t.Fatalf("%d nodes: %v: %v", nodes, parts, err)
		}
		if s[len(s)-1].At >= time.Minute {
			t.Errorf("%d nodes: last action at %s, after the run", nodes, s[len(s)-1].At)
		}
	}
}

// A report writes its three files; the chart is a PNG of the documented size, with chaos actions drawn.
func TestReportFiles(t *testing.T) {
	at := 1.5
	rep := &Report{Mode: "open", Rate: 5, Mix: "embed=1", Targets: []string{"http://127.0.0.1:1"},
		Ops:     []OpReport{{Op: OpEmbed, Count: 3, OK: 2, Failed: 1, Failures: map[string]int{"503 service_unavailable": 1}}},
		Errors:  map[string]int{"503 service_unavailable": 1},
		Credits: &Credits{ChargedOps: 2, ClientSuccesses: 2, Equal: true},
		Series:  []SecondReport{{T: 0, OK: 1, P50Ms: 10, P95Ms: 20, P99Ms: 30}, {T: 1, OK: 1, Failed: 1, P50Ms: 12, P95Ms: 25, P99Ms: 40}},
		Chaos:   &ChaosReport{Actions: []ActionReport{{AtS: 1, Action: "kill", Target: "node0", OpsInFlight: 1, OpsEnded: 1, OpsSucceeded: 1, TakeoverS: &at}}},
	}
	dir := t.TempDir()
	if err := rep.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "chart.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil || img.Bounds().Dx() != 820 {
		t.Fatalf("chart: %v %v", err, img.Bounds())
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	for _, want := range []string{"## Chaos benchmark", "503 service_unavailable: 1", "| 1.0 | kill | node0 | 1 | 1 (1) | 1.50 |", "equal"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
}

// A batch's archive passes the check only with one non-empty file per succeeded item under its documented
// name and a manifest naming the same request ids and no failure.
func TestCheckArchive(t *testing.T) {
	items := []batchItemView{{Index: 0, Filename: "photo0.jpg"}, {Index: 1, Filename: "photo1.jpg"}}
	succeeded := map[int]string{0: "req_a", 1: "req_b"}
	build := func(files map[string]string, manifest string) []byte {
		var b bytes.Buffer
		zw := zip.NewWriter(&b)
		for name, body := range files {
			w, _ := zw.Create(name)
			w.Write([]byte(body))
		}
		w, _ := zw.Create("manifest.json")
		w.Write([]byte(manifest))
		zw.Close()
		return b.Bytes()
	}
	good := map[string]string{"000-photo0-watermarked.png": "x", "001-photo1-watermarked.png": "y"}
	manifest := `{"batch_id":"bat_1","files":[{"index":0,"filename":"000-photo0-watermarked.png","request_id":"req_a"},` +
		`{"index":1,"filename":"001-photo1-watermarked.png","request_id":"req_b"}],"failed":[]}`
	if err := checkArchive(build(good, manifest), "bat_1", succeeded, items); err != nil {
		t.Fatal(err)
	}
	for name, zipBody := range map[string][]byte{
		"a file missing":     build(map[string]string{"000-photo0-watermarked.png": "x"}, manifest),
		"an empty file":      build(map[string]string{"000-photo0-watermarked.png": "x", "001-photo1-watermarked.png": ""}, manifest),
		"another batch":      build(good, strings.Replace(manifest, "bat_1", "bat_2", 1)),
		"a wrong request id": build(good, strings.Replace(manifest, "req_b", "req_c", 1)),
		"a failure listed":   build(good, strings.Replace(manifest, `"failed":[]`, `"failed":[{"index":1}]`, 1)),
		"not a zip":          []byte("PK not really"),
		"a file misnamed":    build(map[string]string{"000-photo0-watermarked.png": "x", "001-photo9-watermarked.png": "y"}, strings.ReplaceAll(manifest, "001-photo1", "001-photo9")),
	} {
		if err := checkArchive(zipBody, "bat_1", succeeded, items); err == nil {
			t.Errorf("an archive with %s passed", name)
		}
	}
	// batch_media's items keep their own extension's base: doc1.pdf is 001-doc1-watermarked.pdf.
	media := []batchItemView{{Index: 0, Filename: "photo0.jpg"}, {Index: 1, Filename: "doc1.pdf"}, {Index: 2, Filename: "clip2.mp4"}}
	mediaFiles := map[string]string{"000-photo0-watermarked.png": "x", "001-doc1-watermarked.pdf": "y", "002-clip2-watermarked.mp4": "z"}
	mediaManifest := `{"batch_id":"bat_1","files":[{"index":0,"filename":"000-photo0-watermarked.png","request_id":"req_a"},` +
		`{"index":1,"filename":"001-doc1-watermarked.pdf","request_id":"req_b"},{"index":2,"filename":"002-clip2-watermarked.mp4","request_id":"req_c"}],"failed":[]}`
	if err := checkArchive(build(mediaFiles, mediaManifest), "bat_1", map[int]string{0: "req_a", 1: "req_b", 2: "req_c"}, media); err != nil {
		t.Fatalf("batch_media archive: %v", err)
	}
}

// batch_media sends a photo, the document and the clip, each under a name whose extension selects its kind,
// as many items as a batch of photos; its create body names them with their sizes.
func TestBatchMediaFiles(t *testing.T) {
	r := &runner{batchFile: []byte("jpg"), pdfFile: []byte("%PDF-doc"), clipFile: []byte("....ftypclip")}
	files := r.batchFiles(OpBatchMedia)
	if len(files) != BatchItems || files[1].name != "doc1.pdf" || string(files[1].data) != "%PDF-doc" ||
		files[2].name != "clip2.mp4" || files[2].contentType != "video/mp4" || string(files[2].data) != "....ftypclip" {
		t.Fatalf("%+v", files)
	}
	body := string(r.batchCreateBody(OpBatchMedia, "k1"))
	for _, want := range []string{`"filename":"photo0.jpg","size":3`, `"filename":"doc1.pdf","size":8`, `"filename":"clip2.mp4","size":12`} {
		if !strings.Contains(body, want) {
			t.Errorf("create body %s lacks %s", body, want)
		}
	}
	if cancelled := r.batchFiles(OpBatchMediaCancel); len(cancelled) != BatchItems || cancelled[2].name != "clip2.mp4" {
		t.Errorf("batch_media_cancel files %+v", cancelled)
	}
	if photos := r.batchFiles(OpBatch); len(photos) != BatchItems || photos[2].name != "photo2.jpg" {
		t.Errorf("batch files %+v", photos)
	}
}

// The webhook receiver records a delivery only when both signature schemes verify and the body's id is the
// event id header; it answers 500 while failing; the check counts a job without an event as missing, one
// whose event names another outcome as mismatched, and a repeat as a duplicate.
func TestWebhookReceiver(t *testing.T) {
	w, err := startWebhookReceiver()
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	secret, _ := whsign.NewSecret()
	w.secret, w.id = secret, "wh_test"
	post := func(id, body string, sign string) int {
		hdrs, err := whsign.Sign([]string{sign}, id, time.Now(), []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("POST", w.url, strings.NewReader(body))
		for _, h := range hdrs {
			req.Header.Set(h.Name, h.Value)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	ev := func(id, typ, req, status string) string {
		return `{"id":"` + id + `","type":"` + typ + `","data":{"request_id":"` + req + `","status":"` + status + `"}}`
	}
	other, _ := whsign.NewSecret()
	if got := post("evt_1", ev("evt_1", "watermark.embed.succeeded", "req_a", "succeeded"), other); got != 400 {
		t.Errorf("wrong secret: %d", got)
	}
	if got := post("evt_x", ev("evt_1", "watermark.embed.succeeded", "req_a", "succeeded"), secret); got != 400 {
		t.Errorf("id header not the body's: %d", got)
	}
	w.setFailing(true)
	if got := post("evt_1", ev("evt_1", "watermark.embed.succeeded", "req_a", "succeeded"), secret); got != 500 {
		t.Errorf("failing: %d", got)
	}
	w.setFailing(false)
	for range 2 {
		if got := post("evt_1", ev("evt_1", "watermark.embed.succeeded", "req_a", "succeeded"), secret); got != 204 {
			t.Errorf("good delivery: %d", got)
		}
	}
	if got := post("evt_2", ev("evt_2", "watermark.embed.succeeded", "req_b", "succeeded"), secret); got != 204 {
		t.Errorf("good delivery: %d", got)
	}
	// A job server: req_a succeeded, req_b failed (its event says succeeded), req_c succeeded (no event).
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		status := map[string]string{"req_a": "succeeded", "req_b": "failed", "req_c": "succeeded"}[path.Base(r.URL.Path)]
		rw.Write([]byte(`{"request_id":"x","status":"` + status + `"}`))
	}))
	defer srv.Close()
	r := &runner{cfg: Config{Targets: []string{srv.URL}, Key: "k", RetryFor: time.Second}, http: newHTTPClient(4, time.Second),
		webhooks: w, whJobs: map[string]time.Time{}}
	for _, id := range []string{"req_a", "req_b", "req_c"} {
		r.webhookJob(id, time.Now())
	}
	// Killed, the receiver refuses deliveries; restarted on its address, it takes them again (even when it was
	// answering 500 before the kill) and kept what it had.
	w.setFailing(true)
	if err := w.kill(); err != nil {
		t.Fatal(err)
	}
	if res, err := http.Post(w.url, "application/json", strings.NewReader("{}")); err == nil {
		res.Body.Close()
		t.Fatalf("killed receiver answered %d", res.StatusCode)
	}
	if err := w.restart(); err != nil {
		t.Fatal(err)
	}
	if err := w.restart(); err == nil {
		t.Error("restarted while it runs")
	}
	if got := post("evt_1", ev("evt_1", "watermark.embed.succeeded", "req_a", "succeeded"), secret); got != 204 {
		t.Errorf("after the restart: %d", got)
	}
	rep := r.checkWebhooks(context.Background(), 0)
	if rep.Jobs != 3 || rep.Delivered != 1 || rep.Missing != 1 || rep.MissingIDs[0] != "req_c" || rep.Mismatched != 1 ||
		rep.MismatchedIDs[0] != "req_b" || rep.Duplicates != 2 || rep.Refused != 1 || rep.BadSignature != 1 ||
		rep.Malformed != 1 || rep.Deliveries != 7 || rep.OK() {
		t.Errorf("%+v", rep)
	}
}

// The storage check reads each embed_storage job's receipt and its stored object on whichever node answers:
// a dead node's turn moves on (a 5-node chaos run with a node left dead counted a fifth of the results
// unreadable before). A stored result that reads back counts as stored, a failed delivery as failed.
func TestStorageCheckSkipsDeadNode(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	live := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/watermarks/jobs/req_a":
			rw.Write([]byte(`{"status":"succeeded","storage_status":"stored","storage_delivery_id":"std_a"}`))
		case "/watermarks/jobs/req_b":
			rw.Write([]byte(`{"status":"succeeded","storage_status":"failed","storage_delivery_id":"std_b"}`))
		case "/storage/deliveries/std_a/content":
			rw.Write([]byte("PNG"))
		default:
			http.NotFound(rw, r)
		}
	}))
	defer live.Close()
	r := &runner{cfg: Config{Targets: []string{dead.URL, live.URL}, Key: "k", RetryFor: 5 * time.Second, PollInterval: time.Millisecond},
		http: newHTTPClient(4, time.Second), destID: "dst_1", stJobs: map[string]bool{"req_a": true, "req_b": true}}
	rep := r.checkStorage(context.Background(), time.Second)
	if rep.Jobs != 2 || rep.Stored != 1 || rep.Failed != 1 || rep.FailedIDs[0] != "req_b" || rep.Unreadable != 0 || rep.OK() {
		t.Errorf("%+v", rep)
	}
}

// The credits check holds an embed_gpu job that ran on a CPU to a plain embed's price (three times it is held):
// one charged at the held amount is reported; jobs that ran on a GPU, or were not charged, are not judged here.
func TestGPUChargesOnCPU(t *testing.T) {
	r := &runner{jobs: newJobBook()}
	r.jobs.ranOn("req_gpu_ok", "cpu")
	r.jobs.ranOn("req_gpu_triple", "cpu")
	r.jobs.ranOn("req_gpu_on_gpu", "gpu")
	seen := map[string]Op{"req_plain": OpEmbed, "req_gpu_ok": OpEmbedGPU, "req_gpu_triple": OpEmbedGPU, "req_gpu_on_gpu": OpEmbedGPU}
	amounts := map[string]int64{"req_plain": 2, "req_gpu_ok": 2, "req_gpu_triple": 6, "req_gpu_on_gpu": 6}
	checked, wrong := r.gpuCharges(seen, amounts)
	if checked != 2 || len(wrong) != 1 || !strings.HasPrefix(wrong[0], "req_gpu_triple charged 6") {
		t.Fatalf("checked %d, wrong %q: want 2 checked and req_gpu_triple reported", checked, wrong)
	}
}

// fixedLedger is a ledger whose entries since the run's mark and credits held now are given.
type fixedLedger struct {
	entries []actors.LedgerEntry
	held    int64
}

func (l fixedLedger) Mark(context.Context) (LedgerMark, error) { return LedgerMark{}, nil }

func (l fixedLedger) Since(context.Context, LedgerMark) ([]actors.LedgerEntry, LedgerMark, error) {
	return l.entries, LedgerMark{Seq: uint64(len(l.entries)), Held: l.held}, nil
}

// The credits check fails when credits are still held after the run (a hold that outlived its operation:
// a key-less synchronous detection on a killed node), and allows a charge the client did not see only for
// as many key-less requests (detect_nokey) as lost their answer: those cannot be replayed, so their ids
// stay unknown to the client.
func TestCreditsHeldAfterAndKeylessLost(t *testing.T) {
	// req_job is a job of the service (a batch item, say) that the client never saw succeed; the others have
	// no job record, as a key-less detection has none.
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/watermarks/jobs/req_job" {
			rw.Write([]byte(`{"status":"succeeded","operation":"embed","batch_id":"bat_1","attempts":1}`))
			return
		}
		http.NotFound(rw, r)
	}))
	defer srv.Close()
	charge := func(op string) actors.LedgerEntry {
		return actors.LedgerEntry{Operation: op, Kind: "charge", Amount: 1}
	}
	for _, tc := range []struct {
		name        string
		held        int64
		entries     []actors.LedgerEntry
		unkeyedLost int64
		equal       bool
	}{
		{"all seen, nothing held", 0, []actors.LedgerEntry{charge("req_a")}, 0, true},
		{"a hold left", 1, []actors.LedgerEntry{charge("req_a")}, 0, false},
		{"charge not seen, no key-less answer lost", 0, []actors.LedgerEntry{charge("req_a"), charge("req_x")}, 0, false},
		{"charge not seen, one key-less answer lost", 0, []actors.LedgerEntry{charge("req_a"), charge("req_x")}, 1, true},
		{"two charges not seen, one key-less answer lost", 0, []actors.LedgerEntry{charge("req_a"), charge("req_x"), charge("req_y")}, 1, false},
		{"a job's charge not seen, key-less answers lost", 0, []actors.LedgerEntry{charge("req_a"), charge("req_job")}, 3, false},
	} {
		r := &runner{jobs: newJobBook(), http: newHTTPClient(4, time.Second),
			cfg: Config{Ledger: fixedLedger{entries: tc.entries, held: tc.held}, Targets: []string{srv.URL}, Key: "k"}}
		r.jobs.success("req_a", OpDetectNoKey)
		r.unkeyedLost.Store(tc.unkeyedLost)
		c, err := r.credits(context.Background(), LedgerMark{})
		if c == nil || c.Equal != tc.equal || (err == nil) != tc.equal {
			t.Errorf("%s: credits %+v, error %v; want equal %v", tc.name, c, err, tc.equal)
		}
	}
}

// Every operation is in the report order exactly once, standard or extra, and a mix may name an extra one.
func TestOrderedOpsCoverStandardAndExtra(t *testing.T) {
	seen := map[Op]int{}
	for _, o := range orderedOps {
		seen[o]++
	}
	for _, o := range append(append([]Op(nil), AllOps...), ExtraOps...) {
		seen[o]--
	}
	for o, n := range seen {
		if n != 0 {
			t.Errorf("%s: %d more in orderedOps than in AllOps and ExtraOps", o, n)
		}
	}
	m, err := ParseMix("detect_nokey=2,status=1")
	if err != nil || m[OpDetectNoKey] != 2 || m.String() != "detect_nokey=2,status=1" || m.pick(0) != OpDetectNoKey || m.pick(2) != OpStatus {
		t.Fatalf("mix %v, %v", m, err)
	}
}

// --concurrency sets the bench plan's concurrent jobs and keeps the rest of the plan (its lifted rate limit).
func TestWithConcurrency(t *testing.T) {
	cat, err := apibench.PlanCatalog()
	if err != nil {
		t.Fatal(err)
	}
	out, err := withConcurrency(cat, 4)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "plans.json")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	plans, err := actors.LoadCatalog(path)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := plans.Plan("business")
	if !ok || p.Concurrency != 4 || p.RequestsPerMinute != apibench.UnlimitedRequestsPerMinute || !p.GPU {
		t.Fatalf("plan %+v", p)
	}
}

// A continued node's watch (up to about 14 s, for the node exiting on its own) does not hold back the next
// action on that node: the node is frozen again when the schedule says, the watch is told to stop first, and
// what a watch writes into its action's report is kept. Before, the next freeze waited for the watch to end
// (chaos12: a second 4.5 s freeze ran 8 s late and lasted 0 s).
func TestScheduleDoesNotWaitForAContinuedNodesWatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	schedule := []Action{{0, "stop", "node0"}, {0, "cont", "node0"}, {0, "stop", "node0"}, {0, "cont", "node0"}}
	var mu sync.Mutex
	var events []string
	note := func(e string) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}
	secondStop, release := make(chan struct{}), make(chan struct{})
	conts, stops := 0, 0
	done := make(chan struct{})
	var actions []ActionReport
	go func() {
		defer close(done)
		actions, _ = runSchedule(ctx, ctx, time.Now(), schedule, func(ctx context.Context, a Action, ar *ActionReport) func(<-chan struct{}) {
			if a.Kind == "stop" {
				note("stop")
				if stops++; stops == 2 {
					close(secondStop)
				}
				return nil
			}
			conts++
			n := conts
			note(fmt.Sprintf("cont %d", n))
			return func(stop <-chan struct{}) {
				select {
				case <-stop:
					note(fmt.Sprintf("watch %d stopped", n))
				case <-release:
					note(fmt.Sprintf("watch %d ended", n))
					ar.SelfExit = true
				case <-ctx.Done():
				}
			}
		})
	}()
	select {
	case <-secondStop:
	case <-ctx.Done():
		t.Fatalf("the second stop did not run while the first cont's watch went on: %v", events)
	}
	close(release)
	<-done
	want := []string{"stop", "cont 1", "watch 1 stopped", "stop", "cont 2", "watch 2 ended"}
	if fmt.Sprint(events) != fmt.Sprint(want) {
		t.Errorf("events %v, want %v", events, want)
	}
	if len(actions) != 4 || actions[1].SelfExit || !actions[3].SelfExit || actions[2].Action != "stop" {
		t.Errorf("actions %+v", actions)
	}
}

// embed_pdf and embed_video submit their file to the kind's async route, follow the job and check the
// downloaded result: its type, how it starts and its X-Watermark-ID. A succeeded job whose result is not the
// kind's file fails the operation but is still booked as charged (the service charged it).
func TestEmbedMediaChecksResult(t *testing.T) {
	for _, tc := range []struct {
		name   string
		op     Op
		route  string
		ctype  string
		result []byte
		wmID   string
		ok     bool
		fail   string
	}{
		{"pdf", OpEmbedPDF, "/watermarks/documents/async", "application/pdf", []byte("%PDF-1.7 marked"), "ab12", true, ""},
		{"video", OpEmbedVideo, "/watermarks/videos/async", "video/mp4", []byte("\x00\x00\x00\x20ftypisom"), "ab12", true, ""},
		{"pdf answered as an image", OpEmbedPDF, "/watermarks/documents/async", "image/png", []byte("\x89PNG"), "ab12", false, "result type image/png"},
		{"video that is not an MP4", OpEmbedVideo, "/watermarks/videos/async", "video/mp4", []byte("not a video"), "ab12", false, "result not a video/mp4 file"},
		{"pdf without its watermark id", OpEmbedPDF, "/watermarks/documents/async", "application/pdf", []byte("%PDF-1.7"), "", false, "result without X-Watermark-ID"},
	} {
		var mu sync.Mutex
		var posted []string
		polls := 0
		srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case r.Method == "POST":
				posted = append(posted, r.URL.Path+" "+r.Header.Get("Idempotency-Key"))
				rw.WriteHeader(202)
				rw.Write([]byte(`{"request_id":"req_m","status":"pending"}`))
			case r.URL.Path == "/watermarks/jobs/req_m":
				polls++
				st := "processing"
				if polls > 1 {
					st = "succeeded"
				}
				fmt.Fprintf(rw, `{"request_id":"req_m","status":%q}`, st)
			case r.URL.Path == "/watermarks/jobs/req_m/result":
				rw.Header().Set("Content-Type", tc.ctype)
				if tc.wmID != "" {
					rw.Header().Set("X-Watermark-ID", tc.wmID)
				}
				rw.Write(tc.result)
			default:
				http.NotFound(rw, r)
			}
		}))
		r := &runner{cfg: Config{Targets: []string{srv.URL}, Key: "k", PollInterval: time.Millisecond},
			http: newHTTPClient(4, time.Second), jobs: newJobBook(),
			pdfBody: &bodyParts{ContentType: "multipart/form-data; boundary=x", Data: []byte("pdf")}, videoBody: &bodyParts{ContentType: "multipart/form-data; boundary=x", Data: []byte("mp4")}}
		a := &attempt{r: r, op: tc.op, idem: "idem-1", giveUp: time.Now().Add(5 * time.Second)}
		a.run(context.Background())
		srv.Close()
		if a.out.ok != tc.ok || a.out.failure != tc.fail || a.out.requestID != "req_m" {
			t.Errorf("%s: ok %v failure %q id %q; want ok %v failure %q", tc.name, a.out.ok, a.out.failure, a.out.requestID, tc.ok, tc.fail)
		}
		if len(posted) != 1 || posted[0] != tc.route+" idem-1" {
			t.Errorf("%s: posted %q, want one POST to %s with its Idempotency-Key", tc.name, posted, tc.route)
		}
		if op, ok := r.jobs.seen["req_m"]; !ok || op != tc.op {
			t.Errorf("%s: the succeeded job is booked as %q (%v), want %s", tc.name, op, ok, tc.op)
		}
	}
}

// The credits check prices the document and video embeds the client saw succeed with the catalog's rates: a
// document its rate per file, the clip (under a minute) one started minute, a detection the detect rate; a
// charge of another amount fails the check. A job found succeeded only by the final check keeps its operation.
func TestMediaCharges(t *testing.T) {
	prices := actors.DefaultCatalog().Prices
	prices.DocumentEmbed, prices.VideoEmbedPerMinute = 2, 5
	r := &runner{jobs: newJobBook(), cfg: Config{Prices: &prices}}
	r.jobs.accepted("req_late_video", OpEmbedVideo, time.Now())
	r.jobs.lateSuccess("req_late_video")
	r.jobs.success("req_pdf", OpEmbedPDF)
	r.jobs.success("req_pdf_wrong", OpEmbedPDF)
	r.jobs.success("req_video", OpEmbedVideo)
	r.jobs.success("req_image", OpEmbedAsync)
	r.jobs.success("req_detect_video", OpDetectVideo)
	amounts := map[string]int64{"req_pdf": 2, "req_pdf_wrong": 6, "req_video": 5, "req_late_video": 10, "req_image": 1, "req_detect_video": 1}
	checked, wrong := r.mediaCharges(r.jobs.seen, amounts)
	if checked != 5 || len(wrong) != 2 || !strings.HasPrefix(wrong[0], "req_late_video (embed_video) charged 10, want 5") ||
		!strings.HasPrefix(wrong[1], "req_pdf_wrong (embed_pdf) charged 6, want 2") {
		t.Fatalf("checked %d, wrong %q", checked, wrong)
	}
	r.cfg.Ledger = fixedLedger{entries: []actors.LedgerEntry{
		{Operation: "req_pdf", Kind: "charge", Amount: 2}, {Operation: "req_pdf_wrong", Kind: "charge", Amount: 6},
		{Operation: "req_video", Kind: "charge", Amount: 5}, {Operation: "req_late_video", Kind: "charge", Amount: 5},
		{Operation: "req_image", Kind: "charge", Amount: 1}, {Operation: "req_detect_video", Kind: "charge", Amount: 1}}}
	if c, err := r.credits(context.Background(), LedgerMark{}); err == nil || c.Equal || len(c.MediaChargedWrong) != 1 {
		t.Fatalf("a PDF charged 6 for 2 passed the credits check: %+v", c)
	}
	// A clip over a minute starts two: a video embed of it is charged two minutes' rate.
	r.cfg.VideoSeconds = 61
	if checked, wrong := r.mediaCharges(map[string]Op{"req_long": OpEmbedVideo}, map[string]int64{"req_long": 10}); checked != 1 || len(wrong) != 0 {
		t.Fatalf("a 61 s clip charged two minutes (10): checked %d, wrong %q", checked, wrong)
	}
	// Without the catalog's prices (running nodes), nothing is priced.
	r.cfg.Prices = nil
	if checked, wrong := r.mediaCharges(r.jobs.seen, amounts); checked != 0 || wrong != nil {
		t.Fatalf("without prices: checked %d, wrong %q", checked, wrong)
	}
}

// detect_pdf is answered in the request and detect_video runs as a job whose JSON result is downloaded: each
// succeeds only when the detection found the mark, and each answered detection is booked as charged, found or
// not (the service charges a detection it answered).
func TestDetectMedia(t *testing.T) {
	for _, tc := range []struct {
		name   string
		op     Op
		result string
		ok     bool
	}{
		{"pdf found", OpDetectPDF, `{"watermarked": true, "confidence": 0.99}`, true},
		{"pdf not found", OpDetectPDF, `{"watermarked":false,"confidence":0.1}`, false},
		{"video found", OpDetectVideo, `{"watermarked":true,"units":[]}`, true},
		{"video not found", OpDetectVideo, `{"watermarked":false}`, false},
	} {
		var posted []string
		var mu sync.Mutex
		srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case r.Method == "POST" && r.URL.Path == "/watermarks/documents/detect":
				posted = append(posted, r.URL.Path)
				rw.Header().Set("X-Request-ID", "req_d")
				rw.Write([]byte(tc.result))
			case r.Method == "POST" && r.URL.Path == "/watermarks/videos/detect/async":
				posted = append(posted, r.URL.Path)
				rw.WriteHeader(202)
				rw.Write([]byte(`{"request_id":"req_d","status":"queued"}`))
			case r.URL.Path == "/watermarks/jobs/req_d":
				rw.Write([]byte(`{"request_id":"req_d","status":"succeeded"}`))
			case r.URL.Path == "/watermarks/jobs/req_d/result":
				rw.Header().Set("Content-Type", "application/json")
				rw.Write([]byte(tc.result))
			default:
				http.NotFound(rw, r)
			}
		}))
		marked := &bodyParts{ContentType: "multipart/form-data; boundary=x", Data: []byte("marked")}
		r := &runner{cfg: Config{Targets: []string{srv.URL}, Key: "k", PollInterval: time.Millisecond},
			http: newHTTPClient(4, time.Second), jobs: newJobBook(), markedPDF: marked, markedClip: marked}
		a := &attempt{r: r, op: tc.op, idem: "idem-d", giveUp: time.Now().Add(5 * time.Second)}
		a.run(context.Background())
		srv.Close()
		wantPath := "/watermarks/documents/detect"
		if tc.op == OpDetectVideo {
			wantPath = "/watermarks/videos/detect/async"
		}
		if a.out.ok != tc.ok || (!tc.ok && a.out.failure != "detection did not find the mark") || len(posted) != 1 || posted[0] != wantPath {
			t.Errorf("%s: ok %v failure %q posted %q", tc.name, a.out.ok, a.out.failure, posted)
		}
		if op, ok := r.jobs.seen["req_d"]; !ok || op != tc.op {
			t.Errorf("%s: the answered detection is booked as %q (%v), want %s", tc.name, op, ok, tc.op)
		}
	}
}

// upload_video creates a signed upload of kind video with the clip's size, PUTs the clip to its URL, and
// embeds by upload_id on the video route; the result is checked as embed_video's.
func TestUploadVideo(t *testing.T) {
	clip := []byte("\x00\x00\x00\x20ftypisom clip")
	var mu sync.Mutex
	var log []string
	var srvURL string
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		body := new(bytes.Buffer)
		body.ReadFrom(r.Body)
		switch {
		case r.Method == "POST" && r.URL.Path == "/uploads":
			log = append(log, "create "+body.String())
			rw.WriteHeader(201)
			fmt.Fprintf(rw, `{"upload_id":"upl_1","upload":{"method":"PUT","url":%q}}`, srvURL+"/put/upl_1")
		case r.Method == "PUT" && r.URL.Path == "/put/upl_1":
			log = append(log, fmt.Sprintf("put %d bytes", body.Len()))
		case r.Method == "POST" && r.URL.Path == "/watermarks/videos/async":
			has := strings.Contains(body.String(), `name="upload_id"`) && strings.Contains(body.String(), "upl_1")
			log = append(log, fmt.Sprintf("embed upload_id=%v key=%s", has, r.Header.Get("Idempotency-Key")))
			rw.WriteHeader(202)
			rw.Write([]byte(`{"request_id":"req_u","status":"succeeded"}`))
		case r.URL.Path == "/watermarks/jobs/req_u/result":
			rw.Header().Set("Content-Type", "video/mp4")
			rw.Header().Set("X-Watermark-ID", "ab")
			rw.Write(clip)
		default:
			http.NotFound(rw, r)
		}
	}))
	defer srv.Close()
	srvURL = srv.URL
	r := &runner{cfg: Config{Targets: []string{srv.URL}, Key: "k", PollInterval: time.Millisecond, Data: `{"a":1}`},
		http: newHTTPClient(4, time.Second), jobs: newJobBook(), clipFile: clip}
	a := &attempt{r: r, op: OpUploadVideo, idem: "idem-u", giveUp: time.Now().Add(5 * time.Second)}
	a.run(context.Background())
	want := []string{fmt.Sprintf(`create {"filename":"clip.mp4","kind":"video","size":%d}`, len(clip)),
		fmt.Sprintf("put %d bytes", len(clip)), "embed upload_id=true key=idem-u"}
	if !a.out.ok || a.out.requestID != "req_u" || strings.Join(log, "|") != strings.Join(want, "|") {
		t.Fatalf("ok %v failure %q, requests %q; want %q", a.out.ok, a.out.failure, log, want)
	}
	if r.jobs.seen["req_u"] != OpUploadVideo {
		t.Errorf("booked as %q", r.jobs.seen["req_u"])
	}
}

// video_storage is embed_video naming the run's storage destination: the POST carries storage_destination_id
// and the job is one of the storage check's.
func TestVideoStorage(t *testing.T) {
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "POST" && r.URL.Path == "/watermarks/videos/async":
			query = r.URL.RawQuery
			rw.WriteHeader(202)
			rw.Write([]byte(`{"request_id":"req_s","status":"succeeded"}`))
		case r.URL.Path == "/watermarks/jobs/req_s/result":
			rw.Header().Set("Content-Type", "video/mp4")
			rw.Header().Set("X-Watermark-ID", "ab")
			rw.Write([]byte("\x00\x00\x00\x20ftypisom"))
		default:
			http.NotFound(rw, r)
		}
	}))
	defer srv.Close()
	r := &runner{cfg: Config{Targets: []string{srv.URL}, Key: "k", PollInterval: time.Millisecond},
		http: newHTTPClient(4, time.Second), jobs: newJobBook(), destID: "dst_1", stJobs: map[string]bool{},
		videoBody: &bodyParts{ContentType: "multipart/form-data; boundary=x", Data: []byte("mp4")}}
	a := &attempt{r: r, op: OpVideoStorage, idem: "idem-s", giveUp: time.Now().Add(5 * time.Second)}
	a.run(context.Background())
	if !a.out.ok || query != "storage_destination_id=dst_1" || !r.stJobs["req_s"] || r.jobs.seen["req_s"] != OpVideoStorage {
		t.Fatalf("ok %v (%s), query %q, storage jobs %v, booked %q", a.out.ok, a.out.failure, query, r.stJobs, r.jobs.seen["req_s"])
	}
}

// A batch polled while its archive waits for an assembly slot and then is built shows both states among the
// operation's retried answers, one per poll, so that a run's report says whether its archives queued.
func TestFollowBatchCountsArchiveStates(t *testing.T) {
	answers := []string{"queued", "queued", "assembling"}
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path != "/watermarks/batches/bat_1" {
			http.NotFound(rw, r)
			return
		}
		if len(answers) == 0 {
			fmt.Fprint(rw, `{"batch_id":"bat_1","status":"completed","archive_status":"ready","items":[]}`)
			return
		}
		fmt.Fprintf(rw, `{"batch_id":"bat_1","status":"assembling","archive_status":%q,"items":[]}`, answers[0])
		answers = answers[1:]
	}))
	defer srv.Close()
	r := &runner{cfg: Config{Targets: []string{srv.URL}, Key: "k", PollInterval: time.Millisecond},
		http: newHTTPClient(4, time.Second), jobs: newJobBook()}
	a := &attempt{r: r, op: OpBatch, giveUp: time.Now().Add(5 * time.Second)}
	b := &batchView{BatchID: "bat_1", Status: "processing"}
	if got := a.followBatch(context.Background(), b); got != batchDone {
		t.Fatalf("followBatch = %v, failure %q", got, a.out.failure)
	}
	want := map[string]int{"poll: archive_status queued": 2, "poll: archive_status assembling": 1}
	if fmt.Sprint(a.out.retries) != fmt.Sprint(want) {
		t.Errorf("retried answers %v, want %v", a.out.retries, want)
	}
}

// Two operations (each with its own Idempotency-Key) answered with one request id: the report says so, naming
// both, where it otherwise showed only a charge "not seen" (the other operation's job).
func TestOneRequestIDAnsweringTwoOperationsIsReported(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Write([]byte(`{"status":"succeeded","operation":"embed","attempts":1}`))
	}))
	defer srv.Close()
	charge := func(op string) actors.LedgerEntry {
		return actors.LedgerEntry{Operation: op, Kind: "charge", Amount: 1}
	}
	r := &runner{jobs: newJobBook(), http: newHTTPClient(4, time.Second),
		cfg: Config{Ledger: fixedLedger{entries: []actors.LedgerEntry{charge("req_a"), charge("req_b")}},
			Targets: []string{srv.URL}, Key: "k"}}
	for _, n := range []uint64{7, 9} { // in this order: a map's would vary, and with it the note's
		r.jobs.success("req_a", OpEmbed)
		r.jobs.answered("req_a", n, OpEmbed)
	}
	r.jobs.answered("req_a", 7, OpEmbed) // the same operation again is not a second answer
	c, _ := r.credits(context.Background(), LedgerMark{})
	if c == nil || c.Equal {
		t.Fatalf("credits %+v: want not equal", c)
	}
	var shared []string
	for _, n := range c.UnseenNotes {
		if strings.Contains(n, "were both answered with request id req_a") {
			shared = append(shared, n)
		}
	}
	if len(shared) != 1 || !strings.Contains(shared[0], "operations 7 and 9") {
		t.Fatalf("notes %q: want one naming operations 7 and 9", c.UnseenNotes)
	}
}
