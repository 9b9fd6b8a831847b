#!/usr/bin/env bash
# Builds what runs on the GPU machine and gathers it in .gpu/ (git-ignored), which the
# device tool carries there: tests tagged `gpu`, GPU benchmarks, gemmd and gemmctl, and
# every shared library they need that is not libc/libstdc++ or the CUDA driver
# (cuBLASLt, 500+ MB, is taken from the GPU machine's own CUDA; see gpu_env.sh), packed
# into .gpu/payload.tar.xz.
#
#   tools/gpu/gpu_bundle.sh [extra bazel targets...]
set -euo pipefail
cd "$(dirname "$0")/../.."
targets=(
  //kernels:gpu_quantize_test
  //daemon:gemmd
  //client/gemmctl
  //kernels/bench:gemm_bench
  //tools/bench:engine_bench
)
# More GPU tests and tools join this list as they are written. Instrumented and candidate
# kernel builds (kernels/bench/BUILD; their tests tagged "candidate") come only when named:
#   tools/gpu/gpu_bundle.sh //kernels/bench:gemm_bench_<name> //kernels/bench:gpu_gemm_<name>_test
for t in $(bazel query 'kind(cc_test, attr(tags, "gpu", tests(//...))) except attr(tags, "candidate", tests(//...))' 2>/dev/null); do
  case " ${targets[*]} " in *" $t "*) ;; *) targets+=("$t") ;; esac
done
targets+=("$@")
bazel build -c opt "${targets[@]}"
rm -rf .gpu
mkdir -p .gpu/bin .gpu/lib
for t in "${targets[@]}"; do
  t="${t#//}"
  case "$t" in *:*) ;; *) t="$t:${t##*/}" ;; esac # //pkg/name means //pkg/name:name
  path="bazel-bin/$(echo "$t" | tr ':' '/')"
  cp "$path" .gpu/bin/
done
# Without their host debug sections (the device tool carries 64 MiB at most); the kernels'
# device code is untouched.
chmod u+w .gpu/bin/*
strip --strip-debug .gpu/bin/*
# Shared libraries from Debian that the GPU machine (Ubuntu) may lack or have in other
# versions: everything ldd names except the C runtime and CUDA's own.
for bin in .gpu/bin/*; do
  (ldd "$bin" 2>/dev/null || true) | awk '/=>/ {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libstdc++.so*|libgcc_s.so*|ld-linux*) ;;
      libcuda.so*|libcublas*|libcudart*|libnvidia*) ;;
      *) cp -L -n "$lib" .gpu/lib/ ;;
    esac
  done
done
ls .gpu/bin
du -sh .gpu/bin .gpu/lib
# Packed into one xz archive: the candidate builds differ from each other in little more than
# their kernels, so 60 MB of binaries pack into a few MB and a call can carry every candidate.
# gpu_env.sh unpacks it on the GPU machine.
tar -C .gpu -cJf .gpu/payload.tar.xz bin lib
rm -rf .gpu/bin .gpu/lib
cp tools/gpu/gpu_run.sh tools/gpu/gpu_env.sh .gpu/
du -sh .gpu
