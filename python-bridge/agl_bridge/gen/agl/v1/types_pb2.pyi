from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RolloutStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLLOUT_STATUS_UNSPECIFIED: _ClassVar[RolloutStatus]
    ROLLOUT_STATUS_QUEUING: _ClassVar[RolloutStatus]
    ROLLOUT_STATUS_PREPARING: _ClassVar[RolloutStatus]
    ROLLOUT_STATUS_RUNNING: _ClassVar[RolloutStatus]
    ROLLOUT_STATUS_FAILED: _ClassVar[RolloutStatus]
    ROLLOUT_STATUS_SUCCEEDED: _ClassVar[RolloutStatus]
    ROLLOUT_STATUS_CANCELLED: _ClassVar[RolloutStatus]
    ROLLOUT_STATUS_REQUEUING: _ClassVar[RolloutStatus]

class AttemptStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ATTEMPT_STATUS_UNSPECIFIED: _ClassVar[AttemptStatus]
    ATTEMPT_STATUS_PREPARING: _ClassVar[AttemptStatus]
    ATTEMPT_STATUS_RUNNING: _ClassVar[AttemptStatus]
    ATTEMPT_STATUS_FAILED: _ClassVar[AttemptStatus]
    ATTEMPT_STATUS_SUCCEEDED: _ClassVar[AttemptStatus]
    ATTEMPT_STATUS_UNRESPONSIVE: _ClassVar[AttemptStatus]
    ATTEMPT_STATUS_TIMEOUT: _ClassVar[AttemptStatus]
    ATTEMPT_STATUS_CANCELLED: _ClassVar[AttemptStatus]

class WorkerStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WORKER_STATUS_UNSPECIFIED: _ClassVar[WorkerStatus]
    WORKER_STATUS_IDLE: _ClassVar[WorkerStatus]
    WORKER_STATUS_BUSY: _ClassVar[WorkerStatus]
    WORKER_STATUS_UNKNOWN: _ClassVar[WorkerStatus]

class RolloutMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLLOUT_MODE_UNSPECIFIED: _ClassVar[RolloutMode]
    ROLLOUT_MODE_TRAIN: _ClassVar[RolloutMode]
    ROLLOUT_MODE_VAL: _ClassVar[RolloutMode]
    ROLLOUT_MODE_TEST: _ClassVar[RolloutMode]

class StatusCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STATUS_CODE_UNSET: _ClassVar[StatusCode]
    STATUS_CODE_OK: _ClassVar[StatusCode]
    STATUS_CODE_ERROR: _ClassVar[StatusCode]

