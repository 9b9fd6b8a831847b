#!/usr/bin/env bash
# Adds this machine's perf, with the libraries it needs beyond the C runtime, to the GPU
# bundle (.gpu/), since the GPU machine has none: there, `GEMMD_PERF=$PWD/.gpu/perf
# python3 tools/bench/serving.py ... --perf` samples every CPU during each window
# (cpu-clock, which needs no hardware counters; the machines are VMs). Run it after
# tools/gpu/gpu_bundle.sh, which makes .gpu/ anew. perf is Debian's linux-perf.
set -euo pipefail
cd "$(dirname "$0")/../.."
perf_bin="$(command -v perf || true)"
[ -n "$perf_bin" ] || { echo "perf_bundle: no perf on this machine (apt-get install linux-perf)" >&2; exit 1; }
[ -d .gpu ] || { echo "perf_bundle: no .gpu/ yet: run tools/gpu/gpu_bundle.sh first" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/perf-bin/lib"
cp -L "$perf_bin" "$tmp/perf-bin/perf"
ldd "$perf_bin" | awk '/=>/ {print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libstdc++.so*|libgcc_s.so*|ld-linux*) ;;
    *) cp -L "$lib" "$tmp/perf-bin/lib/" ;;
  esac
done
tar -C "$tmp" -cJf .gpu/perf.tar.xz perf-bin
cp tools/gpu/perf.sh .gpu/perf
du -sh .gpu/perf.tar.xz
