#!/usr/bin/env bash
# The whole test suite: formatting, vet, unit and integration tests (real Pebble, filesystem, S3 server, ffmpeg,
# multi-process clusters on 127.0.0.1). Called by `make test` after scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="${FILIGRANE_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/filigrane/bin}:$PATH"

unformatted=$(gofmt -l $(git ls-files '*.go') 2>/dev/null || true)
if [ -n "$unformatted" ]; then
  echo "gofmt: these files need formatting:" >&2; echo "$unformatted" >&2; exit 1
fi
logs=$(mktemp -d)
# The tests' temporary files (t.TempDir: Pebble stores, the S3 server's objects, staged media, nodes' data
# directories) go to a directory of this run's own in memory (/dev/shm) when there is one that can run
# programs and has room: on this project's 2-core machines the disk's fsyncs, creates and renames were 12-14
# CPU-s of a warm suite of about 160, as system time (alternated warm runs, disk then memory, twice: 163 and
# 161 CPU-s, 90.6 and 88.5 s, against 144 and 141 CPU-s, 83.4 and 77.6 s). The tests touch about 120 MB there
# at the most. It is still a real filesystem (tmpfs: extended attributes, renames, flock); the crash tests kill
# processes, which keeps what they wrote as a disk does. FILIGRANE_TEST_TMP names another parent directory;
# an empty one keeps $TMPDIR as it is.
tmp_parent=${FILIGRANE_TEST_TMP-/dev/shm}
test_tmp=
if [ -n "$tmp_parent" ] && [ -d "$tmp_parent" ] && [ -w "$tmp_parent" ] &&
  [ "$(df -Pk "$tmp_parent" | awk 'NR == 2 { print $4 }')" -ge $((2 << 20)) ]; then
  # Left by a run that was killed: a run takes minutes, and its tests add entries to it all the time.
  find "$tmp_parent" -maxdepth 1 -name 'filigrane-test.*' -user "$(id -u)" -mmin +120 -exec rm -rf {} + 2>/dev/null || true
  test_tmp=$(mktemp -d "$tmp_parent/filigrane-test.XXXXXX")
  printf '#!/bin/sh\n' >"$test_tmp/exec-check" && chmod +x "$test_tmp/exec-check"
  if "$test_tmp/exec-check" 2>/dev/null; then
    rm -f "$test_tmp/exec-check"
    export TMPDIR=$test_tmp
  else
    rm -rf "$test_tmp"; test_tmp= # mounted noexec: gpu/cuda's tests load a file they write there
  fi
fi
trap 'rm -rf "$logs" ${test_tmp:+"$test_tmp"}' EXIT
# Test binaries are linked into .cache/testbin (ignored by git) and run from there, not by `go test`: go test
# links every package's test binary again on each run, cache or not (about 2.4 CPU-s for the big ones), which
# was 60-65 CPU-s of a warm suite of about 225 before a single test ran (`go test -count=1 -run '^$' ./...` and
# the race pass's packages alike: 38 + 28 CPU-s). `go test -c -o DIR/` leaves a binary alone when its build ID
# says it is up to date, so a warm suite relinks only what changed (0.6 CPU-s for 19 unchanged packages). The
# binaries are run as go test runs them: in the package's directory, PWD set, GOROOT/bin first in PATH, stdin
# empty, -test.paniconexit0 and the timeout. One suite at a time per checkout (flock): a second one would
# replace binaries the first has yet to run with those of the code it sees. The processes the suite starts do
# not inherit the lock's descriptor (9>&-), so that one left running cannot hold it.
bin=.cache/testbin
mkdir -p "$bin/plain" "$bin/race"
if command -v flock >/dev/null; then
  exec 9>"$bin/lock"
  flock -n 9 || { echo "test.sh: waiting for the suite already running in this checkout ($bin/lock)" >&2; flock 9; }
