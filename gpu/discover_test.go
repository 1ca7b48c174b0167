package gpu

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"filigrane/gpu/cuda"
)

// fakeDriver compiles testdata/fakecuda.c into a libcuda.so.1 stand-in with the given -D definitions, so
// discovery's paths past dlopen (cuInit failing, zero devices, devices found) run for real on a machine
// without a GPU. It needs a C compiler at test time only; the package itself never does.
func fakeDriver(t *testing.T, defs ...string) string {
	t.Helper()
	if !cuda.LoaderBuilt {
		t.Skip("built with the nogpu tag: no dynamic loader")
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skipf("no C compiler to build the fake driver library: %v", err)
	}
	out := filepath.Join(t.TempDir(), "libcuda.so.1")
	args := append([]string{"-shared", "-fPIC", "-o", out}, defs...)
	args = append(args, filepath.Join("testdata", "fakecuda.c"))
	if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("build fake driver: %v\n%s", err, b)
	}
	return out
}

func noNVRTC(t *testing.T) string { return filepath.Join(t.TempDir(), "libnvrtc.so.12") }

func TestDiscoverUnavailableReasons(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "libcuda.so.1")
	cases := []struct {
		name  string
		opts  Options
		is    error  // also matched besides ErrUnavailable
		words string // the reason an operator reads
	}{
		{"disabled", Options{Disabled: true}, nil, "disabled by FILIGRANE_GPU=off"},
		{"no driver library", Options{DriverPath: missing}, cuda.ErrLibraryNotFound, "no CUDA driver library"},
		{"not the driver", Options{DriverPath: "libc.so.6"}, cuda.ErrSymbolNotFound, "not a usable CUDA driver library"},
		{"cuInit fails", Options{DriverPath: fakeDriver(t, "-DFAKE_INIT_RESULT=100")}, cuda.ErrorNoDevice,
			"did not initialise: cuInit: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected"},
		{"zero devices", Options{DriverPath: fakeDriver(t, "-DFAKE_DEVICES=0")}, nil, "reports zero devices"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inv, err := DiscoverWith(context.Background(), c.opts)
			if !errors.Is(err, ErrUnavailable) || (c.is != nil && !errors.Is(err, c.is)) {
				t.Fatalf("DiscoverWith = %v, want ErrUnavailable and %v", err, c.is)
			}
			if !strings.Contains(err.Error(), c.words) {
				t.Fatalf("reason %q does not say %q", err, c.words)
			}
			if len(inv.Devices) != 0 {
				t.Fatalf("devices reported with an error: %+v", inv.Devices)
			}
		})
	}
}

func TestDiscoverFindsDevices(t *testing.T) {
	nvrtc := noNVRTC(t)
	inv, err := DiscoverWith(context.Background(), Options{DriverPath: fakeDriver(t, "-DFAKE_DEVICES=2"), NVRTCPath: nvrtc})
	if err != nil {
		t.Fatal(err)
	}
	want := []Device{
		{Index: 0, Name: "Fake GPU 0", MemoryBytes: 8 << 30, ComputeMajor: 9, ComputeMinor: 0, Multiprocessors: 132},
		{Index: 1, Name: "Fake GPU 1", MemoryBytes: 8 << 30, ComputeMajor: 9, ComputeMinor: 0, Multiprocessors: 132},
	}
	if !reflect.DeepEqual(inv.Devices, want) {
		t.Fatalf("devices:\n got %+v\nwant %+v", inv.Devices, want)
	}
	if inv.TotalMemory() != 16<<30 || inv.DriverVersionString() != "12.4" || inv.Devices[0].ComputeCapability() != "9.0" {
		t.Fatalf("totals wrong: %d bytes, driver %q", inv.TotalMemory(), inv.DriverVersionString())
	}
	// NVRTC missing is recorded, not fatal: embedded PTX serves instead.
	if inv.NVRTCPath != "" || !strings.Contains(inv.NVRTCMissing, nvrtc) {
		t.Fatalf("NVRTC state: path %q, missing %q", inv.NVRTCPath, inv.NVRTCMissing)
	}
}

func TestDiscoverRespectsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := DiscoverWith(ctx, Options{DriverPath: "libc.so.6"})
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("DiscoverWith(cancelled) = %v", err)
	}
}

func TestOptionsFromEnv(t *testing.T) {
	t.Setenv(EnvDriver, "/opt/nvidia/libcuda.so.1")
	t.Setenv(EnvNVRTC, "/opt/cuda/libnvrtc.so.12")
	t.Setenv(EnvGPU, " OFF ")
	want := Options{DriverPath: "/opt/nvidia/libcuda.so.1", NVRTCPath: "/opt/cuda/libnvrtc.so.12", Disabled: true}
	if got := OptionsFromEnv(); got != want {
		t.Fatalf("OptionsFromEnv = %+v, want %+v", got, want)
	}
	t.Setenv(EnvGPU, "on")
	if OptionsFromEnv().Disabled {
		t.Fatal(`FILIGRANE_GPU=on disabled discovery`)
	}
}

// The node's call site: with a device present but no CUDA codec path, the accelerator stays unavailable.
func TestNodeReportsUnavailableWithoutCodecPath(t *testing.T) {
	t.Setenv(EnvDriver, fakeDriver(t, "-DFAKE_DEVICES=1"))
	t.Setenv(EnvNVRTC, noNVRTC(t))
	t.Setenv(EnvGPU, "")
	if got := Devices(); !reflect.DeepEqual(got, []string{"Fake GPU 0"}) {
		t.Fatalf("Devices() = %v", got)
	}
	tr := NewTracker(NewState(len(Devices()) > 0 && CodecAvailable(), 30*time.Second))
	if st := tr.Wake(time.Now()); st.Status != StatusUnavailable {
		t.Fatalf("status %s with a device but no codec path, want unavailable", st.Status)
	}
	t.Setenv(EnvGPU, "off")
	if got := Devices(); got != nil {
		t.Fatalf("Devices() with %s=off = %v", EnvGPU, got)
	}
}
