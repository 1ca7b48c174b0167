package gpu

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"filigrane/gpu/cuda"
)

// smokeKernel is the smoke test's kernel: a luma gain in 8.8 fixed point with clamping, the shape of a codec
// pixel pass (one byte in, one byte out, a bounds check) small enough to check against Go exactly.
const smokeKernel = `
extern "C" __global__ void luma_gain(const unsigned char* in, unsigned char* out, unsigned int gain, unsigned int n)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned int v = ((unsigned int)in[i] * gain) >> 8;
        out[i] = (unsigned char)(v > 255u ? 255u : v);
    }
}
`

// smokePTX is the same kernel written in PTX, for nodes with a driver but no NVRTC. The driver JIT-compiles
// it for the device; {{TARGET}} is sm_75 on Turing and newer (the oldest target recent drivers keep) and
// sm_50 on older devices.
const smokePTX = `
.version 6.3
.target {{TARGET}}
.address_size 64

.visible .entry luma_gain(
	.param .u64 luma_gain_param_0,
	.param .u64 luma_gain_param_1,
	.param .u32 luma_gain_param_2,
	.param .u32 luma_gain_param_3
)
{
	.reg .pred 	%p<2>;
	.reg .b16 	%rs<3>;
	.reg .b32 	%r<10>;
	.reg .b64 	%rd<8>;

	ld.param.u64 	%rd1, [luma_gain_param_0];
	ld.param.u64 	%rd2, [luma_gain_param_1];
	ld.param.u32 	%r1, [luma_gain_param_2];
	ld.param.u32 	%r2, [luma_gain_param_3];
	mov.u32 	%r3, %ctaid.x;
	mov.u32 	%r4, %ntid.x;
	mov.u32 	%r5, %tid.x;
	mad.lo.s32 	%r6, %r3, %r4, %r5;
	setp.ge.u32 	%p1, %r6, %r2;
	@%p1 bra 	$L__done;

	cvta.to.global.u64 	%rd3, %rd1;
	cvta.to.global.u64 	%rd4, %rd2;
	cvt.u64.u32 	%rd5, %r6;
	add.s64 	%rd6, %rd3, %rd5;
	ld.global.u8 	%rs1, [%rd6];
	cvt.u32.u16 	%r7, %rs1;
	mul.lo.s32 	%r8, %r7, %r1;
	shr.u32 	%r9, %r8, 8;
	min.u32 	%r9, %r9, 255;
	cvt.u16.u32 	%rs2, %r9;
	add.s64 	%rd7, %rd4, %rd5;
	st.global.u8 	[%rd7], %rs2;

$L__done:
	ret;
}
`

const smokeFunc = "luma_gain"

// embeddedPTX returns smokePTX targeted for a device of compute capability major.minor.
func embeddedPTX(major, minor int) []byte {
	target := "sm_50"
	if major*10+minor >= 75 {
		target = "sm_75"
	}
	return []byte(strings.Replace(smokePTX, "{{TARGET}}", target, 1))
}

// lumaGain is the Go reference of the kernel.
func lumaGain(dst, src []byte, gain uint32) {
	for i, s := range src {
		dst[i] = byte(min(uint32(s)*gain>>8, 255))
	}
}

// SmokeResult describes a passed smoke test.
type SmokeResult struct {
	Device   Device        `json:"device"`
	Compiler string        `json:"compiler"` // "nvrtc 12.4 (compute_90)" or "embedded PTX (sm_75)"
	Note     string        `json:"note,omitempty"`
	Bytes    int           `json:"bytes"`
	Elapsed  time.Duration `json:"elapsed_ns"` // copies in, kernel and copy out on one stream
}

// smokeGain and smokeBytes exercise the clamp (gain over 1.0) and a partial last block.
const (
	smokeGain  = 300
	smokeBytes = 1<<20 + 3
	smokeBlock = 256
)

