from agl_bridge.gen.agl.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AddResourcesRequest(_message.Message):
    __slots__ = ("resources",)
    class ResourcesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _types_pb2.Resource
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_types_pb2.Resource, _Mapping]] = ...) -> None: ...
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.MessageMap[str, _types_pb2.Resource]
    def __init__(self, resources: _Optional[_Mapping[str, _types_pb2.Resource]] = ...) -> None: ...

class UpdateResourcesRequest(_message.Message):
    __slots__ = ("resources_id", "resources", "create_if_missing")
    class ResourcesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _types_pb2.Resource
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_types_pb2.Resource, _Mapping]] = ...) -> None: ...
    RESOURCES_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    CREATE_IF_MISSING_FIELD_NUMBER: _ClassVar[int]
    resources_id: str
    resources: _containers.MessageMap[str, _types_pb2.Resource]
    create_if_missing: bool
    def __init__(self, resources_id: _Optional[str] = ..., resources: _Optional[_Mapping[str, _types_pb2.Resource]] = ..., create_if_missing: _Optional[bool] = ...) -> None: ...

class GetResourcesRequest(_message.Message):
    __slots__ = ("resources_id", "version")
    RESOURCES_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    resources_id: str
    version: int
    def __init__(self, resources_id: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class GetLatestResourcesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetLatestResourcesResponse(_message.Message):
    __slots__ = ("resources",)
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    resources: _types_pb2.ResourcesUpdate
    def __init__(self, resources: _Optional[_Union[_types_pb2.ResourcesUpdate, _Mapping]] = ...) -> None: ...

class QueryResourcesRequest(_message.Message):
    __slots__ = ("resources_id", "resources_id_contains", "page")
    RESOURCES_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_ID_CONTAINS_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    resources_id: str
    resources_id_contains: str
    page: _types_pb2.Page
    def __init__(self, resources_id: _Optional[str] = ..., resources_id_contains: _Optional[str] = ..., page: _Optional[_Union[_types_pb2.Page, _Mapping]] = ...) -> None: ...

class QueryResourcesResponse(_message.Message):
    __slots__ = ("resources", "page")
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[_types_pb2.ResourcesUpdate]
    page: _types_pb2.PageInfo
    def __init__(self, resources: _Optional[_Iterable[_Union[_types_pb2.ResourcesUpdate, _Mapping]]] = ..., page: _Optional[_Union[_types_pb2.PageInfo, _Mapping]] = ...) -> None: ...

class QueryResourceVersionsRequest(_message.Message):
    __slots__ = ("resources_id", "page")
    RESOURCES_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    resources_id: str
    page: _types_pb2.Page
    def __init__(self, resources_id: _Optional[str] = ..., page: _Optional[_Union[_types_pb2.Page, _Mapping]] = ...) -> None: ...

class QueryResourceVersionsResponse(_message.Message):
    __slots__ = ("resources", "page")
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[_types_pb2.ResourcesUpdate]
    page: _types_pb2.PageInfo
    def __init__(self, resources: _Optional[_Iterable[_Union[_types_pb2.ResourcesUpdate, _Mapping]]] = ..., page: _Optional[_Union[_types_pb2.PageInfo, _Mapping]] = ...) -> None: ...

class WatchResourcesRequest(_message.Message):
    __slots__ = ("include_latest",)
    INCLUDE_LATEST_FIELD_NUMBER: _ClassVar[int]
    include_latest: bool
    def __init__(self, include_latest: _Optional[bool] = ...) -> None: ...
