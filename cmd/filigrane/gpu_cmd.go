package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"filigrane/gpu"
)

const gpuUsage = `usage:
  filigrane gpu info [--json] [--smoke] [--timeout 60s]

info loads the CUDA driver library at run time (no CUDA toolkit needed), lists the devices it reports (name,
memory, compute capability) and whether NVRTC, the run-time kernel compiler, is present; without a GPU it
prints why none is usable. --smoke also compiles a small kernel, runs it on every device with pinned buffers
and checks the result against Go. Environment: FILIGRANE_CUDA_LIBRARY (path to libcuda.so.1),
FILIGRANE_NVRTC_LIBRARY (path to libnvrtc.so.*), FILIGRANE_GPU=off (report no GPU without loading anything).

Exit status: 0 when a device is usable (and every smoke test passed), 1 when none is or a smoke test failed,
2 for usage errors. The GPU of a running server (its state, waking it) is filigrane accelerator status|wake.
`

// gpuReport is what `gpu info --json` prints.
type gpuReport struct {
	Available      bool              `json:"available"`
	Reason         string            `json:"reason,omitempty"`
	CodecAvailable bool              `json:"codec_available"`
	Inventory      gpu.Inventory     `json:"inventory"`
	Smoke          []gpuSmokeOutcome `json:"smoke,omitempty"`
}

type gpuSmokeOutcome struct {
	Device int              `json:"device"`
	Passed bool             `json:"passed"`
	Error  string           `json:"error,omitempty"`
	Result *gpu.SmokeResult `json:"result,omitempty"`
}

func runGPU(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, gpuUsage)
		return 2
	}
	switch args[0] {
	case "info":
		return gpuInfo(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, gpuUsage)
		return 0
	}
	if args[0] == "status" || args[0] == "wake" {
		// gpu is this machine's diagnostic; the server's GPU is another command (client_gpu_cmd.go).
		fmt.Fprintf(stderr, "filigrane gpu: %q is not a gpu subcommand; the server's GPU is `filigrane accelerator %s`\n", args[0], args[0])
		return 2
	}
	fmt.Fprintf(stderr, "filigrane gpu: unknown subcommand %q\n\n%s", args[0], gpuUsage)
	return 2
}

func gpuInfo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gpu info", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	smoke := fs.Bool("smoke", false, "run the smoke kernel on every device")
	timeout := fs.Duration("timeout", 60*time.Second, "give up discovery and each smoke test after this long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 || *timeout <= 0 {
		fmt.Fprint(stderr, gpuUsage)
		return 2
	}
	opts := gpu.OptionsFromEnv()
	dctx, cancel := context.WithTimeout(ctx, *timeout)
	inv, err := gpu.DiscoverWith(dctx, opts)
	cancel()
	if inv.Devices == nil {
		inv.Devices = []gpu.Device{} // [] rather than null in JSON
	}
	rep := gpuReport{Available: err == nil, CodecAvailable: gpu.CodecAvailable(), Inventory: inv}
	if err != nil {
		rep.Reason = err.Error()
	}
	if err == nil && *smoke {
		for _, d := range inv.Devices {
			sctx, cancel := context.WithTimeout(ctx, *timeout)
			res, serr := gpu.Smoke(sctx, opts, d.Index)
			cancel()
			o := gpuSmokeOutcome{Device: d.Index, Passed: serr == nil}
			if serr != nil {
				o.Error = serr.Error()
			} else {
				o.Result = &res
			}
			rep.Smoke = append(rep.Smoke, o)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "filigrane gpu info: %v\n", err)
			return 1
		}
	} else {
		writeGPUReport(stdout, rep)
	}
	if !rep.Available {
		return 1
	}
	for _, o := range rep.Smoke {
		if !o.Passed {
			return 1
		}
	}
	return 0
}

func writeGPUReport(w io.Writer, rep gpuReport) {
	inv := rep.Inventory
	if inv.DriverPath != "" {
		fmt.Fprintf(w, "driver:   %s", inv.DriverPath)
		if v := inv.DriverVersionString(); v != "" {
			fmt.Fprintf(w, " (CUDA %s)", v)
		}
		fmt.Fprintln(w)
	}
	if !rep.Available {
		fmt.Fprintf(w, "gpu:      %s\n", rep.Reason)
		return
	}
	for _, d := range inv.Devices {
		fmt.Fprintf(w, "device %d: %s, %.1f GiB, compute %s, %d SMs\n",
			d.Index, d.Name, float64(d.MemoryBytes)/(1<<30), d.ComputeCapability(), d.Multiprocessors)
	}
	if inv.NVRTCPath != "" {
		fmt.Fprintf(w, "nvrtc:    %s (%s)\n", inv.NVRTCPath, inv.NVRTCVersion)
	} else {
		fmt.Fprintf(w, "nvrtc:    missing (the smoke kernel uses the PTX built into the binary): %s\n", inv.NVRTCMissing)
	}
	if rep.CodecAvailable {
		fmt.Fprintln(w, "codec:    GPU codec path available: its kernels are compiled by NVRTC when a device is woken")
	} else {
		fmt.Fprintln(w, "codec:    no GPU codec path without NVRTC: the node reports its accelerator unavailable")
	}
	for _, o := range rep.Smoke {
		if o.Passed {
			fmt.Fprintf(w, "smoke %d:  passed, %d bytes through %s in %v\n", o.Device, o.Result.Bytes, o.Result.Compiler, o.Result.Elapsed)
			if o.Result.Note != "" {
				fmt.Fprintf(w, "          note: %s\n", o.Result.Note)
			}
		} else {
			fmt.Fprintf(w, "smoke %d:  FAILED: %s\n", o.Device, o.Error)
		}
	}
}