fi
# go vet ./... below checks every package with all its analyzers, so the test builds skip go test's own
# vet subset (-vet=off). On a warm run both are cache hits (no measurable change); after an edit, the
# changed packages are vetted once instead of twice. Test binaries are linked without symbol table and DWARF
# (-s -w, as go test links the binaries it runs; stack traces read the runtime's tables).
buildflags=(-vet=off -ldflags='-s -w')
# The suite is CPU-bound on 2 cores (its passes below run side by side), and its tests allocate big images:
# the garbage collector at GOGC=300 instead of 100 cost 7-10% less CPU on codec and codec/pdf (same test
# binaries alternated, `GOGC=N /usr/bin/time ./X.test`). No test measures the heap's size (two read TotalAlloc,
# which the collector does not change); the nodes the tests start inherit it. An explicit GOGC still wins.
export GOGC="${GOGC:-300}"
# The packages with concurrency run once, under the race detector; the rest run once without it. Four
# passes run side by side: internal/node's parallel tests, internal/node's tests that cannot call t.Parallel
# (node_seq), a subset of internal/node's tests under the race detector (node_race, below) and the packages'
# pass (every other package's binary, race or plain, four at a time). Most of their
# time is tests waiting (processes starting, real timeouts, failure detection), so together they keep 2 cores
# busy where one after the other left one idle. In one process the node_seq tests ran one after the other
# before any parallel test started, adding their time (about a third of the package's) to the longest pass; in
# a process of their own they still run one at a time, beside the parallel ones. -parallel 4: internal/node's
# tests call t.Parallel and mostly wait; more at once on 2 cores only stretches the timing-bound ones.
# The packages' pass was two passes of two slots each, the race binaries and the plain ones: the race pass ran
# out of packages about 70 s before the plain pass, whose last 45 s were codec/pdf beside small packages, while
# the race pass's two slots sat empty (a warm suite under load: race pass 104 s, plain pass 172 s, the suite
# 176 s). One queue of four slots (the same four processes at most) keeps every slot busy until the queue is
# empty. run_pass starts the packages in the order given: the longest first (pass_first), so that the last to
# start are short ones.
# internal/authlimit and internal/accounts: their per-address buckets, in-flight bound and session memory are
# shared by concurrent requests.
race_pkgs=(./actors/... ./cluster/... ./http/... ./persistence/... ./internal/netguard/... ./internal/authlimit/... ./internal/accounts/...)
# Packages under those paths whose code and tests start no goroutine and share no memory (pure state
# machines, tables, codecs of records) gain nothing from the race detector and cost its longer link and run:
# they go to the plain pass.
no_race=(filigrane/actors/assetid filigrane/actors/batchstate filigrane/actors/batchinput filigrane/actors/mediafiles
  filigrane/actors/mediakind filigrane/actors/placement filigrane/actors/storagedest filigrane/actors/jobstate
  filigrane/persistence filigrane/persistence/fsblobs filigrane/persistence/opcount)
