#!/usr/bin/env bash
# The device checks of issue 18 (bench/README.md, section "GPU") as one prepared run, for a machine with a GPU
# and no Go toolchain (the `run` tool's device machine), in two steps:
#
#   scripts/gpu-check.sh build   here, no GPU needed: the test binaries of gpu, gpu/cudacodec, bench/gpubench and
#                                internal/node (go test -c -ldflags='-s -w'), gzipped into bin/gpucheck (ignored by
#                                git; ~22 MB, under the 64 MiB a device call carries: carry ["bin/gpucheck"]).
#   scripts/gpu-check.sh detect  there: only the GPU gate and the detector's steps (2-4 below: correctness, phases,
#                                the detect ratios), about a minute: for work on the detector's kernels.
#   scripts/gpu-check.sh run     there: unpacks them and runs the steps below in order, each under its own time
#                                bound and all within GPU_CHECK_BUDGET seconds (default 540: a `run` call's 600 s
#                                limit with room to spare), writing every step's output to $OUT/gpu-check.log (or
#                                a temporary directory when OUT is unset) and a summary to stdout and
#                                $OUT/summary.txt. The first step finds the GPU; without one the run stops there.
#
# Exit status of run: 0 when every step passed; 1 when a step failed, ran past its bound or did not start (the
# budget spent); 77 when the machine has no usable GPU (nothing was checked); 2 when the binaries are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
bindir=bin/gpucheck
packages=(gpu gpu/cudacodec bench/gpubench internal/node) # the binary of pkg/name is name.test

build() {
  command -v go >/dev/null || { echo "gpu-check build: needs the Go toolchain" >&2; exit 2; }
  rm -rf "$bindir"
  mkdir -p "$bindir"
  for p in "${packages[@]}"; do
    go test -c -ldflags='-s -w' -o "$bindir/$(basename "$p").test" "./$p"
    gzip -f "$bindir/$(basename "$p").test"
  done
  { echo "built $(date -u +%FT%TZ) from $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(
      git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)') by $(go version)"; } >"$bindir/BUILD"
  cat "$bindir/BUILD"
  du -ch "$bindir"/*.gz | tail -1
}

run() {
  for p in "${packages[@]}"; do
    [ -f "$bindir/$(basename "$p").test.gz" ] || {
      echo "gpu-check run: $bindir/$(basename "$p").test.gz is missing: run 'scripts/gpu-check.sh build' first" >&2
      exit 2
    }
  done
  local budget=${GPU_CHECK_BUDGET:-540}
  deadline=$(($(date +%s) + budget))
  bins=$(mktemp -d)
  logs=${OUT:-$(mktemp -d)}
  mkdir -p "$logs"
  trap 'rm -rf "$bins"' EXIT
  for p in "${packages[@]}"; do
    gunzip -c "$bindir/$(basename "$p").test.gz" >"$bins/$(basename "$p").test"
    chmod +x "$bins/$(basename "$p").test"
  done
  log=$logs/gpu-check.log
  summary=$logs/summary.txt
  : >"$log"
  : >"$summary"
  failed=0
  say "gpu-check: $(cat "$bindir/BUILD" 2>/dev/null || echo 'binaries of unknown build'); budget ${budget}s"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader |
    sed 's/^/gpu-check: nvidia-smi: /' | tee -a "$summary" || true

  # 1. The GPU and NVRTC (gpu.TestGPUSmoke, TestGPUNVRTCCompile): without a GPU nothing else can run.
  step smoke 60 gpu gpu.test -test.run '^(TestGPUSmoke|TestGPUNVRTCCompile)$' -test.v
  # GPU_CHECK_NO_GATE=1 goes on without one, to try this script's steps and reports on a machine without a GPU.
  if grep -q -- '--- SKIP: TestGPUSmoke' "$bins/step.log" && [ -z "${GPU_CHECK_NO_GATE:-}" ]; then
    say "gpu-check: NO GPU on this machine, nothing was checked: $(grep -m1 'no GPU here' "$bins/step.log" | sed 's/^ *//')"
    exit 77
  fi
  # 2-4. "What a device session must run" (bench/README.md): the detector passes and the kernels' results against
  # the CPU's, detect's phases, and the detect ratio (CPU on one core, then the GPU path, twice, alternating).
  step correctness 180 gpu/cudacodec cudacodec.test \
    -test.run '^(TestDetectOnDeviceMatchesCPU|TestDetectUnmarkedAndRotated|TestEmbedMatchesCPU|TestLoadFromHostPixels)$' -test.v
  step phases 60 gpu/cudacodec cudacodec.test -test.run '^(TestPhaseTimes|TestUploadRates)$' -test.v
  # Both detect inputs: the marked NRGBA image and its JPEG copy (BenchmarkCodec12MP).
  for i in 1 2; do
    step "detect-cpu-$i" 90 gpu/cudacodec cudacodec.test -test.run '^$' -test.bench 'Codec12MP/detect.*/cpu' \
      -test.cpu 1 -test.benchtime 8x
    step "detect-gpu-$i" 60 gpu/cudacodec cudacodec.test -test.run '^$' -test.bench 'Codec12MP/detect.*/gpu' \
      -test.benchtime 20x
  done
  if [ "$mode" = detect ]; then
    say "gpu-check: detector steps $( ((failed)) && echo 'SOME FAILED' || echo 'all passed'); log: $log"
    exit "$failed"
  fi
  # 5-7. The section's other GPU tests: concurrent jobs, the PNG rows and the device's deflate, a node's GPU work
  # end to end, and the cold start and memory of a 12 MP job.
  step device-tests 150 gpu/cudacodec cudacodec.test \
    -test.run '^(TestConcurrentJobsShareTheDevice|TestPNGRowsMatchEncodePNG|TestDeflatePNGMatchesPardeflate)$' -test.v
  step node 120 internal/node node.test \
    -test.run '^(TestGPUEmbedAndDetectOnDevice|TestGPUFallbackHoldsThreeChargesOneOnCPU|TestGPUEndpoints)$' -test.v
  step cold-start 60 bench/gpubench gpubench.test -test.run 'ColdStart' -test.v
  # 8. Last, as it is the longest: the node throughput ratio (one count; the README's figures took three).
  step throughput 150 bench/gpubench gpubench.test -test.run '^$' -test.bench NodeThroughput12MP -test.benchtime 64x
  say "gpu-check: $( ((failed)) && echo 'SOME STEPS FAILED' || echo 'all steps passed'); log: $log"
  exit "$failed"
}

