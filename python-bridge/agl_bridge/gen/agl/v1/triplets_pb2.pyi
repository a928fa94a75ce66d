from google.protobuf import struct_pb2 as _struct_pb2
from agl_bridge.gen.agl.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TripletMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TRIPLET_MODE_UNSPECIFIED: _ClassVar[TripletMode]
    TRIPLET_MODE_TRANSITION: _ClassVar[TripletMode]
    TRIPLET_MODE_TRAJECTORY: _ClassVar[TripletMode]

class RewardMatch(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REWARD_MATCH_UNSPECIFIED: _ClassVar[RewardMatch]
    REWARD_MATCH_FIRST_OCCURRENCE: _ClassVar[RewardMatch]
    REWARD_MATCH_FIRST_SIBLING: _ClassVar[RewardMatch]
    REWARD_MATCH_FINAL: _ClassVar[RewardMatch]
TRIPLET_MODE_UNSPECIFIED: TripletMode
TRIPLET_MODE_TRANSITION: TripletMode
TRIPLET_MODE_TRAJECTORY: TripletMode
REWARD_MATCH_UNSPECIFIED: RewardMatch
REWARD_MATCH_FIRST_OCCURRENCE: RewardMatch
REWARD_MATCH_FIRST_SIBLING: RewardMatch
REWARD_MATCH_FINAL: RewardMatch

class TripletOptions(_message.Message):
    __slots__ = ("mode", "reward_match", "agent_name_contains", "include_calls_in_reward", "skip_hierarchy_repair")
    MODE_FIELD_NUMBER: _ClassVar[int]
    REWARD_MATCH_FIELD_NUMBER: _ClassVar[int]
    AGENT_NAME_CONTAINS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_CALLS_IN_REWARD_FIELD_NUMBER: _ClassVar[int]
    SKIP_HIERARCHY_REPAIR_FIELD_NUMBER: _ClassVar[int]
    mode: TripletMode
    reward_match: RewardMatch
    agent_name_contains: str
    include_calls_in_reward: bool
    skip_hierarchy_repair: bool
    def __init__(self, mode: _Optional[_Union[TripletMode, str]] = ..., reward_match: _Optional[_Union[RewardMatch, str]] = ..., agent_name_contains: _Optional[str] = ..., include_calls_in_reward: _Optional[bool] = ..., skip_hierarchy_repair: _Optional[bool] = ...) -> None: ...

class Triplet(_message.Message):
    __slots__ = ("rollout_id", "attempt_id", "group_id", "turn_index", "turn_count", "prompt_token_ids", "response_token_ids", "response_mask", "logprobs", "reward", "final_reward", "resources_id", "resources_version", "model", "span_ids", "response_id")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    TURN_INDEX_FIELD_NUMBER: _ClassVar[int]
    TURN_COUNT_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_MASK_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    FINAL_REWARD_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_VERSION_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SPAN_IDS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_ID_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    attempt_id: str
    group_id: str
    turn_index: int
    turn_count: int
    prompt_token_ids: _containers.RepeatedScalarFieldContainer[int]
    response_token_ids: _containers.RepeatedScalarFieldContainer[int]
    response_mask: _containers.RepeatedScalarFieldContainer[int]
    logprobs: _containers.RepeatedScalarFieldContainer[float]
    reward: float
    final_reward: float
    resources_id: str
    resources_version: int
    model: str
    span_ids: _containers.RepeatedScalarFieldContainer[str]
    response_id: str
    def __init__(self, rollout_id: _Optional[str] = ..., attempt_id: _Optional[str] = ..., group_id: _Optional[str] = ..., turn_index: _Optional[int] = ..., turn_count: _Optional[int] = ..., prompt_token_ids: _Optional[_Iterable[int]] = ..., response_token_ids: _Optional[_Iterable[int]] = ..., response_mask: _Optional[_Iterable[int]] = ..., logprobs: _Optional[_Iterable[float]] = ..., reward: _Optional[float] = ..., final_reward: _Optional[float] = ..., resources_id: _Optional[str] = ..., resources_version: _Optional[int] = ..., model: _Optional[str] = ..., span_ids: _Optional[_Iterable[str]] = ..., response_id: _Optional[str] = ...) -> None: ...

class TripletStats(_message.Message):
    __slots__ = ("spans", "llm_calls", "duplicate_calls", "calls_without_token_ids", "failed_calls", "mismatches", "unmatched_rewards", "logprob_mismatches")
    class MismatchesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    SPANS_FIELD_NUMBER: _ClassVar[int]
    LLM_CALLS_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_CALLS_FIELD_NUMBER: _ClassVar[int]
    CALLS_WITHOUT_TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    FAILED_CALLS_FIELD_NUMBER: _ClassVar[int]
    MISMATCHES_FIELD_NUMBER: _ClassVar[int]
    UNMATCHED_REWARDS_FIELD_NUMBER: _ClassVar[int]
    LOGPROB_MISMATCHES_FIELD_NUMBER: _ClassVar[int]
    spans: int
    llm_calls: int
    duplicate_calls: int
    calls_without_token_ids: int
    failed_calls: int
    mismatches: _containers.ScalarMap[str, int]
    unmatched_rewards: int
    logprob_mismatches: int
    def __init__(self, spans: _Optional[int] = ..., llm_calls: _Optional[int] = ..., duplicate_calls: _Optional[int] = ..., calls_without_token_ids: _Optional[int] = ..., failed_calls: _Optional[int] = ..., mismatches: _Optional[_Mapping[str, int]] = ..., unmatched_rewards: _Optional[int] = ..., logprob_mismatches: _Optional[int] = ...) -> None: ...

class RolloutTriplets(_message.Message):
    __slots__ = ("rollout_id", "attempt_id", "group_id", "status", "mode", "resources_id", "final_reward", "triplets", "stats")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_ID_FIELD_NUMBER: _ClassVar[int]
    FINAL_REWARD_FIELD_NUMBER: _ClassVar[int]
    TRIPLETS_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    attempt_id: str
    group_id: str
    status: _types_pb2.RolloutStatus
    mode: _types_pb2.RolloutMode
    resources_id: str
    final_reward: float
    triplets: _containers.RepeatedCompositeFieldContainer[Triplet]
    stats: TripletStats
    def __init__(self, rollout_id: _Optional[str] = ..., attempt_id: _Optional[str] = ..., group_id: _Optional[str] = ..., status: _Optional[_Union[_types_pb2.RolloutStatus, str]] = ..., mode: _Optional[_Union[_types_pb2.RolloutMode, str]] = ..., resources_id: _Optional[str] = ..., final_reward: _Optional[float] = ..., triplets: _Optional[_Iterable[_Union[Triplet, _Mapping]]] = ..., stats: _Optional[_Union[TripletStats, _Mapping]] = ...) -> None: ...

class StreamTripletsRequest(_message.Message):
    __slots__ = ("rollout_ids", "group_id", "rollout_mode", "resources_id", "resources_version", "status_in", "options", "cursor", "follow")
    ROLLOUT_IDS_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_MODE_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_VERSION_FIELD_NUMBER: _ClassVar[int]
    STATUS_IN_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    rollout_ids: _containers.RepeatedScalarFieldContainer[str]
    group_id: str
    rollout_mode: _types_pb2.RolloutMode
    resources_id: str
    resources_version: int
    status_in: _containers.RepeatedScalarFieldContainer[_types_pb2.RolloutStatus]
    options: TripletOptions
    cursor: str
    follow: bool
    def __init__(self, rollout_ids: _Optional[_Iterable[str]] = ..., group_id: _Optional[str] = ..., rollout_mode: _Optional[_Union[_types_pb2.RolloutMode, str]] = ..., resources_id: _Optional[str] = ..., resources_version: _Optional[int] = ..., status_in: _Optional[_Iterable[_Union[_types_pb2.RolloutStatus, str]]] = ..., options: _Optional[_Union[TripletOptions, _Mapping]] = ..., cursor: _Optional[str] = ..., follow: _Optional[bool] = ...) -> None: ...

class StreamTripletsResponse(_message.Message):
    __slots__ = ("rollout", "cursor", "caught_up")
    ROLLOUT_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    CAUGHT_UP_FIELD_NUMBER: _ClassVar[int]
    rollout: RolloutTriplets
    cursor: str
    caught_up: bool
    def __init__(self, rollout: _Optional[_Union[RolloutTriplets, _Mapping]] = ..., cursor: _Optional[str] = ..., caught_up: _Optional[bool] = ...) -> None: ...

class GetRolloutTripletsRequest(_message.Message):
    __slots__ = ("rollout_id", "attempt_id", "options")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    attempt_id: str
    options: TripletOptions
    def __init__(self, rollout_id: _Optional[str] = ..., attempt_id: _Optional[str] = ..., options: _Optional[_Union[TripletOptions, _Mapping]] = ...) -> None: ...

class GetRolloutMessagesRequest(_message.Message):
    __slots__ = ("rollout_ids",)
    ROLLOUT_IDS_FIELD_NUMBER: _ClassVar[int]
    rollout_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, rollout_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class LlmConversation(_message.Message):
    __slots__ = ("messages", "tools", "model", "span_id", "reward")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    tools: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    model: str
    span_id: str
    reward: float
    def __init__(self, messages: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., tools: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., model: _Optional[str] = ..., span_id: _Optional[str] = ..., reward: _Optional[float] = ...) -> None: ...

class RolloutMessages(_message.Message):
    __slots__ = ("rollout_id", "attempt_id", "status", "input", "final_reward", "feedback", "conversations")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    FINAL_REWARD_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    CONVERSATIONS_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    attempt_id: str
    status: _types_pb2.RolloutStatus
    input: _struct_pb2.Value
    final_reward: float
    feedback: _containers.RepeatedScalarFieldContainer[str]
    conversations: _containers.RepeatedCompositeFieldContainer[LlmConversation]
    def __init__(self, rollout_id: _Optional[str] = ..., attempt_id: _Optional[str] = ..., status: _Optional[_Union[_types_pb2.RolloutStatus, str]] = ..., input: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., final_reward: _Optional[float] = ..., feedback: _Optional[_Iterable[str]] = ..., conversations: _Optional[_Iterable[_Union[LlmConversation, _Mapping]]] = ...) -> None: ...

class GetRolloutMessagesResponse(_message.Message):
    __slots__ = ("rollouts",)
    ROLLOUTS_FIELD_NUMBER: _ClassVar[int]
    rollouts: _containers.RepeatedCompositeFieldContainer[RolloutMessages]
    def __init__(self, rollouts: _Optional[_Iterable[_Union[RolloutMessages, _Mapping]]] = ...) -> None: ...
