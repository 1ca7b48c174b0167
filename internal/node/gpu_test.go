package node_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"filigrane/actors"
	"filigrane/internal/node"
)

// Tests of accelerator=gpu on a node without a ready GPU (issue 18 item 3): by default the work runs on the
// CPU, 3x held and the normal price charged, and says so in X-Service-Accelerator; strict mode answers 503
// with Retry-After. The development organization's business plan includes GPU processing.

func gpuStrict(c *node.Config) { c.GPUStrict = true }

func TestGPUFallbackHoldsThreeChargesOneOnCPU(t *testing.T) {
	t.Parallel()
	f := newFixture(t, inMemory(t))
	key := f.dev.Secret
	img := photo(t, 320, 320, 41)
	release := make(chan struct{})
	f.n.Pool().OnClaim = func(ctx context.Context, id string) bool {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return true
	}
	before, _ := balance(t, f, f.dev.OrgID)

	r := post(t, f.base+"/watermarks/images/async?accelerator=gpu", key, "", img, `{"g":1}`)
	if r.status != 202 {
		t.Fatalf("async gpu embed without a GPU: %d %s", r.status, r.body)
	}
	rc := decodeReceipt(t, r)
	if rc.AcceleratorRequested != "gpu" {
		t.Fatalf("receipt %s", r.body)
	}
	// While the job waits for a worker, three times the price is held.
	if bal, held := balance(t, f, f.dev.OrgID); bal != before || held != 3 {
		t.Fatalf("while queued: balance %d held %d, want %d and 3", bal, held, before)
	}
	close(release)
	res := waitResult(t, f, key, rc.ResultURL)
	if res.status != 200 || res.header.Get("X-Service-Accelerator") != "cpu" {
		t.Fatalf("result: %d X-Service-Accelerator %q %s", res.status, res.header.Get("X-Service-Accelerator"), res.body)
	}
	done := decodeReceipt(t, call(t, "GET", f.base+rc.StatusURL, key, nil))
	if done.Status != "succeeded" || done.AcceleratorRequested != "gpu" || done.Accelerator == nil || *done.Accelerator != "cpu" || done.Credits != 1 {
		t.Fatalf("finished receipt %+v", done)
	}
	if bal, held := balance(t, f, f.dev.OrgID); bal != before-1 || held != 0 {
		t.Fatalf("after the CPU run: balance %d held %d, want %d and 0", bal, held, before-1)
	}

	// A synchronous embed falls back the same way and answers the image.
	s := post(t, f.base+"/watermarks/images?accelerator=gpu", key, "", img, `{"g":2}`)
	if s.status != 200 || s.header.Get("X-Service-Accelerator") != "cpu" || s.header.Get("X-Watermark-ID") == "" {
		t.Fatalf("sync gpu embed: %d X-Service-Accelerator %q %s", s.status, s.header.Get("X-Service-Accelerator"), s.body)
	}
	if bal, held := balance(t, f, f.dev.OrgID); bal != before-2 || held != 0 {
		t.Fatalf("after the sync run: balance %d held %d, want %d and 0", bal, held, before-2)
	}
	// A batch asking for the GPU is accepted too (its items hold 3x each when they start).
	b := sendRaw(t, f.base+"/watermarks/batches", key, "gpu-batch-fallback-01", "application/json",
		[]byte(`{"archive":false,"accelerator":"gpu","items":[{"filename":"a.png","size":100,"data":{"a":1}}]}`))
	if b.status != 201 || !strings.Contains(string(b.body), `"accelerator":"gpu"`) {
		t.Fatalf("gpu batch without strict mode: %d %s", b.status, b.body)
	}
}

