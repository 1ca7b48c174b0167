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
# The packages with concurrency run once, under the race detector; the rest run once without it. The two
# `go test` commands run side by side: most of either's time is tests waiting (processes starting, real
# timeouts, failure detection), so together they keep 2 cores busy where one after the other left one idle.
# -parallel 4: internal/node's tests call t.Parallel and mostly wait; more than 4 at once on 2 cores only
# stretches the timing-bound ones.
race_pkgs=(./actors/... ./cluster/... ./http/... ./persistence/... ./internal/netguard/...)
race_list=$(go list "${race_pkgs[@]}")
other=$(go list ./... | grep -vxF -f <(echo "$race_list"))
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
go test -race -count=1 -timeout 20m "${race_pkgs[@]}" >"$logs/race" 2>&1 &
race_pid=$!
go test -count=1 -timeout 20m -parallel 4 $other >"$logs/other" 2>&1 &
other_pid=$!
status=0
wait "$race_pid" || status=1
wait "$other_pid" || status=1
cat "$logs/race" "$logs/other"
exit "$status"
