#!/usr/bin/env bash
# Side-by-side speed of the video embedding pipeline against a plain ffmpeg libx264 re-encode with the same
# settings (preset medium, CRF 18, audio copied, +faststart) on the same file, alternating REPS times.
# Prints wall and CPU (user+sys of all processes) seconds per run and the ratios of the sums.
# usage: bench/scripts/video-speed.sh FILIGRANE_BINARY REPS CLIP...
set -euo pipefail
bin=$1 reps=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
TIMEFORMAT='%R %U %S'
for clip in "$@"; do
  ext=${clip##*.}
  bw=0 bc=0 pw=0 pc=0
  for i in $(seq "$reps"); do
    b=$( { time ffmpeg -nostdin -v error -y -i "$clip" -map 0:v:0 -map '0:a?' -c:v libx264 -preset medium -crf 18 \
          -c:a copy -movflags +faststart "$tmp/base.$ext" ; } 2>&1 )
    p=$( { time "$bin" codec embed --data '{"bench":1}' "$clip" "$tmp/marked.$ext" >/dev/null 2>/dev/null ; } 2>&1 )
    read -r w u s <<<"$b"; bw=$(echo "$bw+$w" | bc); bc=$(echo "$bc+$u+$s" | bc)
    read -r w u s <<<"$p"; pw=$(echo "$pw+$w" | bc); pc=$(echo "$pc+$u+$s" | bc)
    echo "$(basename "$clip") run $i: baseline $b | pipeline $p"
  done
  echo "$(basename "$clip"): wall ratio $(echo "scale=3; $pw/$bw" | bc), CPU ratio $(echo "scale=3; $pc/$bc" | bc)"
done
