package cuda

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"unsafe"
)

// nvrtcNames are NVRTC's sonames, newest first. The toolkit installs libnvrtc.so only with its development
// files, so the versioned names matter on runtime-only installs.
var nvrtcNames = []string{
	"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so.11.1", "libnvrtc.so.11.0",
}

// nvrtcDirs are the toolkit's usual library directories; /usr/local/cuda-X.Y directories are added by
// NVRTCCandidates, newest first.
var nvrtcDirs = []string{
	"/usr/local/cuda/lib64",
	"/usr/local/cuda/targets/x86_64-linux/lib",
	"/usr/local/cuda/targets/sbsa-linux/lib",
	"/usr/lib/x86_64-linux-gnu",
	"/usr/lib/aarch64-linux-gnu",
	"/usr/lib64",
}

// NVRTCCandidates lists the paths LoadNVRTC tries, in order, when given no path.
func NVRTCCandidates() []string {
	dirs := slices.Clone(nvrtcDirs)
	versioned, _ := filepath.Glob("/usr/local/cuda-*/lib64")
	slices.Sort(versioned)
	slices.Reverse(versioned)
	dirs = append(dirs, versioned...)
	out := expandDirs(nvrtcNames, dirs)
	// Patch-level names (libnvrtc.so.12.4.127) are found by listing the directories.
	for _, d := range dirs {
		found, _ := filepath.Glob(filepath.Join(d, "libnvrtc.so.*"))
		slices.Sort(found)
		slices.Reverse(found)
		for _, f := range found {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return out
}

// NVRTC is a loaded NVRTC library: it compiles CUDA C++ source to PTX at run time, without a GPU.
type NVRTC struct {
	path string

	nvrtcGetErrorString     func(r NVRTCResult) string
	nvrtcVersion            func(major, minor *int32) NVRTCResult
	nvrtcCreateProgram      func(p *uintptr, src *byte, name *byte, nHeaders int32, headers, includeNames unsafe.Pointer) NVRTCResult
	nvrtcCompileProgram     func(p uintptr, nOptions int32, options unsafe.Pointer) NVRTCResult
	nvrtcGetPTXSize         func(p uintptr, n *uintptr) NVRTCResult
	nvrtcGetPTX             func(p uintptr, buf *byte) NVRTCResult
	nvrtcGetProgramLogSize  func(p uintptr, n *uintptr) NVRTCResult
	nvrtcGetProgramLog      func(p uintptr, buf *byte) NVRTCResult
	nvrtcDestroyProgram     func(p *uintptr) NVRTCResult
	nvrtcGetNumSupportedArc func(n *int32) NVRTCResult
	nvrtcGetSupportedArchs  func(archs *int32) NVRTCResult
	hasArchs                bool
}

// LoadNVRTC opens NVRTC and resolves its functions. An empty path searches NVRTCCandidates; a non-empty
// path is the only one tried.
func LoadNVRTC(path string) (*NVRTC, error) {
	candidates := NVRTCCandidates()
	if path != "" {
		candidates = []string{path}
	}
	lib, err := openFirst("NVRTC", candidates)
	if err != nil {
		return nil, err
	}
	n := &NVRTC{path: lib.path}
	b := &binder{lib: lib}
	b.bind(&n.nvrtcGetErrorString, "nvrtcGetErrorString")
	b.bind(&n.nvrtcVersion, "nvrtcVersion")
	b.bind(&n.nvrtcCreateProgram, "nvrtcCreateProgram")
	b.bind(&n.nvrtcCompileProgram, "nvrtcCompileProgram")
	b.bind(&n.nvrtcGetPTXSize, "nvrtcGetPTXSize")
	b.bind(&n.nvrtcGetPTX, "nvrtcGetPTX")
	b.bind(&n.nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize")
	b.bind(&n.nvrtcGetProgramLog, "nvrtcGetProgramLog")
	b.bind(&n.nvrtcDestroyProgram, "nvrtcDestroyProgram")
	if b.err != nil {
		return nil, fmt.Errorf("load NVRTC: %w", b.err)
	}
	// The list of supported architectures exists from CUDA 11.2 on.
	n.hasArchs = b.optional(&n.nvrtcGetNumSupportedArc, "nvrtcGetNumSupportedArchs") &&
		b.optional(&n.nvrtcGetSupportedArchs, "nvrtcGetSupportedArchs")
	return n, nil
}

// Path is the library path (or soname) that was opened.
func (n *NVRTC) Path() string { return n.path }

func (n *NVRTC) check(fn string, r NVRTCResult) error {
	if r == NVRTCSuccess {
		return nil
	}
	return &NVRTCError{Func: fn, Code: r, Message: n.nvrtcGetErrorString(r)}
}

// Version is NVRTC's CUDA version, e.g. 12, 4.
func (n *NVRTC) Version() (major, minor int, err error) {
	var ma, mi int32
	if err := n.check("nvrtcVersion", n.nvrtcVersion(&ma, &mi)); err != nil {
		return 0, 0, err
	}
	return int(ma), int(mi), nil
}

// SupportedArchs lists the sm_XY architectures this NVRTC can target as 10*X+Y, ascending; ok is false
// when the library is too old to say.
func (n *NVRTC) SupportedArchs() (archs []int, ok bool) {
	if !n.hasArchs {
		return nil, false
	}
	var k int32
	if n.nvrtcGetNumSupportedArc(&k) != NVRTCSuccess || k <= 0 {
		return nil, false
	}
	raw := make([]int32, k)
	if n.nvrtcGetSupportedArchs(&raw[0]) != NVRTCSuccess {
		return nil, false
	}
	for _, a := range raw {
		archs = append(archs, int(a))
	}
	slices.Sort(archs)
	return archs, true
}

// Compile compiles one CUDA C++ source to PTX with the given nvrtc options (for example
// "--gpu-architecture=compute_90"). The compiler's log is returned with the PTX, and is in the
// *NVRTCError when compilation fails. Compilation cannot be interrupted; ctx is checked before it starts.
func (n *NVRTC) Compile(ctx context.Context, src, name string, options ...string) (ptx []byte, log string, err error) {
	if err := ctx.Err(); err != nil {
		return nil, "", fmt.Errorf("nvrtc: compile %s: %w", name, err)
	}
	csrc, cname := cString(src), cString(name)
	// NVRTC's documentation does not promise to copy the source at creation: keep it alive until the
	// program is destroyed (Go's heap does not move objects).
	defer runtime.KeepAlive(cname)
	defer runtime.KeepAlive(csrc)
	var prog uintptr
	if err := n.check("nvrtcCreateProgram", n.nvrtcCreateProgram(&prog, &csrc[0], &cname[0], 0, nil, nil)); err != nil {
		return nil, "", err
	}
	defer n.nvrtcDestroyProgram(&prog)

	// Options are an array of C strings: Go memory holding Go pointers, pinned for the call.
	opts := make([][]byte, len(options))
	optPtrs := make([]*byte, len(options)+1)
	var pin runtime.Pinner
	defer pin.Unpin()
	for i, o := range options {
		opts[i] = cString(o)
		pin.Pin(&opts[i][0])
		optPtrs[i] = &opts[i][0]
	}
	pin.Pin(&optPtrs[0])
	compileErr := n.check("nvrtcCompileProgram", n.nvrtcCompileProgram(prog, int32(len(options)), unsafe.Pointer(&optPtrs[0])))
	log = n.programLog(prog)
	if compileErr != nil {
		if e, ok := compileErr.(*NVRTCError); ok {
			e.Log = log
		}
		return nil, log, fmt.Errorf("nvrtc: compile %s: %w", name, compileErr)
	}
	var size uintptr
	if err := n.check("nvrtcGetPTXSize", n.nvrtcGetPTXSize(prog, &size)); err != nil {
		return nil, log, err
	}
	if size == 0 {
		return nil, log, fmt.Errorf("nvrtc: compile %s: empty PTX", name)
	}
	buf := make([]byte, size)
	if err := n.check("nvrtcGetPTX", n.nvrtcGetPTX(prog, &buf[0])); err != nil {
		return nil, log, err
	}
	// size counts the terminating NUL.
	if i := slices.Index(buf, 0); i >= 0 {
		buf = buf[:i]
	}
	return buf, log, nil
}

func (n *NVRTC) programLog(prog uintptr) string {
	var size uintptr
	if n.nvrtcGetProgramLogSize(prog, &size) != NVRTCSuccess || size <= 1 {
		return ""
	}
	buf := make([]byte, size)
	if n.nvrtcGetProgramLog(prog, &buf[0]) != NVRTCSuccess {
		return ""
	}
	return strings.TrimRight(string(buf), "\x00\n")
}
