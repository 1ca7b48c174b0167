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
# The packages with concurrency run once, under the race detector; the rest run once without it.
race_pkgs=(./actors/... ./cluster/... ./http/... ./persistence/... ./internal/netguard/...)
race_list=$(go list "${race_pkgs[@]}")
other=$(go list ./... | grep -vxF -f <(echo "$race_list"))
go test -race -count=1 -timeout 20m "${race_pkgs[@]}"
go test -count=1 -timeout 20m $other
