package node_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"filigrane/gpu"
)

// TestGPUEmbedAndDetectOnDevice runs accelerator=gpu work on a real GPU (issue 18 items 2-4): a wake opens the
// device (its context and the codec's kernels) and the accelerator turns ready; a GPU embed answers
// X-Service-Accelerator: gpu and is charged the GPU price (3×); the CPU detector reads its mark; synchronous and
// async GPU detections read it too (the synchronous one charged 3); a GPU embed with output_format=jpeg is a JPEG
// whose mark the CPU reads. It skips, saying so, on machines without a GPU (CI); the `device` tool runs it.
func TestGPUEmbedAndDetectOnDevice(t *testing.T) {
	t.Parallel()
	if !gpu.CodecAvailable() || len(gpu.Devices()) == 0 {
		t.Skip("no GPU with NVRTC here: the GPU path is tested on a machine with one (gpu/cudacodec tests and this test)")
	}
	f := newFixture(t)
	key := f.dev.Secret
	st := call(t, "GET", f.base+"/accelerators/gpu", key, nil)
	if st.status != 200 || !strings.Contains(string(st.body), `"idle"`) {
		t.Fatalf("before a wake: %d %s", st.status, st.body)
	}
	if w := call(t, "POST", f.base+"/accelerators/gpu/wake", key, strings.NewReader(`{}`)); w.status != 200 {
		t.Fatalf("wake: %d %s", w.status, w.body)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		st = call(t, "GET", f.base+"/accelerators/gpu", key, nil)
		var s struct{ Status string }
		json.Unmarshal(st.body, &s)
		if s.Status == "ready" {
			break
		}
		if s.Status != "starting" || time.Now().After(deadline) {
			t.Fatalf("after a wake: %s", st.body)
		}
		<-time.After(50 * time.Millisecond) // polling an observable state, bounded by the deadline
	}
	img := photo(t, 1200, 900, 77)
	before, _ := balance(t, f, f.dev.OrgID)
	s := post(t, f.base+"/watermarks/images?accelerator=gpu", key, "", img, `{"gpu":1}`)
	if s.status != 200 || s.header.Get("X-Service-Accelerator") != "gpu" || s.header.Get("X-Watermark-ID") == "" {
		t.Fatalf("sync gpu embed: %d X-Service-Accelerator %q %s", s.status, s.header.Get("X-Service-Accelerator"), s.body)
	}
	if bal, held := balance(t, f, f.dev.OrgID); bal != before-3 || held != 0 {
		t.Fatalf("after a GPU embed: balance %d held %d, want %d and 0 (the GPU price is 3)", bal, held, before-3)
	}
	// The marked PNG, detected on the CPU (synchronous detection) and on the GPU (an async job).
	d := post(t, f.base+"/watermarks/images/detect", key, "", s.body, "")
	if d.status != 200 || !strings.Contains(string(d.body), s.header.Get("X-Watermark-ID")) {
		t.Fatalf("CPU detection of the GPU's mark: %d %s", d.status, d.body)
	}
	before, _ = balance(t, f, f.dev.OrgID)
	g := post(t, f.base+"/watermarks/images/detect?accelerator=gpu", key, "", s.body, "")
	if g.status != 200 || g.header.Get("X-Service-Accelerator") != "gpu" || !strings.Contains(string(g.body), s.header.Get("X-Watermark-ID")) {
		t.Fatalf("sync GPU detection: %d X-Service-Accelerator %q %s", g.status, g.header.Get("X-Service-Accelerator"), g.body)
	}
	if bal, held := balance(t, f, f.dev.OrgID); bal != before-3 || held != 0 {
		t.Fatalf("after a sync GPU detection: balance %d held %d, want %d and 0", bal, held, before-3)
	}
	a := post(t, f.base+"/watermarks/images/detect/async?accelerator=gpu", key, "", s.body, "")
	if a.status != 202 {
		t.Fatalf("async gpu detect: %d %s", a.status, a.body)
	}
	rc := decodeReceipt(t, a)
	res := waitResult(t, f, key, rc.ResultURL)
	if res.status != 200 || res.header.Get("X-Service-Accelerator") != "gpu" ||
		!strings.Contains(string(res.body), s.header.Get("X-Watermark-ID")) {
		t.Fatalf("GPU detection: %d X-Service-Accelerator %q %s", res.status, res.header.Get("X-Service-Accelerator"), res.body)
	}
	// output_format on the GPU: the device embeds and checks the read-back, the CPU encodes the JPEG.
	j := post(t, f.base+"/watermarks/images?accelerator=gpu&output_format=jpeg", key, "", img, `{"gpu":2}`)
	if j.status != 200 || j.header.Get("X-Service-Accelerator") != "gpu" || j.header.Get("Content-Type") != "image/jpeg" {
		t.Fatalf("sync gpu embed as jpeg: %d X-Service-Accelerator %q Content-Type %q %s", j.status,
			j.header.Get("X-Service-Accelerator"), j.header.Get("Content-Type"), j.body)
	}
	if d := post(t, f.base+"/watermarks/images/detect", key, "", j.body, ""); d.status != 200 ||
		!strings.Contains(string(d.body), j.header.Get("X-Watermark-ID")) {
		t.Fatalf("CPU detection of the GPU's JPEG: %d %s", d.status, d.body)
	}
}
