from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class CallRequest(_message.Message):
    __slots__ = ("id", "method", "request", "timeout_ms", "cancel")
    ID_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    id: int
    method: str
    request: bytes
    timeout_ms: int
    cancel: bool
    def __init__(self, id: _Optional[int] = ..., method: _Optional[str] = ..., request: _Optional[bytes] = ..., timeout_ms: _Optional[int] = ..., cancel: _Optional[bool] = ...) -> None: ...

class CallResponse(_message.Message):
    __slots__ = ("id", "response", "error_code", "error_message")
    ID_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    id: int
    response: bytes
    error_code: int
    error_message: str
    def __init__(self, id: _Optional[int] = ..., response: _Optional[bytes] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...