race_list=$(go list "${race_pkgs[@]}" | grep -vxF -f <(printf '%s\n' "${no_race[@]}"))
node_pkg=filigrane/internal/node
node_seq='TestClusterNodeLoss|TestTwelveNodes|TestSlowNodeGetsLessWork|TestMediaProgramMissing|TestCloseJoinsItsGoroutines'
# (It had missed this one, which does not call t.Parallel either: the parallel pass's tests all waited the 7 s it
# ran alone.)
node_seq+='|TestUploadPutOfADeadNodeFreesTheUpload'
# Parallel tests of internal/node that mostly wait on real time they cannot shorten from the test (minio-go's
# retry back-off to a destination that is down, a store call's timeout behind a proxy holding it, slow
# clients against the server's timeouts), 5-13 s each at under 0.6 CPU-s: they run in
# node_seq's process, after its sequential tests (about 43 s), when it would otherwise sit idle while the
# parallel pass, the suite's longest, still runs (91 s of a warm suite's 93.5 before; 84 with the first three).
node_waiting='TestStorageDeliveryGivesUpAfter30Days|TestSyncDetectEdgeClaimLostRuns|TestLostSubmitAnswerKeepsTheInput'
node_waiting+='|TestSlowBodyOutlivesHeaderTimeout|TestSlowClientsCannotStopNode'
# internal/node's tests that also run under the race detector (the Makefile's RACE_NODE_TESTS, one list for both):
# a subset whose code paths run concurrently, in a race binary of their own, one test at a time: every node start
# writes a gRPC global that a running node reads (see startNode in internal/node/node_test.go), so the package's
# parallel tests, whose nodes overlap, cannot run under it. They run there only, not in the plain passes. Measured
# (GOGC=300, the binaries alone, load 9): 12-14 CPU-s and 44-50 s under the race detector, where the plain pass
# spent about 2 CPU-s on them; building the race binary costs about 11 CPU-s when internal/node changed.
node_race=$(sed -n 's/^RACE_NODE_TESTS = //p' Makefile)
[ -n "$node_race" ] || { echo "test.sh: no RACE_NODE_TESTS in the Makefile" >&2; exit 1; }
# Flags of one package's binary. cmd/filigrane's parallel tests mostly wait (bench chaos's failure detection and
# webhook schedule: 27 s and 42 s of wall for 3 and 2.5 CPU-s; CLI tests against a node): two at a time (the
# default on 2 cores) they held their pass's slot for 74 s; four at a time, about 50.
declare -A pkg_flags=([filigrane/cmd/filigrane]=-test.parallel=4)
# The packages' pass starts these first, longest first: cmd/filigrane and the two cluster packages mostly wait
# (failure detection, chaos schedules: 35-50 s each for 1.4-23 CPU-s), so they start at once, beside the
# CPU-bound codecs that fill the cores.
pass_first=(race:filigrane/cluster/clustertest plain:filigrane/cmd/filigrane race:filigrane/cluster plain:filigrane/codec
  plain:filigrane/codec/video plain:filigrane/codec/pdf race:filigrane/http/console plain:filigrane/internal/consolebrowser
  race:filigrane/actors plain:filigrane/codec/markfile race:filigrane/persistence/s3store race:filigrane/persistence/s3blobs)
# first_then_rest LIST FIRST...: the FIRST packages that are in LIST, then the rest of LIST in its order.
first_then_rest() {
  local list=$1; shift
  printf '%s\n' "$@" | grep -xF -f <(echo "$list") || true
  echo "$list" | grep -vxF -f <(printf '%s\n' "$@") || true
}
# Only packages with test files get a binary (go test -c writes none for the others; a binary left from a
# package that has no tests any more is not run).
tested=$(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./...)
race_list=$(echo "$race_list" | grep -xF -f <(echo "$tested") || true)
race=$race_list
other=$(echo "$tested" | grep -vxF -f <(echo "$race_list") | grep -vxF "$node_pkg")
# The packages' pass: KIND:PKG, KIND the binary's directory under $bin (race or plain).
queue=$(first_then_rest "$(echo "$race" | sed 's/^/race:/'; echo "$other" | sed 's/^/plain:/')" "${pass_first[@]}")
# internal/node's multi-process tests run cmd/filigrane (FILIGRANE_TEST_BINARY): one build for both of its
# passes, kept beside the test binaries so that a warm run does not link it again. The builds run beside
# go vet.
go build -ldflags='-s -w' -o "$bin/filigrane" ./cmd/filigrane 9>&- &
build_pid=$!
# shellcheck disable=SC2086 # the package lists are one import path a line
go test -c "${buildflags[@]}" -o "$bin/plain/" $other "$node_pkg" >"$logs/build-plain" 2>&1 9>&- &
plain_pid=$!
# shellcheck disable=SC2086
go test -race -c "${buildflags[@]}" -o "$bin/race/" $race "$node_pkg" >"$logs/build-race" 2>&1 9>&- &
race_build_pid=$!
build_status=0
go vet ./... 9>&- || build_status=1
for pid in "$build_pid" "$plain_pid" "$race_build_pid"; do
  wait "$pid" || build_status=1
