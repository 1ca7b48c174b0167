package gpu

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"filigrane/gpu/cuda"
)

// TestGPUSmoke runs the luma gain kernel on device 0 and checks it byte for byte against Go. It needs a GPU
// and its driver (NVRTC optional); elsewhere it is skipped with Discover's reason. Run it on a GPU node
// with `go test ./gpu/... -run GPU -v`.
func TestGPUSmoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	inv, err := Discover(ctx)
	if err != nil {
		t.Skipf("no GPU here: %v", err)
	}
	for _, d := range inv.Devices {
		t.Logf("device %d: %s, %d MiB, compute %s, %d SMs", d.Index, d.Name, d.MemoryBytes>>20, d.ComputeCapability(), d.Multiprocessors)
	}
	t.Logf("driver %s (CUDA %s); NVRTC %s %s %s", inv.DriverPath, inv.DriverVersionString(), inv.NVRTCPath, inv.NVRTCVersion, inv.NVRTCMissing)
	res, err := Smoke(ctx, OptionsFromEnv(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("smoke passed on %s: %d bytes, kernel from %s, %v (copy in, kernel, copy out) %s",
		res.Device.Name, res.Bytes, res.Compiler, res.Elapsed, res.Note)
}

// TestGPUNVRTCCompile compiles the smoke kernel to PTX; NVRTC needs no GPU, only its library.
func TestGPUNVRTCCompile(t *testing.T) {
	nv, err := cuda.LoadNVRTC(OptionsFromEnv().NVRTCPath)
	if err != nil {
		t.Skipf("no NVRTC here: %v", err)
	}
	ptx, _, err := nv.Compile(context.Background(), smokeKernel, "luma_gain.cu", "--gpu-architecture=compute_75")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(ptx, []byte(".entry luma_gain(")) || !bytes.Contains(ptx, []byte(".target sm_75")) {
		t.Fatalf("PTX lacks the kernel or the target:\n%s", ptx)
	}
	// A broken source fails with NVRTC's log naming the problem.
	_, _, err = nv.Compile(context.Background(), "extern \"C\" __global__ void k() { undefined_thing(); }", "bad.cu")
	var nerr *cuda.NVRTCError
	if !errors.As(err, &nerr) || !errors.Is(err, cuda.NVRTCErrorCompilation) || !strings.Contains(nerr.Log, "undefined_thing") {
		t.Fatalf("bad source: %v", err)
	}
}

// On a machine with a driver library that cannot create contexts, Smoke fails with the driver's error, after
// discovery succeeded: nothing panics and nothing is left half-made.
func TestSmokeReportsDriverErrors(t *testing.T) {
	opts := Options{DriverPath: fakeDriver(t), NVRTCPath: noNVRTC(t)}
	_, err := Smoke(context.Background(), opts, 0)
	if !errors.Is(err, Result801) || !strings.Contains(err.Error(), "cuCtxCreate_v2: CUDA_ERROR_NOT_SUPPORTED (801): operation not supported") {
		t.Fatalf("Smoke on the fake driver = %v", err)
	}
	if _, err := Smoke(context.Background(), opts, 5); !errors.Is(err, cuda.ErrorInvalidDevice) {
		t.Fatalf("Smoke on a device that does not exist = %v", err)
	}
	if _, err := Smoke(context.Background(), Options{Disabled: true}, 0); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Smoke when disabled = %v", err)
	}
}

const Result801 = cuda.Result(801)

func TestLumaGainReference(t *testing.T) {
	src := []byte{0, 1, 100, 200, 217, 218, 255}
	dst := make([]byte, len(src))
	lumaGain(dst, src, 300)
	// v*300>>8 clamped: 217*300>>8 = 254, 218*300>>8 = 255, 255 clamps.
	if want := []byte{0, 1, 117, 234, 254, 255, 255}; !bytes.Equal(dst, want) {
		t.Fatalf("lumaGain = %v, want %v", dst, want)
	}
}

func TestEmbeddedPTXTargets(t *testing.T) {
	for _, c := range []struct {
		major, minor int
		target       string
	}{{9, 0, "sm_75"}, {7, 5, "sm_75"}, {7, 0, "sm_50"}, {5, 2, "sm_50"}} {
		ptx := string(embeddedPTX(c.major, c.minor))
		if !strings.Contains(ptx, "\n.target "+c.target+"\n") || strings.Contains(ptx, "{{") {
			t.Fatalf("compute %d.%d: want target %s:\n%s", c.major, c.minor, c.target, ptx)
		}
		// Four parameters, in Launch's order: in, out, gain, n.
		if n := strings.Count(ptx, ".param .u"); n != 4 || !strings.Contains(ptx, ".entry "+smokeFunc+"(") {
			t.Fatalf("kernel signature changed: %d params", n)
		}
	}
}