class TemplateEngine(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TEMPLATE_ENGINE_UNSPECIFIED: _ClassVar[TemplateEngine]
    TEMPLATE_ENGINE_F_STRING: _ClassVar[TemplateEngine]
    TEMPLATE_ENGINE_JINJA: _ClassVar[TemplateEngine]

class FilterLogic(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FILTER_LOGIC_AND: _ClassVar[FilterLogic]
    FILTER_LOGIC_OR: _ClassVar[FilterLogic]

class SortOrder(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SORT_ORDER_ASC: _ClassVar[SortOrder]
    SORT_ORDER_DESC: _ClassVar[SortOrder]
ROLLOUT_STATUS_UNSPECIFIED: RolloutStatus
ROLLOUT_STATUS_QUEUING: RolloutStatus
ROLLOUT_STATUS_PREPARING: RolloutStatus
ROLLOUT_STATUS_RUNNING: RolloutStatus
ROLLOUT_STATUS_FAILED: RolloutStatus
ROLLOUT_STATUS_SUCCEEDED: RolloutStatus
ROLLOUT_STATUS_CANCELLED: RolloutStatus
ROLLOUT_STATUS_REQUEUING: RolloutStatus
ATTEMPT_STATUS_UNSPECIFIED: AttemptStatus
ATTEMPT_STATUS_PREPARING: AttemptStatus
ATTEMPT_STATUS_RUNNING: AttemptStatus
ATTEMPT_STATUS_FAILED: AttemptStatus
ATTEMPT_STATUS_SUCCEEDED: AttemptStatus
ATTEMPT_STATUS_UNRESPONSIVE: AttemptStatus
ATTEMPT_STATUS_TIMEOUT: AttemptStatus
ATTEMPT_STATUS_CANCELLED: AttemptStatus
WORKER_STATUS_UNSPECIFIED: WorkerStatus
WORKER_STATUS_IDLE: WorkerStatus
WORKER_STATUS_BUSY: WorkerStatus
WORKER_STATUS_UNKNOWN: WorkerStatus
ROLLOUT_MODE_UNSPECIFIED: RolloutMode
ROLLOUT_MODE_TRAIN: RolloutMode
ROLLOUT_MODE_VAL: RolloutMode
ROLLOUT_MODE_TEST: RolloutMode
STATUS_CODE_UNSET: StatusCode
STATUS_CODE_OK: StatusCode
STATUS_CODE_ERROR: StatusCode
TEMPLATE_ENGINE_UNSPECIFIED: TemplateEngine
TEMPLATE_ENGINE_F_STRING: TemplateEngine
TEMPLATE_ENGINE_JINJA: TemplateEngine
FILTER_LOGIC_AND: FilterLogic
FILTER_LOGIC_OR: FilterLogic
SORT_ORDER_ASC: SortOrder
SORT_ORDER_DESC: SortOrder

class RolloutConfig(_message.Message):
    __slots__ = ("timeout_seconds", "unresponsive_seconds", "max_attempts", "retry_condition")
    TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    UNRESPONSIVE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    RETRY_CONDITION_FIELD_NUMBER: _ClassVar[int]
    timeout_seconds: float
    unresponsive_seconds: float
    max_attempts: int
    retry_condition: _containers.RepeatedScalarFieldContainer[AttemptStatus]
    def __init__(self, timeout_seconds: _Optional[float] = ..., unresponsive_seconds: _Optional[float] = ..., max_attempts: _Optional[int] = ..., retry_condition: _Optional[_Iterable[_Union[AttemptStatus, str]]] = ...) -> None: ...

class Attempt(_message.Message):
    __slots__ = ("rollout_id", "attempt_id", "sequence_id", "start_time", "end_time", "status", "worker_id", "last_heartbeat_time", "metadata")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_TIME_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    attempt_id: str
    sequence_id: int
    start_time: float
    end_time: float
    status: AttemptStatus
    worker_id: str
    last_heartbeat_time: float
    metadata: _struct_pb2.Struct
    def __init__(self, rollout_id: _Optional[str] = ..., attempt_id: _Optional[str] = ..., sequence_id: _Optional[int] = ..., start_time: _Optional[float] = ..., end_time: _Optional[float] = ..., status: _Optional[_Union[AttemptStatus, str]] = ..., worker_id: _Optional[str] = ..., last_heartbeat_time: _Optional[float] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class Rollout(_message.Message):
    __slots__ = ("rollout_id", "input", "start_time", "end_time", "mode", "resources_id", "status", "config", "metadata", "group_id", "latest_attempt", "resources_version")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    LATEST_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_VERSION_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    input: _struct_pb2.Value
    start_time: float
    end_time: float
    mode: RolloutMode
    resources_id: str
    status: RolloutStatus
    config: RolloutConfig
    metadata: _struct_pb2.Struct
    group_id: str
    latest_attempt: Attempt
    resources_version: int
    def __init__(self, rollout_id: _Optional[str] = ..., input: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., start_time: _Optional[float] = ..., end_time: _Optional[float] = ..., mode: _Optional[_Union[RolloutMode, str]] = ..., resources_id: _Optional[str] = ..., status: _Optional[_Union[RolloutStatus, str]] = ..., config: _Optional[_Union[RolloutConfig, _Mapping]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., group_id: _Optional[str] = ..., latest_attempt: _Optional[_Union[Attempt, _Mapping]] = ..., resources_version: _Optional[int] = ...) -> None: ...

class RolloutSpec(_message.Message):
    __slots__ = ("input", "mode", "resources_id", "config", "metadata", "group_id")
    INPUT_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_ID_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    input: _struct_pb2.Value
    mode: RolloutMode
    resources_id: str
    config: RolloutConfig
    metadata: _struct_pb2.Struct
    group_id: str
    def __init__(self, input: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., mode: _Optional[_Union[RolloutMode, str]] = ..., resources_id: _Optional[str] = ..., config: _Optional[_Union[RolloutConfig, _Mapping]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., group_id: _Optional[str] = ...) -> None: ...

class Worker(_message.Message):
    __slots__ = ("worker_id", "status", "heartbeat_stats", "last_heartbeat_time", "last_dequeue_time", "last_busy_time", "last_idle_time", "current_rollout_id", "current_attempt_id")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_STATS_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_DEQUEUE_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_BUSY_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_IDLE_TIME_FIELD_NUMBER: _ClassVar[int]
    CURRENT_ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    CURRENT_ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    status: WorkerStatus
    heartbeat_stats: _struct_pb2.Struct
    last_heartbeat_time: float
    last_dequeue_time: float
    last_busy_time: float
    last_idle_time: float
    current_rollout_id: str
    current_attempt_id: str
    def __init__(self, worker_id: _Optional[str] = ..., status: _Optional[_Union[WorkerStatus, str]] = ..., heartbeat_stats: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., last_heartbeat_time: _Optional[float] = ..., last_dequeue_time: _Optional[float] = ..., last_busy_time: _Optional[float] = ..., last_idle_time: _Optional[float] = ..., current_rollout_id: _Optional[str] = ..., current_attempt_id: _Optional[str] = ...) -> None: ...

class StringArray(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, values: _Optional[_Iterable[str]] = ...) -> None: ...

class BoolArray(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[bool]
    def __init__(self, values: _Optional[_Iterable[bool]] = ...) -> None: ...

class IntArray(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, values: _Optional[_Iterable[int]] = ...) -> None: ...

class DoubleArray(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, values: _Optional[_Iterable[float]] = ...) -> None: ...

class AttributeValue(_message.Message):
    __slots__ = ("string_value", "bool_value", "int_value", "double_value", "string_array", "bool_array", "int_array", "double_array")
    STRING_VALUE_FIELD_NUMBER: _ClassVar[int]
    BOOL_VALUE_FIELD_NUMBER: _ClassVar[int]
    INT_VALUE_FIELD_NUMBER: _ClassVar[int]
    DOUBLE_VALUE_FIELD_NUMBER: _ClassVar[int]
    STRING_ARRAY_FIELD_NUMBER: _ClassVar[int]
    BOOL_ARRAY_FIELD_NUMBER: _ClassVar[int]
    INT_ARRAY_FIELD_NUMBER: _ClassVar[int]
    DOUBLE_ARRAY_FIELD_NUMBER: _ClassVar[int]
    string_value: str
    bool_value: bool
    int_value: int
    double_value: float
    string_array: StringArray
    bool_array: BoolArray
    int_array: IntArray
    double_array: DoubleArray
    def __init__(self, string_value: _Optional[str] = ..., bool_value: _Optional[bool] = ..., int_value: _Optional[int] = ..., double_value: _Optional[float] = ..., string_array: _Optional[_Union[StringArray, _Mapping]] = ..., bool_array: _Optional[_Union[BoolArray, _Mapping]] = ..., int_array: _Optional[_Union[IntArray, _Mapping]] = ..., double_array: _Optional[_Union[DoubleArray, _Mapping]] = ...) -> None: ...

class SpanStatus(_message.Message):
    __slots__ = ("code", "description")
    CODE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    code: StatusCode
    description: str
    def __init__(self, code: _Optional[_Union[StatusCode, str]] = ..., description: _Optional[str] = ...) -> None: ...

class SpanContext(_message.Message):
    __slots__ = ("trace_id", "span_id", "is_remote", "trace_state")
    class TraceStateEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    IS_REMOTE_FIELD_NUMBER: _ClassVar[int]
    TRACE_STATE_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    span_id: str
    is_remote: bool
    trace_state: _containers.ScalarMap[str, str]
    def __init__(self, trace_id: _Optional[str] = ..., span_id: _Optional[str] = ..., is_remote: _Optional[bool] = ..., trace_state: _Optional[_Mapping[str, str]] = ...) -> None: ...

class SpanEvent(_message.Message):
    __slots__ = ("name", "attributes", "timestamp")
    class AttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: AttributeValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[AttributeValue, _Mapping]] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    name: str
    attributes: _containers.MessageMap[str, AttributeValue]
    timestamp: float
    def __init__(self, name: _Optional[str] = ..., attributes: _Optional[_Mapping[str, AttributeValue]] = ..., timestamp: _Optional[float] = ...) -> None: ...

class SpanLink(_message.Message):
    __slots__ = ("context", "attributes")
    class AttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: AttributeValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[AttributeValue, _Mapping]] = ...) -> None: ...
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    context: SpanContext
    attributes: _containers.MessageMap[str, AttributeValue]
    def __init__(self, context: _Optional[_Union[SpanContext, _Mapping]] = ..., attributes: _Optional[_Mapping[str, AttributeValue]] = ...) -> None: ...

class OtelResource(_message.Message):
    __slots__ = ("attributes", "schema_url")
    class AttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: AttributeValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[AttributeValue, _Mapping]] = ...) -> None: ...
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_URL_FIELD_NUMBER: _ClassVar[int]
    attributes: _containers.MessageMap[str, AttributeValue]
    schema_url: str
    def __init__(self, attributes: _Optional[_Mapping[str, AttributeValue]] = ..., schema_url: _Optional[str] = ...) -> None: ...

class Span(_message.Message):
    __slots__ = ("rollout_id", "attempt_id", "sequence_id", "trace_id", "span_id", "parent_id", "name", "status", "attributes", "events", "links", "start_time", "end_time", "context", "parent", "resource")
    class AttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: AttributeValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[AttributeValue, _Mapping]] = ...) -> None: ...
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    LINKS_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    attempt_id: str
    sequence_id: int
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    status: SpanStatus
    attributes: _containers.MessageMap[str, AttributeValue]
    events: _containers.RepeatedCompositeFieldContainer[SpanEvent]
    links: _containers.RepeatedCompositeFieldContainer[SpanLink]
    start_time: float
    end_time: float
    context: SpanContext
    parent: SpanContext
    resource: OtelResource
    def __init__(self, rollout_id: _Optional[str] = ..., attempt_id: _Optional[str] = ..., sequence_id: _Optional[int] = ..., trace_id: _Optional[str] = ..., span_id: _Optional[str] = ..., parent_id: _Optional[str] = ..., name: _Optional[str] = ..., status: _Optional[_Union[SpanStatus, _Mapping]] = ..., attributes: _Optional[_Mapping[str, AttributeValue]] = ..., events: _Optional[_Iterable[_Union[SpanEvent, _Mapping]]] = ..., links: _Optional[_Iterable[_Union[SpanLink, _Mapping]]] = ..., start_time: _Optional[float] = ..., end_time: _Optional[float] = ..., context: _Optional[_Union[SpanContext, _Mapping]] = ..., parent: _Optional[_Union[SpanContext, _Mapping]] = ..., resource: _Optional[_Union[OtelResource, _Mapping]] = ...) -> None: ...