done
# A failed build says why (the lines that name a package without tests are left out).
grep -hv 'no test files' "$logs/build-plain" "$logs/build-race" >&2 || true
[ "$build_status" = 0 ] || exit 1
export FILIGRANE_TEST_BINARY=$PWD/$bin/filigrane
goroot_bin=$(go env GOROOT)/bin
# run_test DIR PKG LOG ARGS...: PKG's test binary from DIR, run as go test runs it, its output in LOG, then
# go test's summary line (ok or FAIL, the package, the seconds) at LOG's end; exits as the binary did.
run_test() {
  local dir=$1 pkg=$2 log=$3; shift 3
  local start=$EPOCHREALTIME rc=0 exe
  exe=$PWD/$dir/${pkg##*/}.test
  (cd "${pkg#filigrane/}" && PATH="$goroot_bin:$PATH" exec "$exe" -test.paniconexit0 -test.timeout=20m "$@") \
    </dev/null >"$log" 2>&1 || rc=$?
  local secs
  secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }')
  if [ "$rc" = 0 ]; then
    printf 'ok  \t%s\t%ss\n' "$pkg" "$secs" >"$log.sum"
  else
    printf 'FAIL\t%s\t%ss (exit %s)\n' "$pkg" "$secs" "$rc" >"$log.sum"
  fi
  return "$rc"
}
# run_pass NAME SLOTS KIND:PKG...: the packages' binaries from $bin/KIND, SLOTS at a time, and one more for
# each of internal/node's passes that has ended (its summary file is there), started in the order given; then,
# in that order, go test's report: the summary line of a package that passed, the whole output and the summary
# of one that failed. Exits 1 if any failed. The suite runs 7 test processes at most (6 before node_race's,
# which mostly waits: about 13 CPU-s over 45 s), and a slot
# internal/node leaves is not left empty while packages wait: in a warm suite under load its passes ended at 74
# and 119 s and the packages at 154 s, on four slots all along (the same run's durations, simulated with the
# freed slots: 137 s). A slot freed by a node pass is taken when the next package ends.
run_pass() {
  local name=$1 slots=$2; shift 2
  local i=0 entry pkg start=$SECONDS
  mkdir -p "$logs/pass-$name"
  for entry; do
    pkg=${entry#*:}
    while [ "$(jobs -rp | wc -l)" -ge "$((slots + $(find "$logs" -maxdepth 1 -name 'node-*.out.sum' | wc -l)))" ]; do
      wait -n || true
    done
    # shellcheck disable=SC2086 # the package's extra flags, if any, are words
    run_test "$bin/${entry%%:*}" "$pkg" "$logs/pass-$name/$i" ${pkg_flags[$pkg]:-} &
    i=$((i + 1))
  done
  wait || true
  local status=0
  i=0
  for entry; do
    pkg=${entry#*:}
    if grep -q '^ok' "$logs/pass-$name/$i.sum" 2>/dev/null; then
      cat "$logs/pass-$name/$i.sum"
    else
      status=1
      cat "$logs/pass-$name/$i" "$logs/pass-$name/$i.sum" 2>/dev/null || printf 'FAIL\t%s\t(no result)\n' "$pkg"
    fi
    i=$((i + 1))
  done
  echo "== $name pass: $((SECONDS - start)) s" # which pass is the suite's longest
  return "$status"
}
# node_test NAME KIND ARGS...: internal/node's binary from $bin/KIND with ARGS, its output and summary (its two
# plain passes run the same binary, the tests that cannot call t.Parallel apart from the others; the race pass
# runs the race binary).
node_test() {
  local name=$1 kind=$2 rc=0; shift 2
  echo "== $node_pkg ($kind) $*"
  run_test "$bin/$kind" "$node_pkg" "$logs/$name.out" "$@" || rc=$?
  cat "$logs/$name.out" "$logs/$name.out.sum"
  return "$rc"
}
# shellcheck disable=SC2086
run_pass packages 4 $queue >"$logs/packages" 2>&1 9>&- &
packages_pid=$!
node_test node-par plain -test.parallel=4 -test.skip="^($node_seq|$node_waiting|$node_race)\$" >"$logs/node" 2>&1 9>&- &
node_pid=$!
node_test node-seq plain -test.parallel=4 -test.run="^($node_seq|$node_waiting)\$" >"$logs/node-seq" 2>&1 9>&- &
node_seq_pid=$!
node_test node-race race -test.parallel=1 -test.run="^($node_race)\$" >"$logs/node-race" 2>&1 9>&- &
node_race_pid=$!
status=0
for pid in "$node_pid" "$node_seq_pid" "$node_race_pid" "$packages_pid"; do
  wait "$pid" || status=1
done
cat "$logs/packages" "$logs/node-race" "$logs/node-seq" "$logs/node"
exit "$status"
