#!/usr/bin/env bash
# Measures GET /auth/api-key on 1 node (single-node mode), on 1 node of a 3-node cluster, and spread over all 3
# cluster nodes, all on this machine (127.0.0.1), with versitygw as the shared object storage.
# Usage: bench/scripts/api-cluster.sh [clients] [duration]
set -euo pipefail
cd "$(dirname "$0")/../.."
CLIENTS=${1:-16}; DUR=${2:-10s}
W=$(mktemp -d); B=$W/filigrane
go build -o "$B" ./cmd/filigrane
VG=$(command -v versitygw || echo "${FILIGRANE_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/filigrane/bin}/versitygw")
mkdir -p "$W/s3" "$W/meta"
ROOT_ACCESS_KEY_ID=k ROOT_SECRET_ACCESS_KEY=secretsecret "$VG" --port 127.0.0.1:17070 --quiet posix --sidecar "$W/meta" "$W/s3" >"$W/vg.log" 2>&1 &
PIDS=($!)
trap 'kill "${PIDS[@]}" 2>/dev/null; rm -rf "$W"' EXIT
PLANS=bench/apibench/plans-unlimited.json
S3=(--s3-endpoint http://127.0.0.1:17070 --s3-bucket bench --s3-access-key k --s3-secret-key secretsecret)
SEEDS=127.0.0.1:17101,127.0.0.1:17102,127.0.0.1:17103
wait_up() { for _ in $(seq 1 200); do curl -sf "$1/healthz" >/dev/null && return 0; sleep 0.1; done; return 1; }
sleep 1
for i in 1 2 3; do
  "$B" serve --data "$W/n$i" --node-name "n$i" --listen "127.0.0.1:1808$i" --upload-listen "127.0.0.1:1809$i" \
    --cluster-bind "127.0.0.1:1710$i" --remote-port "1720$i" --join "$SEEDS" "${S3[@]}" --plans "$PLANS" \
    --log-level warn --log-format json >"$W/n$i.out" 2>&1 &
  PIDS+=($!)
done
for i in 1 2 3; do wait_up "http://127.0.0.1:1808$i"; done
sleep 2
KEY=$(grep -ho 'fgk_[A-Za-z0-9_-]*' "$W"/n*.out | head -1)
echo "== 3 nodes (cluster mode, shared object storage), requests spread round-robin"
"$B" bench api --targets http://127.0.0.1:18081,http://127.0.0.1:18082,http://127.0.0.1:18083 --key "$KEY" \
  --endpoints auth --clients "$CLIENTS" --duration "$DUR" --warmup 2s
echo "== 1 node of the same cluster"
"$B" bench api --targets http://127.0.0.1:18081 --key "$KEY" --endpoints auth --clients "$CLIENTS" --duration "$DUR" --warmup 2s
kill "${PIDS[@]:1}"; wait "${PIDS[@]:1}" 2>/dev/null || true
echo "== 1 node, single-node mode (Pebble)"
"$B" serve --data "$W/single" --listen 127.0.0.1:18088 --upload-listen 127.0.0.1:18089 --plans "$PLANS" --log-level warn >"$W/single.out" 2>&1 &
PIDS+=($!)
wait_up http://127.0.0.1:18088
KEY1=$(grep -o 'fgk_[A-Za-z0-9_-]*' "$W/single.out" | head -1)
"$B" bench api --targets http://127.0.0.1:18088 --key "$KEY1" --endpoints auth --clients "$CLIENTS" --duration "$DUR" --warmup 2s
