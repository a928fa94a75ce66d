from agl_bridge.gen.agl.v1 import types_pb2 as _types_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EnqueueRolloutsRequest(_message.Message):
    __slots__ = ("rollouts",)
    ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    rollouts: _containers.RepeatedCompositeFieldContainer[_types_pb2.RolloutSpec]
    def __init__(self, rollouts: _Optional[_Iterable[_Union[_types_pb2.RolloutSpec, _Mapping]]] = ...) -> None: ...

class EnqueueRolloutsResponse(_message.Message):
    __slots__ = ("rollouts",)
    ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    rollouts: _containers.RepeatedCompositeFieldContainer[_types_pb2.Rollout]
    def __init__(self, rollouts: _Optional[_Iterable[_Union[_types_pb2.Rollout, _Mapping]]] = ...) -> None: ...

class DequeueRolloutsRequest(_message.Message):
    __slots__ = ("limit", "worker_id", "wait_seconds")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    limit: int
    worker_id: str
    wait_seconds: float
    def __init__(self, limit: _Optional[int] = ..., worker_id: _Optional[str] = ..., wait_seconds: _Optional[float] = ...) -> None: ...

class DequeueRolloutsResponse(_message.Message):
    __slots__ = ("rollouts",)
    ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    rollouts: _containers.RepeatedCompositeFieldContainer[_types_pb2.Rollout]
    def __init__(self, rollouts: _Optional[_Iterable[_Union[_types_pb2.Rollout, _Mapping]]] = ...) -> None: ...

class StartRolloutRequest(_message.Message):
    __slots__ = ("rollout", "worker_id")
    ROLLOUT_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    rollout: _types_pb2.RolloutSpec
    worker_id: str
    def __init__(self, rollout: _Optional[_Union[_types_pb2.RolloutSpec, _Mapping]] = ..., worker_id: _Optional[str] = ...) -> None: ...

class StartAttemptRequest(_message.Message):
    __slots__ = ("rollout_id", "worker_id")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    worker_id: str
    def __init__(self, rollout_id: _Optional[str] = ..., worker_id: _Optional[str] = ...) -> None: ...

class GetRolloutRequest(_message.Message):
    __slots__ = ("rollout_id",)
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    def __init__(self, rollout_id: _Optional[str] = ...) -> None: ...

class QueryRolloutsRequest(_message.Message):
    __slots__ = ("status_in", "rollout_id_in", "rollout_id_contains", "group_id", "filter_logic", "page", "mode_in", "resources_id_in", "resources_version", "start_time_from", "start_time_to", "end_time_from", "end_time_to", "include_final_rewards")
    STATUS_IN_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_ID_IN_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_ID_CONTAINS_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    FILTER_LOGIC_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    MODE_IN_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_ID_IN_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_VERSION_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FROM_FIELD_NUMBER: _ClassVar[int]
    START_TIME_TO_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FROM_FIELD_NUMBER: _ClassVar[int]
    END_TIME_TO_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FINAL_REWARDS_FIELD_NUMBER: _ClassVar[int]
    status_in: _containers.RepeatedScalarFieldContainer[_types_pb2.RolloutStatus]
    rollout_id_in: _containers.RepeatedScalarFieldContainer[str]
    rollout_id_contains: str
    group_id: str
    filter_logic: _types_pb2.FilterLogic
    page: _types_pb2.Page
    mode_in: _containers.RepeatedScalarFieldContainer[_types_pb2.RolloutMode]
    resources_id_in: _containers.RepeatedScalarFieldContainer[str]
    resources_version: int
    start_time_from: float
    start_time_to: float
    end_time_from: float
    end_time_to: float
    include_final_rewards: bool
    def __init__(self, status_in: _Optional[_Iterable[_Union[_types_pb2.RolloutStatus, str]]] = ..., rollout_id_in: _Optional[_Iterable[str]] = ..., rollout_id_contains: _Optional[str] = ..., group_id: _Optional[str] = ..., filter_logic: _Optional[_Union[_types_pb2.FilterLogic, str]] = ..., page: _Optional[_Union[_types_pb2.Page, _Mapping]] = ..., mode_in: _Optional[_Iterable[_Union[_types_pb2.RolloutMode, str]]] = ..., resources_id_in: _Optional[_Iterable[str]] = ..., resources_version: _Optional[int] = ..., start_time_from: _Optional[float] = ..., start_time_to: _Optional[float] = ..., end_time_from: _Optional[float] = ..., end_time_to: _Optional[float] = ..., include_final_rewards: _Optional[bool] = ...) -> None: ...

