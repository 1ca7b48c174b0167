package cuda

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLoadMissingLibraryGivesTheReason(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nowhere", "libcuda.so.1")
	_, err := Load(missing)
	if !errors.Is(err, ErrLibraryNotFound) {
		t.Fatalf("Load(%s) = %v, want ErrLibraryNotFound", missing, err)
	}
	if !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("error does not name the path and the cause: %v", err)
	}
	if _, err := LoadNVRTC(missing); !errors.Is(err, ErrLibraryNotFound) {
		t.Fatalf("LoadNVRTC(%s) = %v, want ErrLibraryNotFound", missing, err)
	}
}

func needLoader(t *testing.T) {
	t.Helper()
	if !LoaderBuilt {
		t.Skip("built with the nogpu tag: no dynamic loader")
	}
}

func TestNoGPUBuildRefusesToLoad(t *testing.T) {
	if LoaderBuilt {
		t.Skip("this build has the dynamic loader (run with -tags nogpu)")
	}
	if _, err := Load("libc.so.6"); !errors.Is(err, ErrLibraryNotFound) || !strings.Contains(err.Error(), "nogpu") {
		t.Fatalf("Load in a nogpu build = %v", err)
	}
}

func TestFakeLibraryFileIsNotLoaded(t *testing.T) {
	needLoader(t)
	fake := filepath.Join(t.TempDir(), "libcuda.so.1")
	if err := os.WriteFile(fake, []byte(strings.Repeat("not a shared library\n", 64)), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := Load(fake)
	if d != nil || !errors.Is(err, ErrLibraryNotFound) {
		t.Fatalf("Load(fake) = %v, %v; want no driver and ErrLibraryNotFound", d, err)
	}
	// The dynamic loader's own reason (an ELF header problem) reaches the operator.
	if !strings.Contains(err.Error(), fake) || !strings.Contains(strings.ToLower(err.Error()), "elf") {
		t.Fatalf("error does not say why the file was refused: %v", err)
	}
}

// A real shared library without the CUDA symbols (the C library) is opened, then refused with the name of
// the first missing function, without panicking.
func TestLibraryWithoutCUDASymbols(t *testing.T) {
	needLoader(t)
	_, err := Load("libc.so.6")
	if !errors.Is(err, ErrSymbolNotFound) || !strings.Contains(err.Error(), "cuGetErrorName") {
		t.Fatalf("Load(libc) = %v, want ErrSymbolNotFound naming cuGetErrorName", err)
	}
	_, err = LoadNVRTC("libc.so.6")
	if !errors.Is(err, ErrSymbolNotFound) || !strings.Contains(err.Error(), "nvrtcGetErrorString") {
		t.Fatalf("LoadNVRTC(libc) = %v, want ErrSymbolNotFound naming nvrtcGetErrorString", err)
	}
}

func TestDefaultSearchPaths(t *testing.T) {
	drv := DriverCandidates()
	if drv[0] != DriverLibrary {
		t.Fatalf("first driver candidate %q, want the soname %q (the dynamic loader's search)", drv[0], DriverLibrary)
	}
	for _, c := range append(drv, NVRTCCandidates()...) {
		if strings.Contains(c, "stubs") {
			t.Fatalf("candidate %q is a link stub, which can never run anything", c)
		}
	}
	if !slices.Contains(NVRTCCandidates(), "libnvrtc.so.12") || !slices.Contains(NVRTCCandidates(), "/usr/local/cuda/lib64/libnvrtc.so") {
		t.Fatalf("NVRTC search misses the usual names: %v", NVRTCCandidates())
	}
}

func TestKernelArgumentEncoding(t *testing.T) {
	cases := []struct {
		arg  any
		want uint64
	}{
		{DevicePtr(0x7f0000001000), 0x7f0000001000},
		{uint32(300), 300},
		{int32(-1), 0xffffffff}, // a 4-byte parameter reads the low 4 bytes only
		{float32(1), 0x3f800000},
		{uint8(255), 255},
	}
	for _, c := range cases {
		got, err := argBits(c.arg)
		if err != nil || got != c.want {
			t.Errorf("argBits(%T %v) = %#x, %v; want %#x", c.arg, c.arg, got, err, c.want)
		}
	}
	if _, err := argBits(7); err == nil || !strings.Contains(err.Error(), "int") {
		t.Errorf("an untyped int (platform-sized) was accepted: %v", err)
	}
	if err := (Function{}).Launch(Dim3{1, 1, 1}, Dim3{1, 1, 1}, 0, nil); err == nil {
		t.Error("launch of a zero Function accepted")
	}
}

func TestErrorFormatting(t *testing.T) {
	e := &Error{Func: "cuInit", Code: ErrorNoDevice, Name: "CUDA_ERROR_NO_DEVICE", Message: "no CUDA-capable device is detected"}
	var err error = e
	if !errors.Is(err, ErrorNoDevice) || errors.Is(err, ErrorStubLibrary) {
		t.Fatalf("errors.Is does not match codes: %v", err)
	}
	if got := err.Error(); got != "cuInit: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected" {
		t.Fatalf("Error() = %q", got)
	}
	n := &NVRTCError{Func: "nvrtcCompileProgram", Code: NVRTCErrorCompilation, Message: "NVRTC_ERROR_COMPILATION", Log: "k.cu(3): error: x undefined"}
	if !errors.Is(n, NVRTCErrorCompilation) || !strings.Contains(n.Error(), "x undefined") {
		t.Fatalf("NVRTC error lacks its code or log: %v", n)
	}
}