# say prints a line and adds it to the summary.
say() { echo "$*" | tee -a "$summary"; }

# step NAME BOUND DIR BINARY ARGS... runs the binary in the package directory DIR (as go test would) for at most
# BOUND seconds, or what is left of the budget, appending its output to the log, and reports: passed, failed,
# timed out, skipped tests (a GPU test that skips on a GPU machine is a failure to look at), and the figures
# (benchmark and phase lines).
step() {
  local name=$1 bound=$2 dir=$3 bin=$4
  shift 4
  local left=$((deadline - $(date +%s)))
  if ((left < 20)); then
    say "[$name] NOT RUN: the budget is spent"
    failed=1
    return
  fi
  ((bound > left)) && bound=$left
  local start rc=0
  start=$(date +%s)
  # -test.timeout a little under the bound: a hung test panics with every goroutine's stack in the log.
  (cd "$dir" && timeout -k 10 "$bound" "$bins/$bin" -test.timeout "$((bound - 5))s" "$@") >"$bins/step.log" 2>&1 || rc=$?
  local took=$(($(date +%s) - start))
  { echo "===== [$name] $bin $* (in $dir, bound ${bound}s): exit $rc after ${took}s"; cat "$bins/step.log"; } >>"$log"
  local skips
  skips=$(grep -c -- '--- SKIP' "$bins/step.log" || true)
  if ((rc == 124 || rc == 137)); then
    say "[$name] TIMED OUT after ${bound}s"
    failed=1
  elif ((rc != 0)); then
    say "[$name] FAILED (exit $rc) after ${took}s"
    failed=1
  elif [[ " $* " == *" -test.bench "* ]] && ! grep -q '^Benchmark.*ns/op' "$bins/step.log"; then
    say "[$name] FAILED: no benchmark result in ${took}s (the benchmark skipped?)"
    failed=1
  elif ((skips > 0)); then
    say "[$name] passed with $skips skipped test(s) in ${took}s:"
    failed=1
  else
    say "[$name] passed in ${took}s"
  fi
  grep -E -- '^Benchmark|ms in all| #[0-9]+ calls:|--- (FAIL|SKIP)|smoke passed|device [0-9]+:|warm 12 MP|cold start|memory per|samples differ|upload rates| #[0-9]+ parts in ms' "$bins/step.log" |
    cut -c1-400 | sed 's/^/    /' | tee -a "$summary" || true
  if ((rc != 0)); then
    tail -n 25 "$bins/step.log" | cut -c1-400 | sed 's/^/  | /'
  fi
}

mode=${1:-}
case "$mode" in
build) build ;;
run | detect) run ;;
*)
  echo "usage: scripts/gpu-check.sh build|run|detect (see the comment at the top)" >&2
  exit 2
  ;;
esac
