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
go vet ./...
# The packages with concurrency run once, under the race detector; the rest run once without it. Three
# `go test` commands run side by side: the race pass, internal/node (multi-process clusters and nodes: the
# longest package, started first rather than after the packages that sort before it) and the rest. Most of
# their time is tests waiting (processes starting, real timeouts, failure detection), so together they keep
# 2 cores busy where one after the other left one idle. -parallel 4: internal/node's tests call t.Parallel and
# mostly wait; more at once on 2 cores only stretches the timing-bound ones.
race_pkgs=(./actors/... ./cluster/... ./http/... ./persistence/... ./internal/netguard/...)
race_list=$(go list "${race_pkgs[@]}")
node_pkg=filigrane/internal/node
other=$(go list ./... | grep -vxF -f <(echo "$race_list") | grep -vxF "$node_pkg")
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
go test -count=1 -timeout 20m -parallel 4 "$node_pkg" >"$logs/node" 2>&1 &
node_pid=$!
go test -race -count=1 -timeout 20m "${race_pkgs[@]}" >"$logs/race" 2>&1 &
race_pid=$!
go test -count=1 -timeout 20m $other >"$logs/other" 2>&1 &
other_pid=$!
status=0
for pid in "$node_pid" "$race_pid" "$other_pid"; do
  wait "$pid" || status=1
done
cat "$logs/race" "$logs/other" "$logs/node"
exit "$status"
