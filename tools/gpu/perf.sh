#!/usr/bin/env bash
# On the GPU machine, as .gpu/perf: perf from .gpu/perf.tar.xz (tools/gpu/perf_bundle.sh),
# unpacked on first use, with its own libraries.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ ! -x "$here/perf-bin/perf" ]; then
  tar -C "$here" -xJf "$here/perf.tar.xz" ||
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$here/perf.tar.xz" "$here"
fi
LD_LIBRARY_PATH="$here/perf-bin/lib" exec "$here/perf-bin/perf" "$@"
