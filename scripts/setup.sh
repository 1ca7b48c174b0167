#!/usr/bin/env bash
# Installs what Filigrane needs on a Debian machine when it is missing: ffmpeg/ffprobe (video), mutool (PDF
# rasterization), curl and jq (the README's examples) and, with --s3 (the test setup), the versitygw S3 server
# used by the cluster tests, headless Chromium for the console's browser test, qpdf and a C/C++ compiler.
# Safe to run repeatedly.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v ffmpeg >/dev/null 2>&1 || need_apt+=(ffmpeg)
command -v mutool >/dev/null 2>&1 || need_apt+=(mupdf-tools)
# curl and jq: the README's walk-through uses them, and TestREADMEMediaRoundTrip runs its PDF/video block.
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
command -v jq >/dev/null 2>&1 || need_apt+=(jq)
# The test setup (--s3) also needs headless Chromium for the web console's browser test (http/console),
# qpdf (codec/pdf re-saves a marked document with it and reads the mark back) and a C/C++ compiler (the fake
# CUDA driver library of gpu and cmd/filigrane, the kernels' host harness of gpu/cudacodec).
if [ "${1:-}" = "--s3" ]; then
  if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
    need_apt+=(chromium fonts-dejavu-core)
  fi
  command -v qpdf >/dev/null 2>&1 || need_apt+=(qpdf)
  { command -v cc >/dev/null 2>&1 && command -v c++ >/dev/null 2>&1; } || need_apt+=(g++)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]}" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

if [ "${1:-}" = "--s3" ]; then
  bin="${FILIGRANE_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/filigrane/bin}"
  if [ ! -x "$bin/versitygw" ]; then
    echo "setup: building versitygw v1.8.0 into $bin (a few minutes on first run)" >&2
    mkdir -p "$bin"
    GOBIN="$bin" go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
  fi
fi
