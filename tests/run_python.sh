#!/usr/bin/env bash
# Runs one Python test file with Debian's python3, which has the independent clients the
# tests use (python3-grpcio, python3-numpy; ml_dtypes, which the gemmd package whose
# messages they use needs, from PyPI: deploy/bootstrap.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
exec /usr/bin/python3 "$here/$1" "${@:2}"
