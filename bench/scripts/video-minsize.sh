#!/usr/bin/env bash
# Does a video mark read back at a given frame size? For one content and size: a 3 s source clip (CRF 18), marked
# with `codec embed` (default options), detected on the output and on a CRF 28 re-encode of it. Prints
# CONTENT,W,H,OUT,CRF28 with 1 where the embedded id was read, 0 where not; "refused" when the embed failed
# (a binary from 76ed477 or earlier marks every size; later ones refuse what docs/video.md, "Minimum frame size",
# refuses). Contents: testsrc2, gradients, flatnoise (lavfi), vtest, tree (opencv-doc, scaled to cover the size
# and centre-cropped; CORPUS is the corpus's examples/data folder).
# usage: bench/scripts/video-minsize.sh FILIGRANE_BINARY CONTENT W H
set -uo pipefail
bin=$1 c=$2 w=$3 h=$4
S=${w}x${h}
V=${CORPUS:-$HOME/.cache/filigrane/corpus/root/usr/share/doc/opencv-doc/examples/data}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fit="scale=$w:$h:force_original_aspect_ratio=increase,crop=$w:$h,setsar=1"
case $c in
  testsrc2) src=(-f lavfi -i "testsrc2=size=$S:rate=25") ;;
  gradients) src=(-f lavfi -i "gradients=size=$S:rate=25") ;;
  flatnoise) src=(-f lavfi -i "color=c=0x7f7f70:size=$S:rate=25,noise=alls=4:allf=t+u") ;;
  vtest) src=(-i "$V/vtest.avi" -vf "$fit") ;;
  tree) src=(-i "$V/tree.avi" -vf "$fit") ;;
  *) echo "unknown content $c" >&2; exit 2 ;;
esac
ffmpeg -nostdin -v error -y "${src[@]}" -t 3 -c:v libx264 -crf 18 -pix_fmt yuv420p -an "$tmp/in.mp4" || exit 1
id=$("$bin" codec embed --data "{\"c\":\"$c$S\"}" "$tmp/in.mp4" "$tmp/m.mp4" 2>/dev/null | awk '/watermark_id/{print $2}')
if [ -z "$id" ]; then echo "$c,$w,$h,refused"; exit 0; fi
ffmpeg -nostdin -v error -y -i "$tmp/m.mp4" -c:v libx264 -crf 28 -pix_fmt yuv420p "$tmp/r.mp4"
r18=$("$bin" codec detect "$tmp/m.mp4" 2>/dev/null | head -4 | grep -c "$id")
r28=$("$bin" codec detect "$tmp/r.mp4" 2>/dev/null | head -4 | grep -c "$id")
echo "$c,$w,$h,$r18,$r28"
