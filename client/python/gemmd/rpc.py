"""Low-level gRPC access, for callers who want gemm.proto's messages themselves:
stubs of ``gemmd.v1.GemmService`` and ``grpc.health.v1.Health`` made from the services'
descriptors with grpcio's generic calls (no generated ``_pb2_grpc`` module is needed).

    stub = gemmd.rpc.GemmServiceStub(grpc.insecure_channel("localhost:50051"))
    info = stub.ListWeights(gemm_pb2.ListWeightsRequest())

The health messages live in a descriptor pool of their own, so that this module and
grpcio-health-checking's ``grpc_health.v1.health_pb2`` can be loaded in one process.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, message_factory

from .v1 import gemm_pb2

__all__ = ["GemmServiceStub", "HealthStub", "HealthCheckRequest", "HealthCheckResponse",
           "gemm_pb2", "health_file_descriptor"]

_KIND = {(False, False): "unary_unary", (True, False): "stream_unary",
         (False, True): "unary_stream", (True, True): "stream_stream"}


class _Stub:
    """Attributes named after the service's methods, each a grpcio multicallable."""

    def __init__(self, channel: Any, service: str, methods: list[tuple[str, str, Any, Any]]):
        self._service = service
        for name, kind, req, resp in methods:
            factory = getattr(channel, kind)
            setattr(self, name, factory("/%s/%s" % (service, name),
                                        request_serializer=req.SerializeToString,
                                        response_deserializer=resp.FromString))

    def __repr__(self) -> str:
        return "<%s stub>" % self._service


def GemmServiceStub(channel: Any) -> Any:  # noqa: N802 - the name grpcio's codegen gives it
    """A stub of gemmd.v1.GemmService on a grpc.Channel."""
    svc = gemm_pb2.DESCRIPTOR.services_by_name["GemmService"]
    return _Stub(channel, svc.full_name, [
        (m.name, _KIND[(m.client_streaming, m.server_streaming)],
         getattr(gemm_pb2, m.input_type.name), getattr(gemm_pb2, m.output_type.name))
        for m in svc.methods])


def health_file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    """proto/grpc/health/v1/health.proto as a FileDescriptorProto (tests/test_proto.py
    checks it against the file)."""
    F = descriptor_pb2.FieldDescriptorProto
    f = descriptor_pb2.FileDescriptorProto(name="gemmd/grpc_health_v1.proto",
                                           package="grpc.health.v1", syntax="proto3")
    req = f.message_type.add(name="HealthCheckRequest")
    req.field.add(name="service", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    resp = f.message_type.add(name="HealthCheckResponse")
    enum = resp.enum_type.add(name="ServingStatus")
    for number, name in enumerate(("UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN")):
        enum.value.add(name=name, number=number)
    resp.field.add(name="status", number=1, type=F.TYPE_ENUM, label=F.LABEL_OPTIONAL,
                   type_name=".grpc.health.v1.HealthCheckResponse.ServingStatus")
    svc = f.service.add(name="Health")
    svc.method.add(name="Check", input_type=".grpc.health.v1.HealthCheckRequest",
                   output_type=".grpc.health.v1.HealthCheckResponse")
    svc.method.add(name="Watch", input_type=".grpc.health.v1.HealthCheckRequest",
                   output_type=".grpc.health.v1.HealthCheckResponse", server_streaming=True)
    return f


_health = message_factory.GetMessages([health_file_descriptor()])  # a pool of its own
HealthCheckRequest: Any = _health["grpc.health.v1.HealthCheckRequest"]
HealthCheckResponse: Any = _health["grpc.health.v1.HealthCheckResponse"]


def HealthStub(channel: Any) -> Any:  # noqa: N802
    """A stub of grpc.health.v1.Health (Check, Watch) on a grpc.Channel."""
    return _Stub(channel, "grpc.health.v1.Health", [
        ("Check", "unary_unary", HealthCheckRequest, HealthCheckResponse),
        ("Watch", "unary_stream", HealthCheckRequest, HealthCheckResponse)])
