#!/usr/bin/env bash
# The cluster figures of issue 21 (bench/README.md, "Cluster figures (issue 21)"), all on this machine
# (127.0.0.1) with versitygw as the shared object storage:
#  - status GETs (GET /watermarks/jobs/{id}) and key look-ups per second on one node, single-node mode (Pebble)
#    and cluster mode, in the same run (the ratio holds when the machine is shared);
#  - synchronous embed throughput of clusters of 1, 2 and 3 nodes, each node one worker held to QUOTA percent of
#    one core by a cgroup (cpu.cfs_quota_us; skipped with a warning where cgroups cannot be made), 2 clients per
#    node, and the CPU seconds every process (nodes and S3 server) spent per job: on separate machines a
#    CPU-bound cluster scales by how well the CPU per job holds as nodes are added;
#  - the service overhead over the codec: CPU seconds of the node (and of the S3 server) per synchronous embed
#    against the CPU seconds of `filigrane codec embed` (decode, embed, PNG, in-process verification: what a
#    worker runs) on the same image, which the machine's load does not distort as it does wall time; and the
#    wall-clock latency against the in-process codec baseline (--codec-baseline) for reference;
#  - storage operations per job of each kind (filigrane_s3_requests_total, filigrane_store_operations_total
#    summed over the nodes before and after each phase, less the same cluster's idle rate over the phase's
#    length, divided by the successes), writes broken down by record kind;
#  - resident memory per node at rest and the highest seen under load.
# Usage: bench/scripts/cluster-figures.sh [duration per phase, default 20s] [quota percent, default 50]
set -euo pipefail
cd "$(dirname "$0")/../.."
DUR=${1:-20s}; QUOTA=${2:-50}
W=$(mktemp -d); B=$W/filigrane
go build -o "$B" ./cmd/filigrane
VG=$(command -v versitygw || echo "${FILIGRANE_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/filigrane/bin}/versitygw")
mkdir -p "$W/s3" "$W/meta"
ROOT_ACCESS_KEY_ID=k ROOT_SECRET_ACCESS_KEY=secretsecret "$VG" --port 127.0.0.1:17370 --quiet posix --sidecar "$W/meta" "$W/s3" >"$W/vg.log" 2>&1 &
VGPID=$!
NODES=()
CG=/sys/fs/cgroup/cpu/filigrane-bench-$$
cleanup() {
  kill "${NODES[@]}" "$VGPID" 2>/dev/null || true
  wait 2>/dev/null || true
  for d in "$CG"/n*; do [ -d "$d" ] && rmdir "$d" 2>/dev/null 2>&1; done
  [ -d "$CG" ] && rmdir "$CG" 2>/dev/null
  rm -rf "$W"
}
trap cleanup EXIT
if ! mkdir -p "$CG" 2>/dev/null; then
  echo "warning: cannot make cgroups under /sys/fs/cgroup/cpu: nodes run without a CPU quota" >&2
  CG=""
fi
PLANS=bench/apibench/plans-unlimited.json
# A 1024x1024 photo-like JPEG (test pattern with film grain), the input of every phase and of the codec timing.
IMG=$W/bench.jpg
ffmpeg -loglevel error -f lavfi -i "testsrc2=s=1024x1024,noise=alls=12:allf=t" -frames:v 1 -q:v 3 "$IMG"
TICK=$(getconf CLK_TCK)
RUN=0
IDLE=""
wait_up() { for _ in $(seq 1 300); do curl -sf "$1/healthz" >/dev/null && return 0; sleep 0.1; done; echo "$1 not up" >&2; return 1; }
members() { curl -s "$1/healthz" | jq -r .members; }
urls() { local u=(); for i in $(seq 1 "$1"); do u+=("http://127.0.0.1:1838$i"); done; (IFS=,; echo "${u[*]}"); }

