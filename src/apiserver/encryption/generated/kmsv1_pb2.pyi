from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class VersionRequest(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: str
    def __init__(self, version: _Optional[str] = ...) -> None: ...

class VersionResponse(_message.Message):
    __slots__ = ("version", "runtime_name", "runtime_version")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_NAME_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_VERSION_FIELD_NUMBER: _ClassVar[int]
    version: str
    runtime_name: str
    runtime_version: str
    def __init__(self, version: _Optional[str] = ..., runtime_name: _Optional[str] = ..., runtime_version: _Optional[str] = ...) -> None: ...

class DecryptRequest(_message.Message):
    __slots__ = ("version", "cipher")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CIPHER_FIELD_NUMBER: _ClassVar[int]
    version: str
    cipher: bytes
    def __init__(self, version: _Optional[str] = ..., cipher: _Optional[bytes] = ...) -> None: ...

class DecryptResponse(_message.Message):
    __slots__ = ("plain",)
    PLAIN_FIELD_NUMBER: _ClassVar[int]
    plain: bytes
    def __init__(self, plain: _Optional[bytes] = ...) -> None: ...

class EncryptRequest(_message.Message):
    __slots__ = ("version", "plain")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PLAIN_FIELD_NUMBER: _ClassVar[int]
    version: str
    plain: bytes
    def __init__(self, version: _Optional[str] = ..., plain: _Optional[bytes] = ...) -> None: ...

class EncryptResponse(_message.Message):
    __slots__ = ("cipher",)
    CIPHER_FIELD_NUMBER: _ClassVar[int]
    cipher: bytes
    def __init__(self, cipher: _Optional[bytes] = ...) -> None: ...
