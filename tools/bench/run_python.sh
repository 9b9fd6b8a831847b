#!/usr/bin/env bash
# Runs one Python file here with the system's python3 (no packages needed).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export PYTHONDONTWRITEBYTECODE=1
exec /usr/bin/python3 "$here/$1" "${@:2}"
