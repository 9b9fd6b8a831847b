"""The committed protobuf module (gemmd/v1/gemm_pb2.py) and the health messages match
the contract's .proto files; the package's enums match the proto's."""

import os
import shutil
import subprocess
import tempfile

import pytest
from google.protobuf import descriptor_pb2

import gemmd
import harness as H
from gemmd import rpc
from gemmd.v1 import gemm_pb2


def compiled(rel):
    """FileDescriptorProto of proto/<rel> as protoc reads it today."""
    proto = H.repo_path("proto/" + rel)
    root = proto[: -len(rel)]
    out = os.path.join(tempfile.mkdtemp(dir=H.tmpdir()), "set.pb")
    args = ["-I" + root, "--descriptor_set_out=" + out, proto]
    if shutil.which("protoc"):
        subprocess.run(["protoc"] + args, check=True)
    else:
        protoc = pytest.importorskip("grpc_tools.protoc", reason="no protoc here")
        assert protoc.main(["protoc"] + args) == 0
    fds = descriptor_pb2.FileDescriptorSet()
    with open(out, "rb") as f:
        fds.ParseFromString(f.read())
    return normalized(fds.file[0])


def normalized(fd):
    """Without what protoc's Python output leaves out (json names, source info)."""
    fd = descriptor_pb2.FileDescriptorProto.FromString(fd.SerializeToString())
    fd.ClearField("source_code_info")

    def strip(messages):
        for m in messages:
            for f in m.field:
                f.ClearField("json_name")
            strip(m.nested_type)

    strip(fd.message_type)
    return fd


def test_gemm_pb2_matches_proto():
    committed = descriptor_pb2.FileDescriptorProto.FromString(gemm_pb2.DESCRIPTOR.serialized_pb)
    assert normalized(committed) == compiled("gemmd/v1/gemm.proto"), (
        "client/python/gemmd/v1/gemm_pb2.py is out of date: run client/python/regen_proto.sh")


def test_health_messages_match_proto():
    ours = normalized(rpc.health_file_descriptor())
    theirs = compiled("grpc/health/v1/health.proto")
    ours.name = theirs.name
    assert ours == theirs


def test_enums_match_proto():
    for e, pb_enum, prefix in ((gemmd.DType, gemm_pb2.DType, "DTYPE_"),
                               (gemmd.ScaleLayout, gemm_pb2.ScaleLayout, "SCALE_LAYOUT_")):
        names = {v.name: v.number for v in pb_enum.DESCRIPTOR.values}
        ours = {prefix + m.name: int(m) for m in e}
        assert ours == names
    assert [s.name for s in gemmd.HealthStatus] == list(rpc.HealthCheckResponse.ServingStatus.keys())


def test_stubs_cover_every_method():
    import grpc

    stub = rpc.GemmServiceStub(grpc.insecure_channel("localhost:1"))
    for m in gemm_pb2.DESCRIPTOR.services_by_name["GemmService"].methods:
        assert callable(getattr(stub, m.name))