class QueryRolloutsResponse(_message.Message):
    __slots__ = ("rollouts", "page", "final_rewards")
    class FinalRewardsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    FINAL_REWARDS_FIELD_NUMBER: _ClassVar[int]
    rollouts: _containers.RepeatedCompositeFieldContainer[_types_pb2.Rollout]
    page: _types_pb2.PageInfo
    final_rewards: _containers.ScalarMap[str, float]
    def __init__(self, rollouts: _Optional[_Iterable[_Union[_types_pb2.Rollout, _Mapping]]] = ..., page: _Optional[_Union[_types_pb2.PageInfo, _Mapping]] = ..., final_rewards: _Optional[_Mapping[str, float]] = ...) -> None: ...

class UpdateRolloutRequest(_message.Message):
    __slots__ = ("rollout_id", "input", "mode", "resources_id", "status", "config", "metadata")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    input: _struct_pb2.Value
    mode: _types_pb2.RolloutMode
    resources_id: str
    status: _types_pb2.RolloutStatus
    config: _types_pb2.RolloutConfig
    metadata: _struct_pb2.Struct
    def __init__(self, rollout_id: _Optional[str] = ..., input: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., mode: _Optional[_Union[_types_pb2.RolloutMode, str]] = ..., resources_id: _Optional[str] = ..., status: _Optional[_Union[_types_pb2.RolloutStatus, str]] = ..., config: _Optional[_Union[_types_pb2.RolloutConfig, _Mapping]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class WaitForRolloutsRequest(_message.Message):
    __slots__ = ("rollout_ids", "timeout_seconds")
    ROLLOUT_IDS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    rollout_ids: _containers.RepeatedScalarFieldContainer[str]
    timeout_seconds: float
    def __init__(self, rollout_ids: _Optional[_Iterable[str]] = ..., timeout_seconds: _Optional[float] = ...) -> None: ...

class WaitForRolloutsResponse(_message.Message):
    __slots__ = ("rollouts",)
    ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    rollouts: _containers.RepeatedCompositeFieldContainer[_types_pb2.Rollout]
    def __init__(self, rollouts: _Optional[_Iterable[_Union[_types_pb2.Rollout, _Mapping]]] = ...) -> None: ...

class QueryAttemptsRequest(_message.Message):
    __slots__ = ("rollout_id", "page")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    page: _types_pb2.Page
    def __init__(self, rollout_id: _Optional[str] = ..., page: _Optional[_Union[_types_pb2.Page, _Mapping]] = ...) -> None: ...

class QueryAttemptsResponse(_message.Message):
    __slots__ = ("attempts", "page")
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    attempts: _containers.RepeatedCompositeFieldContainer[_types_pb2.Attempt]
    page: _types_pb2.PageInfo
    def __init__(self, attempts: _Optional[_Iterable[_Union[_types_pb2.Attempt, _Mapping]]] = ..., page: _Optional[_Union[_types_pb2.PageInfo, _Mapping]] = ...) -> None: ...

class GetLatestAttemptRequest(_message.Message):
    __slots__ = ("rollout_id",)
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    def __init__(self, rollout_id: _Optional[str] = ...) -> None: ...

class GetLatestAttemptResponse(_message.Message):
    __slots__ = ("attempt",)
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    attempt: _types_pb2.Attempt
    def __init__(self, attempt: _Optional[_Union[_types_pb2.Attempt, _Mapping]] = ...) -> None: ...

class UpdateAttemptRequest(_message.Message):
    __slots__ = ("rollout_id", "attempt_id", "status", "worker_id", "last_heartbeat_time", "metadata", "spans")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_TIME_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPANS_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    attempt_id: str
    status: _types_pb2.AttemptStatus
    worker_id: str
    last_heartbeat_time: float
    metadata: _struct_pb2.Struct
    spans: _containers.RepeatedCompositeFieldContainer[_types_pb2.Span]
    def __init__(self, rollout_id: _Optional[str] = ..., attempt_id: _Optional[str] = ..., status: _Optional[_Union[_types_pb2.AttemptStatus, str]] = ..., worker_id: _Optional[str] = ..., last_heartbeat_time: _Optional[float] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., spans: _Optional[_Iterable[_Union[_types_pb2.Span, _Mapping]]] = ...) -> None: ...

class AddSpansRequest(_message.Message):
    __slots__ = ("spans", "expect", "id")
    SPANS_FIELD_NUMBER: _ClassVar[int]
    EXPECT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    spans: _containers.RepeatedCompositeFieldContainer[_types_pb2.Span]
    expect: _containers.RepeatedCompositeFieldContainer[ExpectSpansRequest]
    id: int
    def __init__(self, spans: _Optional[_Iterable[_Union[_types_pb2.Span, _Mapping]]] = ..., expect: _Optional[_Iterable[_Union[ExpectSpansRequest, _Mapping]]] = ..., id: _Optional[int] = ...) -> None: ...

class ExpectSpansRequest(_message.Message):
    __slots__ = ("rollout_id", "attempt_id", "span_ids", "ttl_ms", "withdraw", "describe_attempt", "hold")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    SPAN_IDS_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    WITHDRAW_FIELD_NUMBER: _ClassVar[int]
    DESCRIBE_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    HOLD_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    attempt_id: str
    span_ids: _containers.RepeatedScalarFieldContainer[str]
    ttl_ms: int
    withdraw: bool
    describe_attempt: bool
    hold: bool
    def __init__(self, rollout_id: _Optional[str] = ..., attempt_id: _Optional[str] = ..., span_ids: _Optional[_Iterable[str]] = ..., ttl_ms: _Optional[int] = ..., withdraw: _Optional[bool] = ..., describe_attempt: _Optional[bool] = ..., hold: _Optional[bool] = ...) -> None: ...

class ExpectSpansResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AttemptDescription(_message.Message):
    __slots__ = ("rollout_exists", "attempt_exists", "resources_id", "token_in")
    ROLLOUT_EXISTS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_EXISTS_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_IN_FIELD_NUMBER: _ClassVar[int]
    rollout_exists: bool
    attempt_exists: bool
    resources_id: str
    token_in: bool
    def __init__(self, rollout_exists: _Optional[bool] = ..., attempt_exists: _Optional[bool] = ..., resources_id: _Optional[str] = ..., token_in: _Optional[bool] = ...) -> None: ...

class SpanAck(_message.Message):
    __slots__ = ("rollout_id", "attempt_id", "span_id", "sequence_id", "duplicate", "attempt_status")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_STATUS_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    attempt_id: str
    span_id: str
    sequence_id: int
    duplicate: bool
    attempt_status: _types_pb2.AttemptStatus
    def __init__(self, rollout_id: _Optional[str] = ..., attempt_id: _Optional[str] = ..., span_id: _Optional[str] = ..., sequence_id: _Optional[int] = ..., duplicate: _Optional[bool] = ..., attempt_status: _Optional[_Union[_types_pb2.AttemptStatus, str]] = ...) -> None: ...

class AddSpansResponse(_message.Message):
    __slots__ = ("acks", "expect_held", "expect_attempts", "holds")
    ACKS_FIELD_NUMBER: _ClassVar[int]
    EXPECT_HELD_FIELD_NUMBER: _ClassVar[int]
    EXPECT_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    HOLDS_FIELD_NUMBER: _ClassVar[int]
    acks: _containers.RepeatedCompositeFieldContainer[SpanAck]
    expect_held: _containers.RepeatedScalarFieldContainer[bool]
    expect_attempts: _containers.RepeatedCompositeFieldContainer[AttemptDescription]
    holds: bool
    def __init__(self, acks: _Optional[_Iterable[_Union[SpanAck, _Mapping]]] = ..., expect_held: _Optional[_Iterable[bool]] = ..., expect_attempts: _Optional[_Iterable[_Union[AttemptDescription, _Mapping]]] = ..., holds: _Optional[bool] = ...) -> None: ...

class AddSpansStreamResponse(_message.Message):
    __slots__ = ("id", "response", "error_code", "error_message", "release")
    ID_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    id: int
    response: AddSpansResponse
    error_code: int
    error_message: str
    release: _containers.RepeatedCompositeFieldContainer[ExpectSpansRequest]
    def __init__(self, id: _Optional[int] = ..., response: _Optional[_Union[AddSpansResponse, _Mapping]] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., release: _Optional[_Iterable[_Union[ExpectSpansRequest, _Mapping]]] = ...) -> None: ...

class QuerySpansRequest(_message.Message):
    __slots__ = ("rollout_id", "attempt_id", "trace_id", "trace_id_contains", "span_id", "span_id_contains", "parent_id", "parent_id_contains", "name", "name_contains", "filter_logic", "after_sequence_id", "page")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_CONTAINS_FIELD_NUMBER: _ClassVar[int]
    SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    SPAN_ID_CONTAINS_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_CONTAINS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NAME_CONTAINS_FIELD_NUMBER: _ClassVar[int]
    FILTER_LOGIC_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    attempt_id: str
    trace_id: str
    trace_id_contains: str
    span_id: str
    span_id_contains: str
    parent_id: str
    parent_id_contains: str
    name: str
    name_contains: str
    filter_logic: _types_pb2.FilterLogic
    after_sequence_id: int
    page: _types_pb2.Page
    def __init__(self, rollout_id: _Optional[str] = ..., attempt_id: _Optional[str] = ..., trace_id: _Optional[str] = ..., trace_id_contains: _Optional[str] = ..., span_id: _Optional[str] = ..., span_id_contains: _Optional[str] = ..., parent_id: _Optional[str] = ..., parent_id_contains: _Optional[str] = ..., name: _Optional[str] = ..., name_contains: _Optional[str] = ..., filter_logic: _Optional[_Union[_types_pb2.FilterLogic, str]] = ..., after_sequence_id: _Optional[int] = ..., page: _Optional[_Union[_types_pb2.Page, _Mapping]] = ...) -> None: ...

class QuerySpansResponse(_message.Message):
    __slots__ = ("spans", "page")
    SPANS_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    spans: _containers.RepeatedCompositeFieldContainer[_types_pb2.Span]
    page: _types_pb2.PageInfo
    def __init__(self, spans: _Optional[_Iterable[_Union[_types_pb2.Span, _Mapping]]] = ..., page: _Optional[_Union[_types_pb2.PageInfo, _Mapping]] = ...) -> None: ...

class SequenceIdRequest(_message.Message):
    __slots__ = ("rollout_id", "attempt_id")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    attempt_id: str
    def __init__(self, rollout_id: _Optional[str] = ..., attempt_id: _Optional[str] = ...) -> None: ...

class NextSpanSequenceIdsRequest(_message.Message):
    __slots__ = ("requests",)
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[SequenceIdRequest]
    def __init__(self, requests: _Optional[_Iterable[_Union[SequenceIdRequest, _Mapping]]] = ...) -> None: ...

class NextSpanSequenceIdsResponse(_message.Message):
    __slots__ = ("sequence_ids",)
    SEQUENCE_IDS_FIELD_NUMBER: _ClassVar[int]
    sequence_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, sequence_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class UpdateWorkerRequest(_message.Message):
    __slots__ = ("worker_id", "heartbeat_stats")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_STATS_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    heartbeat_stats: _struct_pb2.Struct
    def __init__(self, worker_id: _Optional[str] = ..., heartbeat_stats: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class GetWorkerRequest(_message.Message):
    __slots__ = ("worker_id",)
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ...) -> None: ...

class QueryWorkersRequest(_message.Message):
    __slots__ = ("status_in", "worker_id_contains", "filter_logic", "page")
    STATUS_IN_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_CONTAINS_FIELD_NUMBER: _ClassVar[int]
    FILTER_LOGIC_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    status_in: _containers.RepeatedScalarFieldContainer[_types_pb2.WorkerStatus]
    worker_id_contains: str
    filter_logic: _types_pb2.FilterLogic
    page: _types_pb2.Page
    def __init__(self, status_in: _Optional[_Iterable[_Union[_types_pb2.WorkerStatus, str]]] = ..., worker_id_contains: _Optional[str] = ..., filter_logic: _Optional[_Union[_types_pb2.FilterLogic, str]] = ..., page: _Optional[_Union[_types_pb2.Page, _Mapping]] = ...) -> None: ...

class QueryWorkersResponse(_message.Message):
    __slots__ = ("workers", "page")
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    workers: _containers.RepeatedCompositeFieldContainer[_types_pb2.Worker]
    page: _types_pb2.PageInfo
    def __init__(self, workers: _Optional[_Iterable[_Union[_types_pb2.Worker, _Mapping]]] = ..., page: _Optional[_Union[_types_pb2.PageInfo, _Mapping]] = ...) -> None: ...

class GetStatisticsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Statistics(_message.Message):
    __slots__ = ("backend", "total_rollouts", "total_attempts", "total_spans", "total_resources", "total_workers", "queue_length", "uptime_seconds", "rollouts_by_status")
    class RolloutsByStatusEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    TOTAL_ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SPANS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_RESOURCES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_WORKERS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_LENGTH_FIELD_NUMBER: _ClassVar[int]
    UPTIME_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ROLLOUTS_BY_STATUS_FIELD_NUMBER: _ClassVar[int]
    backend: str
    total_rollouts: int
    total_attempts: int
    total_spans: int
    total_resources: int
    total_workers: int
    queue_length: int
    uptime_seconds: float
    rollouts_by_status: _containers.ScalarMap[str, int]
    def __init__(self, backend: _Optional[str] = ..., total_rollouts: _Optional[int] = ..., total_attempts: _Optional[int] = ..., total_spans: _Optional[int] = ..., total_resources: _Optional[int] = ..., total_workers: _Optional[int] = ..., queue_length: _Optional[int] = ..., uptime_seconds: _Optional[float] = ..., rollouts_by_status: _Optional[_Mapping[str, int]] = ...) -> None: ...

class GetRolloutTimelineRequest(_message.Message):
    __slots__ = ("start_time", "end_time", "bucket_seconds", "mode_in", "resources_id_in")
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    BUCKET_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MODE_IN_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_ID_IN_FIELD_NUMBER: _ClassVar[int]
    start_time: float
    end_time: float
    bucket_seconds: float
    mode_in: _containers.RepeatedScalarFieldContainer[_types_pb2.RolloutMode]
    resources_id_in: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, start_time: _Optional[float] = ..., end_time: _Optional[float] = ..., bucket_seconds: _Optional[float] = ..., mode_in: _Optional[_Iterable[_Union[_types_pb2.RolloutMode, str]]] = ..., resources_id_in: _Optional[_Iterable[str]] = ...) -> None: ...

class RolloutTimelineCount(_message.Message):
    __slots__ = ("bucket", "mode", "status", "count")
    BUCKET_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    bucket: int
    mode: _types_pb2.RolloutMode
    status: _types_pb2.RolloutStatus
    count: int
    def __init__(self, bucket: _Optional[int] = ..., mode: _Optional[_Union[_types_pb2.RolloutMode, str]] = ..., status: _Optional[_Union[_types_pb2.RolloutStatus, str]] = ..., count: _Optional[int] = ...) -> None: ...

class GetRolloutTimelineResponse(_message.Message):
    __slots__ = ("start_time", "end_time", "bucket_seconds", "bucket_count", "created", "finished")
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    BUCKET_SECONDS_FIELD_NUMBER: _ClassVar[int]
    BUCKET_COUNT_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    start_time: float
    end_time: float
    bucket_seconds: float
    bucket_count: int
    created: _containers.RepeatedCompositeFieldContainer[RolloutTimelineCount]
    finished: _containers.RepeatedCompositeFieldContainer[RolloutTimelineCount]
    def __init__(self, start_time: _Optional[float] = ..., end_time: _Optional[float] = ..., bucket_seconds: _Optional[float] = ..., bucket_count: _Optional[int] = ..., created: _Optional[_Iterable[_Union[RolloutTimelineCount, _Mapping]]] = ..., finished: _Optional[_Iterable[_Union[RolloutTimelineCount, _Mapping]]] = ...) -> None: ...

class GetRewardsByResourcesRequest(_message.Message):
    __slots__ = ("resources_id_in", "mode_in", "status_in", "start_time_from", "start_time_to")
    RESOURCES_ID_IN_FIELD_NUMBER: _ClassVar[int]
    MODE_IN_FIELD_NUMBER: _ClassVar[int]
    STATUS_IN_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FROM_FIELD_NUMBER: _ClassVar[int]
    START_TIME_TO_FIELD_NUMBER: _ClassVar[int]
    resources_id_in: _containers.RepeatedScalarFieldContainer[str]
    mode_in: _containers.RepeatedScalarFieldContainer[_types_pb2.RolloutMode]
    status_in: _containers.RepeatedScalarFieldContainer[_types_pb2.RolloutStatus]
    start_time_from: float
    start_time_to: float
    def __init__(self, resources_id_in: _Optional[_Iterable[str]] = ..., mode_in: _Optional[_Iterable[_Union[_types_pb2.RolloutMode, str]]] = ..., status_in: _Optional[_Iterable[_Union[_types_pb2.RolloutStatus, str]]] = ..., start_time_from: _Optional[float] = ..., start_time_to: _Optional[float] = ...) -> None: ...

class RewardStats(_message.Message):
    __slots__ = ("resources_id", "resources_version", "mode", "rollouts", "rewarded", "mean", "std", "min", "max", "llm_calls", "prompt_tokens", "response_tokens", "first_start_time", "last_start_time")
    RESOURCES_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_VERSION_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    REWARDED_FIELD_NUMBER: _ClassVar[int]
    MEAN_FIELD_NUMBER: _ClassVar[int]
    STD_FIELD_NUMBER: _ClassVar[int]
    MIN_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    LLM_CALLS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    FIRST_START_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_START_TIME_FIELD_NUMBER: _ClassVar[int]
    resources_id: str
    resources_version: int
    mode: _types_pb2.RolloutMode
    rollouts: int
    rewarded: int
    mean: float
    std: float
    min: float
    max: float
    llm_calls: int
    prompt_tokens: int
    response_tokens: int
    first_start_time: float
    last_start_time: float
    def __init__(self, resources_id: _Optional[str] = ..., resources_version: _Optional[int] = ..., mode: _Optional[_Union[_types_pb2.RolloutMode, str]] = ..., rollouts: _Optional[int] = ..., rewarded: _Optional[int] = ..., mean: _Optional[float] = ..., std: _Optional[float] = ..., min: _Optional[float] = ..., max: _Optional[float] = ..., llm_calls: _Optional[int] = ..., prompt_tokens: _Optional[int] = ..., response_tokens: _Optional[int] = ..., first_start_time: _Optional[float] = ..., last_start_time: _Optional[float] = ...) -> None: ...

class GetRewardsByResourcesResponse(_message.Message):
    __slots__ = ("stats",)
    STATS_FIELD_NUMBER: _ClassVar[int]
    stats: _containers.RepeatedCompositeFieldContainer[RewardStats]
    def __init__(self, stats: _Optional[_Iterable[_Union[RewardStats, _Mapping]]] = ...) -> None: ...
