#!/usr/bin/env bash
# Regenerates the Python package's protobuf module from the contract, proto/gemmd/v1/gemm.proto:
# gemmd/v1/gemm_pb2.py and its type stub gemm_pb2.pyi, committed (so that installing the
# package needs no protoc). Uses Debian's protoc 3.21 on purpose: its code runs on every
# protobuf runtime from 3.20 on, where newer protoc's code refuses older runtimes.
# client/python/tests/test_proto.py fails when the committed module and the .proto differ.
set -euo pipefail
cd "$(dirname "$0")/../.."
protoc -Iproto --python_out=client/python --pyi_out=client/python proto/gemmd/v1/gemm.proto
echo "regenerated client/python/gemmd/v1/gemm_pb2.py{,i} with $(protoc --version)"
