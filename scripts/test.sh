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
trap 'rm -rf "$logs"' EXIT
# go vet ./... below checks every package with all its analyzers, so the test passes skip go test's own
# vet subset (-vet=off). On a warm run both are cache hits (no measurable change); after an edit, the
# changed packages are vetted once instead of twice.
testflags=(-count=1 -timeout 20m -vet=off)
# The suite is CPU-bound on 2 cores (its passes below run side by side), and its tests allocate big images:
# the garbage collector at GOGC=300 instead of 100 cost 7-10% less CPU on codec and codec/pdf (same test
# binaries alternated, `GOGC=N /usr/bin/time ./X.test`). No test measures the heap's size (two read TotalAlloc,
# which the collector does not change); the nodes the tests start inherit it. An explicit GOGC still wins.
export GOGC="${GOGC:-300}"
# internal/node's multi-process tests run cmd/filigrane; both of its passes take this one build instead of
# linking their own. It links beside go vet, without symbol table and DWARF (-s -w, as go test links its
# own binaries; stack traces read the runtime's tables): 5.9 -> 3.5 CPU-s for the link.
go build -ldflags='-s -w' -o "$logs/filigrane" ./cmd/filigrane &
build_pid=$!
# internal/node's two passes (below) run one test binary, linked once beside go vet (-s -w as go test links
# its own), instead of a `go test` each linking it again: 2 x 3.1 -> 3.4 CPU-s.
go test -c -vet=off -ldflags='-s -w' -o "$logs/node.test" ./internal/node &
node_build_pid=$!
go vet ./...
wait "$build_pid"
wait "$node_build_pid"
export FILIGRANE_TEST_BINARY="$logs/filigrane"
# The packages with concurrency run once, under the race detector; the rest run once without it. Four
# passes run side by side: the race pass, internal/node's parallel tests, internal/node's tests
# that cannot call t.Parallel (node_seq) and the rest. Most of their time is tests waiting (processes starting,
# real timeouts, failure detection), so together they keep 2 cores busy where one after the other left one
# idle. In one process the node_seq tests ran one after the other before any parallel test started, adding
# their time (about a third of the package's) to the longest pass; in a process of their own they still run one
# at a time, beside the parallel ones. -parallel 4: internal/node's tests call t.Parallel and mostly wait;
# more at once on 2 cores only stretches the timing-bound ones. Within a pass, go test starts packages in the
# order given, so the longest (mostly sequential) packages come first.
race_pkgs=(./actors/... ./cluster/... ./http/... ./persistence/... ./internal/netguard/...)
# Packages under those paths whose code and tests start no goroutine and share no memory (pure state
# machines, tables, codecs of records) gain nothing from the race detector and cost its longer link and run:
# they go to the plain pass.
no_race=(filigrane/actors/assetid filigrane/actors/batchstate filigrane/actors/batchinput filigrane/actors/mediafiles
  filigrane/actors/mediakind filigrane/actors/placement filigrane/actors/storagedest filigrane/actors/jobstate
  filigrane/persistence filigrane/persistence/fsblobs filigrane/persistence/opcount)
race_list=$(go list "${race_pkgs[@]}" | grep -vxF -f <(printf '%s\n' "${no_race[@]}"))
race_first=(filigrane/actors filigrane/http/console)
node_pkg=filigrane/internal/node
node_seq='^(TestClusterNodeLoss|TestTwelveNodes|TestSlowNodeGetsLessWork|TestMediaProgramMissing|TestCloseJoinsItsGoroutines)$'
other_first=(filigrane/cmd/filigrane filigrane/codec filigrane/codec/video filigrane/internal/consolebrowser filigrane/codec/pdf)
# first_then_rest LIST FIRST...: the FIRST packages that are in LIST, then the rest of LIST in its order.
first_then_rest() {
  local list=$1; shift
  printf '%s\n' "$@" | grep -xF -f <(echo "$list") || true
  echo "$list" | grep -vxF -f <(printf '%s\n' "$@") || true
}
race=$(first_then_rest "$race_list" "${race_first[@]}")
other=$(first_then_rest "$(go list ./... | grep -vxF -f <(echo "$race_list") | grep -vxF "$node_pkg")" "${other_first[@]}")
# node_test ARGS...: internal/node's test binary, run as go test runs it (in the package's directory).
node_test() {
  echo "== $node_pkg $*"
  local start=$SECONDS rc=0
  (cd internal/node && exec "$logs/node.test" -test.paniconexit0 -test.timeout=20m "$@") || rc=$?
  echo "== $node_pkg: exit $rc after $((SECONDS - start)) s" # go test's "ok ... 12.3s" line, which a bare binary lacks
  return "$rc"
}
node_test -test.parallel=4 -test.skip="$node_seq" >"$logs/node" 2>&1 &
node_pid=$!
node_test -test.run="$node_seq" >"$logs/node-seq" 2>&1 &
node_seq_pid=$!
go test -race "${testflags[@]}" $race >"$logs/race" 2>&1 &
race_pid=$!
go test "${testflags[@]}" $other >"$logs/other" 2>&1 &
other_pid=$!
status=0
for pid in "$node_pid" "$node_seq_pid" "$race_pid" "$other_pid"; do
  wait "$pid" || status=1
done
cat "$logs/race" "$logs/other" "$logs/node-seq" "$logs/node"
exit "$status"
