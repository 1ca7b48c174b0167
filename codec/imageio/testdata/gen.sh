#!/usr/bin/env bash
# Regenerates the tiny fixtures of this directory for formats Go cannot encode. Needs ffmpeg with libwebp and
# Python's PIL (Debian python3-pil). The pattern: 32x16, left half (200,40,40), right half (40,60,200), with a
# 4x4 white square at (2,2); alpha fixtures make the right half 50% transparent.
set -euo pipefail
cd "$(dirname "$0")"
python3 - <<'PY'
from PIL import Image
im = Image.new("RGB", (32, 16), (200, 40, 40))
for y in range(16):
    for x in range(16, 32):
        im.putpixel((x, y), (40, 60, 200))
for y in range(2, 6):
    for x in range(2, 6):
        im.putpixel((x, y), (255, 255, 255))
im.save("/tmp/filigrane-fixture.png")
im.convert("CMYK").save("cmyk.jpg", quality=95)
im.save("progressive.jpg", quality=90, progressive=True)
a = im.convert("RGBA")
for y in range(16):
    for x in range(16, 32):
        r, g, b, _ = a.getpixel((x, y))
        a.putpixel((x, y), (r, g, b, 128))
a.save("/tmp/filigrane-fixture-alpha.png")
PY
ffmpeg -loglevel error -y -i /tmp/filigrane-fixture.png -c:v libwebp -lossless 1 lossless.webp
ffmpeg -loglevel error -y -i /tmp/filigrane-fixture.png -c:v libwebp -quality 90 lossy.webp
ffmpeg -loglevel error -y -i /tmp/filigrane-fixture-alpha.png -c:v libwebp -quality 90 -pix_fmt yuva420p lossy_alpha.webp
# Baseline JPEGs with restart markers (ffmpeg writes one restart interval per slice) in three chroma layouts, for
# the fast JPEG decoder's comparison with image/jpeg: 61x37 so that the edge MCUs are partial.
for pf in 420 422 444; do
	ffmpeg -loglevel error -y -f lavfi -i testsrc2=size=61x37 -frames:v 1 -pix_fmt yuvj${pf}p -slices 3 -threads 3 \
		-q:v 3 restart_$pf.jpg
done