class LLM(_message.Message):
    __slots__ = ("endpoint", "model", "api_key", "sampling_parameters")
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    API_KEY_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    endpoint: str
    model: str
    api_key: str
    sampling_parameters: _struct_pb2.Struct
    def __init__(self, endpoint: _Optional[str] = ..., model: _Optional[str] = ..., api_key: _Optional[str] = ..., sampling_parameters: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class PromptTemplate(_message.Message):
    __slots__ = ("template", "engine")
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    template: str
    engine: TemplateEngine
    def __init__(self, template: _Optional[str] = ..., engine: _Optional[_Union[TemplateEngine, str]] = ...) -> None: ...

class Resource(_message.Message):
    __slots__ = ("llm", "proxy_llm", "prompt_template", "json")
    LLM_FIELD_NUMBER: _ClassVar[int]
    PROXY_LLM_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    llm: LLM
    proxy_llm: LLM
    prompt_template: PromptTemplate
    json: _struct_pb2.Value
    def __init__(self, llm: _Optional[_Union[LLM, _Mapping]] = ..., proxy_llm: _Optional[_Union[LLM, _Mapping]] = ..., prompt_template: _Optional[_Union[PromptTemplate, _Mapping]] = ..., json: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class ResourcesUpdate(_message.Message):
    __slots__ = ("resources_id", "create_time", "update_time", "version", "resources")
    class ResourcesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Resource
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Resource, _Mapping]] = ...) -> None: ...
    RESOURCES_ID_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    resources_id: str
    create_time: float
    update_time: float
    version: int
    resources: _containers.MessageMap[str, Resource]
    def __init__(self, resources_id: _Optional[str] = ..., create_time: _Optional[float] = ..., update_time: _Optional[float] = ..., version: _Optional[int] = ..., resources: _Optional[_Mapping[str, Resource]] = ...) -> None: ...

class Page(_message.Message):
    __slots__ = ("sort_by", "sort_order", "limit", "offset")
    SORT_BY_FIELD_NUMBER: _ClassVar[int]
    SORT_ORDER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    sort_by: str
    sort_order: SortOrder
    limit: int
    offset: int
    def __init__(self, sort_by: _Optional[str] = ..., sort_order: _Optional[_Union[SortOrder, str]] = ..., limit: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class PageInfo(_message.Message):
    __slots__ = ("total", "limit", "offset")
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    total: int
    limit: int
    offset: int
    def __init__(self, total: _Optional[int] = ..., limit: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...
