#!/usr/bin/env bash
# Runs one test file of the gemmd package with pytest under Debian's python3 (which has
# grpcio, protobuf and numpy from Debian, ml_dtypes from PyPI: deploy/bootstrap.sh).
# The package is imported from the source tree (tests/conftest.py puts it on sys.path).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
exec /usr/bin/python3 -m pytest -q -p no:cacheprovider --rootdir="$here" "$here/$1" "${@:2}"
