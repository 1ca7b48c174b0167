package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"filigrane/gpu"
	"filigrane/gpu/cuda"
)

// fakeCUDA builds the gpu package's stand-in driver library (two 8 GiB devices that cannot run kernels).
func fakeCUDA(t *testing.T) string {
	t.Helper()
	if !cuda.LoaderBuilt {
		t.Skip("built with the nogpu tag: no dynamic loader")
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Fatalf("no C compiler (cc) to build the fake driver library: %v; install one (Debian: apt-get install gcc)", err)
	}
	out := filepath.Join(t.TempDir(), "libcuda.so.1")
	src := filepath.Join("..", "..", "gpu", "testdata", "fakecuda.c")
	if b, err := exec.Command(cc, "-shared", "-fPIC", "-DFAKE_DEVICES=2", "-o", out, src).CombinedOutput(); err != nil {
		t.Fatalf("build fake driver: %v\n%s", err, b)
	}
	return out
}

func TestGPUInfoListsDevices(t *testing.T) {
	t.Setenv(gpu.EnvDriver, fakeCUDA(t))
	t.Setenv(gpu.EnvNVRTC, filepath.Join(t.TempDir(), "libnvrtc.so.12"))
	t.Setenv(gpu.EnvGPU, "")
	code, out, errOut := runCLI(t, "gpu", "info")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s, stdout %s", code, errOut, out)
	}
	for _, want := range []string{
		"(CUDA 12.4)",
		"device 0: Fake GPU 0, 8.0 GiB, compute 9.0, 132 SMs",
		"device 1: Fake GPU 1, 8.0 GiB, compute 9.0, 132 SMs",
		"nvrtc:    missing (the smoke kernel uses the PTX built into the binary)",
		"node reports its accelerator unavailable",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// The fake cannot create contexts: the smoke test fails, says why, and the exit status says so.
	code, out, _ = runCLI(t, "gpu", "info", "--smoke", "--json")
	var rep gpuReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out)
	}
	if code != 1 || !rep.Available || len(rep.Smoke) != 2 || rep.Smoke[0].Passed ||
		!strings.Contains(rep.Smoke[0].Error, "CUDA_ERROR_NOT_SUPPORTED") || rep.Inventory.TotalMemory() != 16<<30 {
		t.Fatalf("exit %d, report %+v", code, rep)
	}
}

func TestGPUInfoWithoutGPU(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "libcuda.so.1")
	t.Setenv(gpu.EnvDriver, missing)
	t.Setenv(gpu.EnvGPU, "")
	code, out, _ := runCLI(t, "gpu", "info")
	if code != 1 || !strings.Contains(out, "no CUDA driver library") || !strings.Contains(out, missing) {
		t.Fatalf("exit %d, output %s", code, out)
	}
	t.Setenv(gpu.EnvGPU, "off")
	code, out, _ = runCLI(t, "gpu", "info", "--json")
	if code != 1 || !strings.Contains(out, `"available": false`) || !strings.Contains(out, "FILIGRANE_GPU=off") ||
		!strings.Contains(out, `"devices": []`) {
		t.Fatalf("exit %d, output %s", code, out)
	}
	if code, _, _ := runCLI(t, "gpu", "info", "extra"); code != 2 {
		t.Fatalf("stray argument: exit %d, want 2", code)
	}
	if code, _, _ := runCLI(t, "gpu", "frobnicate"); code != 2 {
		t.Fatalf("unknown subcommand: exit %d, want 2", code)
	}
}
