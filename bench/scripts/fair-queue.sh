#!/usr/bin/env bash
# Does one organization's backlog hold another's synchronous request? One node (`--workers 2`, a fresh data
# directory), organization A (enterprise: 64 jobs at once) queues N async embeds of a 1024x1024 JPEG (8 at a
# time), then organization B's sync embed and one of A's own are sent together and timed. Prints LABEL STATUS
# SECONDS per request, the A submissions' statuses, and filigrane_work_queued before and after.
# usage: bench/scripts/fair-queue.sh FILIGRANE_BINARY PORT N      (PORT and PORT+1 must be free)
set -uo pipefail
bin=$1 port=$2 n=$3
d=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$d"' EXIT
ffmpeg -loglevel error -y -f lavfi -i testsrc2=size=1024x1024 -frames:v 1 -q:v 3 "$d/img.jpg"
org() { "$bin" admin --data "$d/data" org create --name "$1" --plan "$2" --credits 100000 | grep -o 'org_[0-9a-f]*' | head -1; }
key() {
  local m
  m=$("$bin" admin --data "$d/data" member add --org "$1" --name owner --role owner | grep -o 'mem_[0-9a-f]*' | head -1)
  "$bin" admin --data "$d/data" key create --org "$1" --member "$m" | grep -o 'fgk_[A-Za-z0-9_-]*' | head -1
}
ka=$(key "$(org A enterprise)") kb=$(key "$(org B growth)")
"$bin" serve --data "$d/data" --listen 127.0.0.1:$port --upload-listen 127.0.0.1:$((port + 1)) --workers 2 >"$d/log" 2>&1 &
pid=$!
until curl -sf http://127.0.0.1:$port/readyz >/dev/null; do sleep 0.2; done
base=http://127.0.0.1:$port/watermarks/images
embed() { curl -s -o /dev/null -w "$1 %{http_code} %{time_total}\n" -H "X-API-Key: $2" -F 'data={"s":1}' -F "file=@$d/img.jpg" "$base"; }
queued() { curl -s http://127.0.0.1:$port/metrics | grep '^filigrane_work_queued{class="cpu"' | sed "s/^/$1: /"; }
embed B-alone "$kb"
seq 1 "$n" | xargs -P 8 -I{} curl -s -o /dev/null -w "%{http_code}\n" -H "X-API-Key: $ka" -F 'data={"a":{}}' \
  -F "file=@$d/img.jpg" "$base/async" | sort | uniq -c | sed 's/^ */A-async x/'
queued queued-before
embed B-behind-A-backlog "$kb" &
p1=$!
embed A-sync-behind-own-backlog "$ka" &
p2=$!
wait $p1 $p2
queued queued-after