// With 2 credits left, a gpu request (embed, or synchronous detection) cannot hold its 3 (402) while a cpu
// request still runs. On TCP: synchronous detection watches the connection.
func TestGPUHoldNeedsThreeTimesThePrice(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	img := photo(t, 320, 320, 42)
	// Only the development organization's plan has GPU access: drain it to 2 credits.
	bal, _ := balance(t, f, f.dev.OrgID)
	drain(t, f, f.dev.OrgID, bal-2)
	r := post(t, f.base+"/watermarks/images?accelerator=gpu", f.dev.Secret, "", img, `{"g":3}`)
	wantProblem(t, "gpu with 2 credits", r, 402, "insufficient_credits")
	if !strings.Contains(string(r.body), "3 needed") {
		t.Fatalf("402 body does not say 3 credits are needed: %s", r.body)
	}
	if c := post(t, f.base+"/watermarks/images", f.dev.Secret, "", img, `{"g":3}`); c.status != 200 || c.header.Get("X-Service-Accelerator") != "cpu" {
		t.Fatalf("cpu with 2 credits: %d %s", c.status, c.body)
	}
	if bal, held := balance(t, f, f.dev.OrgID); bal != 1 || held != 0 {
		t.Fatalf("balance %d held %d, want 1 and 0", bal, held)
	}
	wantProblem(t, "gpu detection with 1 credit", post(t, f.base+"/watermarks/images/detect?accelerator=gpu", f.dev.Secret, "", img, ""), 402, "insufficient_credits")
	if d := post(t, f.base+"/watermarks/images/detect", f.dev.Secret, "", img, ""); d.status != 200 || d.header.Get("X-Service-Accelerator") != "cpu" {
		t.Fatalf("cpu detection with 1 credit: %d %s", d.status, d.body)
	}
	if bal, held := balance(t, f, f.dev.OrgID); bal != 0 || held != 0 {
		t.Fatalf("after detection: balance %d held %d, want 0 and 0", bal, held)
	}
}

// drain spends n credits of org outside the API (a hold then its charge), to set up a low balance.
func drain(t *testing.T, f *fixture, org string, n int64) {
	t.Helper()
	orgs := actors.OrgClient{Caller: f.n.Cluster()}
	ctx := context.Background()
	if r, err := orgs.Reserve(ctx, actors.OrgReserve{OrgID: org, Op: "test-drain", Credits: n}); err != nil || r.Code != actors.ReplyOK {
		t.Fatalf("drain hold: %v %+v", err, r)
	}
	if r, err := orgs.Charge(ctx, actors.OrgCharge{OrgID: org, Op: "test-drain", Credits: n}); err != nil || r.Code != actors.ReplyOK {
		t.Fatalf("drain charge: %v %+v", err, r)
	}
}

// The same Idempotency-Key with another accelerator is 409 in either direction, without strict mode.
func TestGPUKeyWithOtherAcceleratorConflicts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, inMemory(t))
	key := f.dev.Secret
	img := photo(t, 320, 320, 43)
	if r := post(t, f.base+"/watermarks/images", key, "acc-cpu-first-01", img, `{"a":1}`); r.status != 200 {
		t.Fatalf("cpu request: %d %s", r.status, r.body)
	}
	wantProblem(t, "cpu key replayed with gpu in the query",
		post(t, f.base+"/watermarks/images?accelerator=gpu", key, "acc-cpu-first-01", img, `{"a":1}`), 409, "idempotency_conflict")
	wantProblem(t, "cpu key replayed with gpu in the form",
		postFields(t, f.base+"/watermarks/images", key, "acc-cpu-first-01", img, "data", `{"a":1}`, "accelerator", "gpu"), 409, "idempotency_conflict")
	if r := post(t, f.base+"/watermarks/images?accelerator=gpu", key, "acc-gpu-first-01", img, `{"a":1}`); r.status != 200 {
		t.Fatalf("gpu request: %d %s", r.status, r.body)
	}
	wantProblem(t, "gpu key replayed with cpu",
		post(t, f.base+"/watermarks/images?accelerator=cpu", key, "acc-gpu-first-01", img, `{"a":1}`), 409, "idempotency_conflict")
	// The unchanged replay answers the stored result.
	if r := post(t, f.base+"/watermarks/images?accelerator=gpu", key, "acc-gpu-first-01", img, `{"a":1}`); r.status != 200 || r.header.Get("X-Service-Accelerator") != "cpu" {
		t.Fatalf("gpu replay: %d %q %s", r.status, r.header.Get("X-Service-Accelerator"), r.body)
	}
}

