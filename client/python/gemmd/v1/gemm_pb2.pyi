from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
DTYPE_BF16: DType
DTYPE_FP16: DType
DTYPE_FP32: DType
DTYPE_FP8_E4M3: DType
DTYPE_FP8_E5M2: DType
DTYPE_UNSPECIFIED: DType
SCALE_LAYOUT_BLOCK_128X128: ScaleLayout
SCALE_LAYOUT_BLOCK_1X128: ScaleLayout
SCALE_LAYOUT_NONE: ScaleLayout
SCALE_LAYOUT_ROW: ScaleLayout
SCALE_LAYOUT_TENSOR: ScaleLayout

class CodeCount(_message.Message):
    __slots__ = ["code", "count", "transport"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_FIELD_NUMBER: _ClassVar[int]
    code: str
    count: int
    transport: str
    def __init__(self, transport: _Optional[str] = ..., code: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class GemmRequest(_message.Message):
    __slots__ = ["a", "b", "out_dtype", "request_id", "weight_id", "weight_name"]
    A_FIELD_NUMBER: _ClassVar[int]
    B_FIELD_NUMBER: _ClassVar[int]
    OUT_DTYPE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_ID_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_NAME_FIELD_NUMBER: _ClassVar[int]
    a: Matrix
    b: Matrix
    out_dtype: DType
    request_id: int
    weight_id: int
    weight_name: str
    def __init__(self, request_id: _Optional[int] = ..., weight_id: _Optional[int] = ..., weight_name: _Optional[str] = ..., b: _Optional[_Union[Matrix, _Mapping]] = ..., a: _Optional[_Union[Matrix, _Mapping]] = ..., out_dtype: _Optional[_Union[DType, str]] = ...) -> None: ...

class GemmResponse(_message.Message):
    __slots__ = ["d", "error_code", "error_message", "request_id", "stats"]
    D_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    d: Matrix
    error_code: int
    error_message: str
    request_id: int
    stats: RequestStats
    def __init__(self, request_id: _Optional[int] = ..., d: _Optional[_Union[Matrix, _Mapping]] = ..., stats: _Optional[_Union[RequestStats, _Mapping]] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...

class GetStatsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class LatencySummary(_message.Message):
    __slots__ = ["count", "max_us", "mean_us", "p50_us", "p90_us", "p999_us", "p99_us"]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    MAX_US_FIELD_NUMBER: _ClassVar[int]
    MEAN_US_FIELD_NUMBER: _ClassVar[int]
    P50_US_FIELD_NUMBER: _ClassVar[int]
    P90_US_FIELD_NUMBER: _ClassVar[int]
    P999_US_FIELD_NUMBER: _ClassVar[int]
    P99_US_FIELD_NUMBER: _ClassVar[int]
    count: int
    max_us: float
    mean_us: float
    p50_us: float
    p90_us: float
    p999_us: float
    p99_us: float
    def __init__(self, count: _Optional[int] = ..., mean_us: _Optional[float] = ..., p50_us: _Optional[float] = ..., p90_us: _Optional[float] = ..., p99_us: _Optional[float] = ..., p999_us: _Optional[float] = ..., max_us: _Optional[float] = ...) -> None: ...

class ListWeightsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListWeightsResponse(_message.Message):
    __slots__ = ["weights"]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    weights: _containers.RepeatedCompositeFieldContainer[WeightInfo]
    def __init__(self, weights: _Optional[_Iterable[_Union[WeightInfo, _Mapping]]] = ...) -> None: ...

class Matrix(_message.Message):
    __slots__ = ["cols", "data", "dtype", "rows", "scale_layout", "scales"]
    COLS_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    SCALES_FIELD_NUMBER: _ClassVar[int]
    SCALE_LAYOUT_FIELD_NUMBER: _ClassVar[int]
    cols: int
    data: bytes
    dtype: DType
    rows: int
    scale_layout: ScaleLayout
    scales: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, rows: _Optional[int] = ..., cols: _Optional[int] = ..., dtype: _Optional[_Union[DType, str]] = ..., data: _Optional[bytes] = ..., scale_layout: _Optional[_Union[ScaleLayout, str]] = ..., scales: _Optional[_Iterable[float]] = ...) -> None: ...

class RegisterWeightRequest(_message.Message):
    __slots__ = ["name", "weight"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    name: str
    weight: Matrix
    def __init__(self, name: _Optional[str] = ..., weight: _Optional[_Union[Matrix, _Mapping]] = ...) -> None: ...

class RequestStats(_message.Message):
    __slots__ = ["batch_groups", "batch_id", "batch_requests", "compute_ns", "queue_ns", "total_ns"]
    BATCH_GROUPS_FIELD_NUMBER: _ClassVar[int]
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    BATCH_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_NS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_NS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_NS_FIELD_NUMBER: _ClassVar[int]
    batch_groups: int
    batch_id: int
    batch_requests: int
    compute_ns: int
    queue_ns: int
    total_ns: int
    def __init__(self, queue_ns: _Optional[int] = ..., compute_ns: _Optional[int] = ..., total_ns: _Optional[int] = ..., batch_requests: _Optional[int] = ..., batch_groups: _Optional[int] = ..., batch_id: _Optional[int] = ...) -> None: ...

class ServerStats(_message.Message):
    __slots__ = ["backend", "batch_latency", "batches_total", "device", "device_memory_total_bytes", "device_memory_used_bytes", "draining", "flops_total", "gemm_kernel", "graph_captures_total", "graph_replays_total", "inflight_requests", "input_bytes_total", "loading", "mean_batch_requests", "output_bytes_total", "queue_depth", "queue_latency", "ready", "request_latency", "requests_by_code", "requests_failed", "requests_total", "shm_clients", "startup_files", "startup_files_loaded", "startup_weights_loaded", "uptime_ns", "version", "weight_budget_bytes", "weight_bytes", "weights"]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    BATCHES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    BATCH_LATENCY_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    DEVICE_MEMORY_TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    DEVICE_MEMORY_USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    DRAINING_FIELD_NUMBER: _ClassVar[int]
    FLOPS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    GEMM_KERNEL_FIELD_NUMBER: _ClassVar[int]
    GRAPH_CAPTURES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    GRAPH_REPLAYS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    INFLIGHT_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    INPUT_BYTES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    LOADING_FIELD_NUMBER: _ClassVar[int]
    MEAN_BATCH_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_BYTES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    QUEUE_DEPTH_FIELD_NUMBER: _ClassVar[int]
    QUEUE_LATENCY_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_BY_CODE_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FAILED_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    REQUEST_LATENCY_FIELD_NUMBER: _ClassVar[int]
    SHM_CLIENTS_FIELD_NUMBER: _ClassVar[int]
    STARTUP_FILES_FIELD_NUMBER: _ClassVar[int]
    STARTUP_FILES_LOADED_FIELD_NUMBER: _ClassVar[int]
    STARTUP_WEIGHTS_LOADED_FIELD_NUMBER: _ClassVar[int]
    UPTIME_NS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_BUDGET_BYTES_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_BYTES_FIELD_NUMBER: _ClassVar[int]
    backend: str
    batch_latency: LatencySummary
    batches_total: int
    device: str
    device_memory_total_bytes: int
    device_memory_used_bytes: int
    draining: bool
    flops_total: float
    gemm_kernel: str
    graph_captures_total: int
    graph_replays_total: int
    inflight_requests: int
    input_bytes_total: int
    loading: bool
    mean_batch_requests: float
    output_bytes_total: int
    queue_depth: int
    queue_latency: LatencySummary
    ready: bool
    request_latency: LatencySummary
    requests_by_code: _containers.RepeatedCompositeFieldContainer[CodeCount]
    requests_failed: int
    requests_total: int
    shm_clients: int
    startup_files: int
    startup_files_loaded: int
    startup_weights_loaded: int
    uptime_ns: int
    version: str
    weight_budget_bytes: int
    weight_bytes: int
    weights: int
    def __init__(self, version: _Optional[str] = ..., backend: _Optional[str] = ..., device: _Optional[str] = ..., gemm_kernel: _Optional[str] = ..., uptime_ns: _Optional[int] = ..., ready: bool = ..., draining: bool = ..., requests_total: _Optional[int] = ..., requests_failed: _Optional[int] = ..., batches_total: _Optional[int] = ..., flops_total: _Optional[float] = ..., input_bytes_total: _Optional[int] = ..., output_bytes_total: _Optional[int] = ..., graph_replays_total: _Optional[int] = ..., graph_captures_total: _Optional[int] = ..., requests_by_code: _Optional[_Iterable[_Union[CodeCount, _Mapping]]] = ..., request_latency: _Optional[_Union[LatencySummary, _Mapping]] = ..., queue_latency: _Optional[_Union[LatencySummary, _Mapping]] = ..., batch_latency: _Optional[_Union[LatencySummary, _Mapping]] = ..., mean_batch_requests: _Optional[float] = ..., queue_depth: _Optional[int] = ..., inflight_requests: _Optional[int] = ..., shm_clients: _Optional[int] = ..., weights: _Optional[int] = ..., weight_bytes: _Optional[int] = ..., weight_budget_bytes: _Optional[int] = ..., device_memory_used_bytes: _Optional[int] = ..., device_memory_total_bytes: _Optional[int] = ..., loading: bool = ..., startup_files: _Optional[int] = ..., startup_files_loaded: _Optional[int] = ..., startup_weights_loaded: _Optional[int] = ...) -> None: ...

class UnregisterWeightRequest(_message.Message):
    __slots__ = ["name", "weight_id"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    weight_id: int
    def __init__(self, weight_id: _Optional[int] = ..., name: _Optional[str] = ...) -> None: ...

class UnregisterWeightResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class WeightInfo(_message.Message):
    __slots__ = ["bytes", "dtype", "k", "n", "name", "scale_layout", "source", "weight_id"]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    SCALE_LAYOUT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_ID_FIELD_NUMBER: _ClassVar[int]
    bytes: int
    dtype: DType
    k: int
    n: int
    name: str
    scale_layout: ScaleLayout
    source: str
    weight_id: int
    def __init__(self, weight_id: _Optional[int] = ..., name: _Optional[str] = ..., n: _Optional[int] = ..., k: _Optional[int] = ..., dtype: _Optional[_Union[DType, str]] = ..., scale_layout: _Optional[_Union[ScaleLayout, str]] = ..., bytes: _Optional[int] = ..., source: _Optional[str] = ...) -> None: ...

class DType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ScaleLayout(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