# start_nodes N MODE [QUOTA]: MODE single (Pebble) or cluster (a fresh shared bucket, one worker and GOMAXPROCS=1
# a node, held to QUOTA percent of a core when given).
start_nodes() {
  local n=$1 mode=$2 quota=${3:-} seeds="" i
  RUN=$((RUN + 1))
  NODES=()
  for i in $(seq 1 "$n"); do seeds+="${seeds:+,}127.0.0.1:1740$i"; done
  for i in $(seq 1 "$n"); do
    local args=(serve --data "$W/$RUN-n$i" --node-name "n$i" --listen "127.0.0.1:1838$i" --upload-listen "127.0.0.1:1839$i"
      --plans "$PLANS" --log-level warn --log-format json)
    if [ "$mode" = cluster ]; then
      args+=(--workers 1 --cluster-bind "127.0.0.1:1740$i" --remote-port "1750$i" --join "$seeds"
        --s3-endpoint http://127.0.0.1:17370 --s3-bucket "run$RUN" --s3-access-key k --s3-secret-key secretsecret)
      GOMAXPROCS=1 "$B" "${args[@]}" >"$W/$RUN-n$i.out" 2>&1 &
    else
      "$B" "${args[@]}" >"$W/$RUN-n$i.out" 2>&1 &
    fi
    NODES+=($!)
    if [ -n "$quota" ] && [ -n "$CG" ]; then
      mkdir -p "$CG/n$i"
      echo 100000 >"$CG/n$i/cpu.cfs_period_us"
      echo $((quota * 1000)) >"$CG/n$i/cpu.cfs_quota_us"
      echo "${NODES[-1]}" >"$CG/n$i/cgroup.procs"
    fi
  done
  for i in $(seq 1 "$n"); do wait_up "http://127.0.0.1:1838$i"; done
  for i in $(seq 1 "$n"); do
    for _ in $(seq 1 300); do [ "$(members "http://127.0.0.1:1838$i")" = "$n" ] && break; sleep 0.1; done
  done
  KEY=$(grep -ho 'fgk_[A-Za-z0-9_-]*' "$W/$RUN"-n*.out | head -1)
}
stop_nodes() { kill "${NODES[@]}" 2>/dev/null || true; wait "${NODES[@]}" 2>/dev/null || true; NODES=(); }

# snapshot N: one line "name value" per counter summed over the nodes, and the CPU seconds of nodes + S3 server.
snapshot() {
  for i in $(seq 1 "$1"); do curl -s "http://127.0.0.1:1838$i/metrics"; done |
    grep -E '^filigrane_(s3_requests|store_operations)_total' |
    sed -E 's/^filigrane_s3_requests_total\{op="([a-z]+)"\}/s3_requests_\1/; s/^filigrane_store_operations_total\{backend="([a-z0-9]+)",op="([a-z_]+)",prefix="([a-z_-]*)",store="([a-z]+)"\}/\4_\1_\2 \4_\1_\2_\3/' |
    awk '{ if (NF == 3) { s[$1]+=$3; if ($1 ~ /compare_and_set|delete/) s["  " $2]+=$3 } else s[$1]+=$2 }
      END {for (k in s) print k, s[k]}' | sed 's/^  /write_/'
  local t=0 p
  for p in "${NODES[@]}"; do t=$((t + $(awk '{print $14+$15}' "/proc/$p/stat"))); done
  echo "cpu_ms_nodes $((t * 1000 / TICK))"
  echo "cpu_ms_s3server $(($(awk '{print $14+$15}' "/proc/$VGPID/stat") * 1000 / TICK))"
}
rss() { local s=0 p; for p in "${NODES[@]}"; do s=$((s + $(awk '/VmRSS/{print $2}' "/proc/$p/status"))); done; echo $((s / 1024 / ${#NODES[@]})); }

# idle N: the counters' increase per second of an idle cluster (sweeper passes, lease renewals), over 10 s, into
# IDLE; phases subtract it over their length so that few long jobs are not charged for the background.
idle() {
  local a b
  a=$(snapshot "$1"); sleep 10; b=$(snapshot "$1")
  IDLE=$({ echo "$a" | sed 's/^/B /'; echo "$b" | sed 's/^/A /'; } |
    awk '{ v[$1 " " $2]=$3; k[$2]=1 } END { for (n in k) printf "%s %.4f\n", n, (v["A " n]-v["B " n])/10 }')
  echo "    idle: $(echo "$IDLE" | awk '$1 ~ /^s3_requests|^cpu/ && $2 > 0 { printf "%s %.2f/s  ", $1, $2 }')"
}

# phase LABEL N ENDPOINT CLIENTS [extra bench args]: runs one bench phase on all N nodes and prints its figures.
phase() {
  local label=$1 n=$2 ep=$3 clients=$4; shift 4
  local before after peak=0 pid r t0
  before=$(snapshot "$n")
  t0=$(date +%s.%N)
  ( while :; do rss; sleep 0.5; done ) >"$W/rss" &
  pid=$!
  "$B" bench api --targets "$(urls "$n")" --key "$KEY" --endpoints "$ep" --clients "$clients" --duration "$DUR" \
    --warmup 0 --image "$IMG" --json "$W/r.json" "$@" >"$W/r.md" 2>"$W/r.log" || { cat "$W/r.log" >&2; return 1; }
  kill "$pid"; wait "$pid" 2>/dev/null || true
  peak=$(sort -n "$W/rss" | tail -1)
  after=$(snapshot "$n")
  local secs; secs=$(echo "$(date +%s.%N) - $t0" | bc)
  r=$(jq -r '.endpoints[0] | "\(.successes) \(.success_throughput_rps) \(.latency.p50_ms) \(.other_errors + .status_429) \(.overhead_p50_ms // "")"' "$W/r.json")
  read -r ok tput p50 errs ovh <<<"$r"
  printf '%-28s nodes=%d clients=%-2d ok=%-6d errors=%-3d per_s=%.1f p50_ms=%.1f rss_peak_MiB=%s' "$label" "$n" "$clients" "$ok" "$errs" "$tput" "$p50" "$peak"
  [ -n "$ovh" ] && printf ' overhead_p50_ms=%.0f codec_p50_ms=%.0f codec_cpu_ms_embed=%.1f codec_cpu_ms_detect=%.1f' "$ovh" \
    "$(jq -r '.endpoints[0].codec_p50_ms' "$W/r.json")" "$(jq -r '.codec_baseline.embed_cpu_ms' "$W/r.json")" \
    "$(jq -r '.codec_baseline.detect_cpu_ms' "$W/r.json")"
  echo
  # A counter that first appears during the phase counts from 0.
  { echo "$before" | sed 's/^/B /'; echo "$after" | sed 's/^/A /'; echo "$IDLE" | sed 's/^/I /'; } |
    awk -v ok="$ok" -v secs="$secs" '{ v[$1 " " $2]=$3; k[$2]=1 }
      END { for (n in k) { d=v["A " n]-v["B " n]-v["I " n]*secs; if (ok>0 && d>0.005*ok) printf "    %-52s %9.2f per request\n", n, d/ok } }' | sort
}

# codec_cpu: CPU milliseconds of one `filigrane codec embed` of IMG (median-free: the mean of 5 runs, after one).
codec_cpu() {
  "$B" codec embed "$IMG" "$W/c.png" --data '{"benchmark":"api"}' >/dev/null 2>&1
  bash -c 'for i in 1 2 3 4 5; do "$0" codec embed "$1" "$2" --data "{\"benchmark\":\"api\"}" >/dev/null 2>&1; done
    awk -v t="$3" "{ printf \"%d\", (\$16+\$17)*1000/t/5 }" /proc/$$/stat' "$B" "$IMG" "$W/c.png" "$TICK"
}

echo "== machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "-- filigrane codec embed of the same image: $(codec_cpu) CPU ms (mean of 5)"
start_nodes 1 single
echo "-- single-node mode (Pebble, all cores), at rest $(rss) MiB"
idle 1
phase "status single-node" 1 status 16
phase "auth single-node" 1 auth 16
phase "embed single-node" 1 embed 2 --codec-baseline --baseline-runs 5
phase "detect single-node" 1 detect 2
stop_nodes
start_nodes 1 cluster
echo "-- one node in cluster mode (versitygw, one worker, GOMAXPROCS=1, no quota), at rest $(rss) MiB"
idle 1
phase "status cluster" 1 status 16
phase "auth cluster" 1 auth 16
phase "embed cluster" 1 embed 2 --codec-baseline --baseline-runs 5
phase "detect cluster" 1 detect 2
stop_nodes
for n in 1 2 3; do
  start_nodes "$n" cluster "$QUOTA"
  echo "-- cluster of $n, each node held to $QUOTA% of a core, at rest $(rss) MiB a node"
  idle "$n"
  phase "embed scaling" "$n" embed $((2 * n))
  stop_nodes
done
echo "== load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