// Strict mode: no GPU is ready, so accelerator=gpu is 503 gpu_unavailable with Retry-After, nothing is
// held, and cpu requests are untouched; a batch with accelerator gpu is refused the same way.
func TestGPUStrictModeRefuses(t *testing.T) {
	t.Parallel()
	f := newFixture(t, inMemory(t), gpuStrict)
	key := f.dev.Secret
	img := photo(t, 320, 320, 44)
	before, _ := balance(t, f, f.dev.OrgID)
	for _, url := range []string{"/watermarks/images?accelerator=gpu", "/watermarks/images/async?accelerator=gpu"} {
		r := post(t, f.base+url, key, "", img, `{"s":1}`)
		wantProblem(t, url, r, 503, "gpu_unavailable")
		if r.header.Get("Retry-After") != "30" {
			t.Fatalf("%s: Retry-After %q", url, r.header.Get("Retry-After"))
		}
	}
	b := sendRaw(t, f.base+"/watermarks/batches", key, "gpu-batch-strict-01", "application/json",
		[]byte(`{"archive":false,"accelerator":"gpu","items":[{"filename":"a.png","size":100,"data":{"a":1}}]}`))
	wantProblem(t, "gpu batch", b, 503, "gpu_unavailable")
	if bal, held := balance(t, f, f.dev.OrgID); bal != before || held != 0 {
		t.Fatalf("strict refusals moved credits: balance %d held %d, want %d and 0", bal, held, before)
	}
	if r := post(t, f.base+"/watermarks/images", key, "", img, `{"s":2}`); r.status != 200 || r.header.Get("X-Service-Accelerator") != "cpu" {
		t.Fatalf("cpu request in strict mode: %d %s", r.status, r.body)
	}
}

// A job and a batch made with accelerator=gpu (the job run on the CPU: no GPU here), then the node restarted in
// strict mode with no GPU ready: the unchanged replays answer the stored job and batch, and the same key with
// another output format (which only the form says) or other items is 409, not strict mode's 503 (nothing to run
// on a GPU in either); a new key is 503.
func TestGPUStrictModeAnswersReplaysOfGPUJobs(t *testing.T) {
	t.Parallel()
	f := newFixture(t, inMemory(t))
	key := f.dev.Secret
	img := photo(t, 320, 320, 45)
	first := post(t, f.base+"/watermarks/images?accelerator=gpu", key, "gpu-strict-replay-01", img, `{"r":1}`)
	if first.status != 200 {
		t.Fatalf("gpu request: %d %s", first.status, first.body)
	}
	batch := func(name string) []byte {
		return []byte(`{"archive":false,"accelerator":"gpu","items":[{"filename":"` + name + `","size":100,"data":{"a":1}}]}`)
	}
	if b := sendRaw(t, f.base+"/watermarks/batches", key, "gpu-strict-batch-01", "application/json", batch("a.png")); b.status != 201 {
		t.Fatalf("gpu batch: %d %s", b.status, b.body)
	}
	stopNode(t, f.n)
	f.n = startNode(t, f.dataDir, f.clk, inMemory(t), gpuStrict)
	f.base = "http://" + f.n.APIAddr()
	again := post(t, f.base+"/watermarks/images?accelerator=gpu", key, "gpu-strict-replay-01", img, `{"r":1}`)
	if again.status != 200 || !bytes.Equal(again.body, first.body) {
		t.Fatalf("replay in strict mode: %d %s, want the first answer", again.status, again.body)
	}
	wantProblem(t, "same key, another output format in the form",
		postFields(t, f.base+"/watermarks/images?accelerator=gpu", key, "gpu-strict-replay-01", img, "data", `{"r":1}`,
			"output_format", "webp"), 409, "idempotency_conflict")
	wantProblem(t, "new key", post(t, f.base+"/watermarks/images?accelerator=gpu", key, "gpu-strict-replay-02", img, `{"r":1}`),
		503, "gpu_unavailable")
	// The same for batches: the replay is the batch, other items under its key are 409, a new key is 503.
	if b := sendRaw(t, f.base+"/watermarks/batches", key, "gpu-strict-batch-01", "application/json", batch("a.png")); b.status != 200 {
		t.Fatalf("gpu batch replay in strict mode: %d %s", b.status, b.body)
	}
	wantProblem(t, "batch key with other items",
		sendRaw(t, f.base+"/watermarks/batches", key, "gpu-strict-batch-01", "application/json", batch("b.png")), 409, "idempotency_conflict")
	wantProblem(t, "new batch key",
		sendRaw(t, f.base+"/watermarks/batches", key, "gpu-strict-batch-02", "application/json", batch("a.png")), 503, "gpu_unavailable")
}