// Smoke compiles the luma gain kernel (NVRTC at run time, or the embedded PTX when NVRTC is missing or
// produces PTX the driver is too old for), runs it on device index with pinned host buffers on one stream,
// and checks every output byte against the Go reference. It proves the whole run-time path (driver, JIT,
// memory, launch, streams) on this node.
func Smoke(ctx context.Context, opts Options, index int) (SmokeResult, error) {
	var res SmokeResult
	if opts.Disabled {
		return res, fmt.Errorf("%w: disabled by %s=off", ErrUnavailable, EnvGPU)
	}
	d, err := cuda.Load(opts.DriverPath)
	if err != nil {
		return res, fmt.Errorf("gpu smoke: %w", err)
	}
	if err := d.Init(); err != nil {
		return res, fmt.Errorf("gpu smoke: %w", err)
	}
	if res.Device, err = describe(d, index); err != nil {
		return res, fmt.Errorf("gpu smoke: device %d: %w", index, err)
	}
	dev, _ := d.Device(index)
	cc := res.Device.ComputeMajor*10 + res.Device.ComputeMinor

	ptx, compiler, note := compileSmoke(ctx, opts, cc)
	res.Compiler, res.Note = compiler, note

	c, err := d.NewContext(dev)
	if err != nil {
		return res, fmt.Errorf("gpu smoke: %w", err)
	}
	defer c.Destroy()

	mod, err := c.LoadModule(ptx)
	if err != nil && ptx != nil && errors.Is(err, cuda.ErrorUnsupportedPTXVersion) {
		// NVRTC is newer than the driver: its PTX ISA is unknown to the JIT. The embedded PTX is older.
		res.Note = fmt.Sprintf("%s produced PTX this driver cannot load (%v); used the embedded PTX", compiler, err)
		res.Compiler = fmt.Sprintf("embedded PTX (%s)", embeddedTarget(cc))
		mod, err = c.LoadModule(embeddedPTX(res.Device.ComputeMajor, res.Device.ComputeMinor))
	}
	if err != nil {
		return res, fmt.Errorf("gpu smoke: load %s: %w", res.Compiler, err)
	}
	defer mod.Unload()
	fn, err := mod.Function(smokeFunc)
	if err != nil {
		return res, fmt.Errorf("gpu smoke: %w", err)
	}
	stream, err := c.NewStream()
	if err != nil {
		return res, fmt.Errorf("gpu smoke: %w", err)
	}
	defer stream.Destroy()

	in, err := c.AllocHost(smokeBytes)
	if err != nil {
		return res, fmt.Errorf("gpu smoke: %w", err)
	}
	defer in.Free()
	out, err := c.AllocHost(smokeBytes)
	if err != nil {
		return res, fmt.Errorf("gpu smoke: %w", err)
	}
	defer out.Free()
	src := in.Bytes()
	for i := range src {
		src[i] = byte(i*7 + i>>8) // every byte value, in no simple order
	}
	clear(out.Bytes())
	dIn, err := c.Alloc(smokeBytes)
	if err != nil {
		return res, fmt.Errorf("gpu smoke: %w", err)
	}
	defer c.Free(dIn)
	dOut, err := c.Alloc(smokeBytes)
	if err != nil {
		return res, fmt.Errorf("gpu smoke: %w", err)
	}
	defer c.Free(dOut)

	start := time.Now()
	if err := c.CopyToDeviceAsync(dIn, in, stream); err != nil {
		return res, fmt.Errorf("gpu smoke: %w", err)
	}
	grid := cuda.Dim3{X: (smokeBytes + smokeBlock - 1) / smokeBlock, Y: 1, Z: 1}
	block := cuda.Dim3{X: smokeBlock, Y: 1, Z: 1}
	if err := fn.Launch(grid, block, 0, stream, dIn, dOut, uint32(smokeGain), uint32(smokeBytes)); err != nil {
		return res, fmt.Errorf("gpu smoke: %w", err)
	}
	if err := c.CopyFromDeviceAsync(out, dOut, stream); err != nil {
		return res, fmt.Errorf("gpu smoke: %w", err)
	}
	if err := stream.Synchronize(ctx); err != nil {
		return res, fmt.Errorf("gpu smoke: %w", err)
	}
	res.Elapsed = time.Since(start)
	res.Bytes = smokeBytes

	want := make([]byte, smokeBytes)
	lumaGain(want, src, smokeGain)
	got := out.Bytes()
	for i := range want {
		if got[i] != want[i] {
			return res, fmt.Errorf("gpu smoke: output byte %d is %d, the Go reference gives %d (input %d, gain %d/256)",
				i, got[i], want[i], src[i], smokeGain)
		}
	}
	return res, nil
}

func embeddedTarget(cc int) string {
	if cc >= 75 {
		return "sm_75"
	}
	return "sm_50"
}

// compileSmoke returns the kernel's PTX and how it was made. NVRTC is preferred; a missing NVRTC or a
// failed compile falls back to the embedded PTX, with the reason in note.
func compileSmoke(ctx context.Context, opts Options, cc int) (ptx []byte, compiler, note string) {
	embedded := func(why string) ([]byte, string, string) {
		return embeddedPTX(cc/10, cc%10), fmt.Sprintf("embedded PTX (%s)", embeddedTarget(cc)), why
	}
	nv, err := cuda.LoadNVRTC(opts.NVRTCPath)
	if err != nil {
		return embedded(fmt.Sprintf("no NVRTC: %v", err))
	}
	arch, ok := nvrtcArch(nv, cc)
	if !ok {
		return embedded(fmt.Sprintf("NVRTC %s cannot target compute capability %d.%d", nv.Path(), cc/10, cc%10))
	}
	major, minor, _ := nv.Version()
	ptx, _, err = nv.Compile(ctx, smokeKernel, "luma_gain.cu", "--gpu-architecture=compute_"+fmt.Sprint(arch))
	if err != nil {
		return embedded(fmt.Sprintf("NVRTC compile failed: %v", err))
	}
	return ptx, fmt.Sprintf("nvrtc %d.%d (compute_%d)", major, minor, arch), ""
}

// nvrtcArch picks the newest architecture NVRTC supports that the device runs: the device's own when
// supported, else the newest older one (PTX runs on newer devices). Without a list, the device's own.
func nvrtcArch(nv *cuda.NVRTC, cc int) (int, bool) {
	archs, ok := nv.SupportedArchs()
	if !ok {
		return cc, true
	}
	best := 0
	for _, a := range archs {
		if a <= cc {
			best = a
		}
	}
	return best, best > 0
}
