"""XLA's compiler options as the installed jaxlib has them: each option's name, type and the
value it takes when nothing sets it, read from jaxlib itself, so that a page can state a GPU
flag's default without a GPU.

Every ``--xla_...`` flag in ``XLA_FLAGS`` and every key of ``compiler_options=`` names a field of
XLA's ``DebugOptions`` message. jaxlib's shared library embeds the message's protobuf descriptor
(each field's name, number and type), and ``CompileOptions`` serializes the options that XLA
builds from its compiled-in defaults and ``XLA_FLAGS``. Decoding the one with the other gives
the values, for every backend's options at once: a CPU-only jaxlib carries the GPU ones too.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Protobuf's wire format: a field's key is (number << 3) | wire type.
_VARINT, _FIXED64, _LENGTH_DELIMITED, _FIXED32 = 0, 1, 2, 5

# google/protobuf/descriptor.proto's field numbers, which protobuf never changes.
_FILE_MESSAGE, _FILE_ENUM = 4, 5
_MESSAGE_NAME, _MESSAGE_FIELD, _MESSAGE_ENUM = 1, 2, 4
_FIELD_NAME, _FIELD_NUMBER, _FIELD_LABEL, _FIELD_TYPE, _FIELD_TYPE_NAME, _FIELD_OPTIONS = (
    1,
    3,
    4,
    5,
    6,
    8,
)
_FIELD_OPTIONS_DEPRECATED = 3
_ENUM_NAME, _ENUM_VALUE = 1, 2
_ENUM_VALUE_NAME, _ENUM_VALUE_NUMBER = 1, 2
_LABEL_REPEATED = 3
_TYPES = {
    1: "double",
    2: "float",
    3: "int64",
    4: "uint64",
    5: "int32",
    8: "bool",
    9: "string",
    11: "message",
    13: "uint32",
    14: "enum",
    17: "sint32",
    18: "sint64",
}

# Where the options sit in a serialized xla::CompileOptionsProto
# (xla/pjrt/proto/compile_options.proto): executable_build_options = 3, and in it
# debug_options = 3.
_COMPILE_OPTIONS_PATH = (3, 3)

_DESCRIPTOR_START = b"\n\rxla/xla.proto\x12\x03xla"


class XlaOptionsUnreadable(RuntimeError):
    """The installed jaxlib does not hold XLA's options where this module looks for them."""


@dataclass(frozen=True)
class Option:
    """One field of XLA's ``DebugOptions``: a flag ``--<name>=`` and a ``compiler_options`` key."""

    name: str
    number: int
    type: str
    repeated: bool
    deprecated: bool
    # An enum's value names by number; empty for other types.
    enum: dict[int, str]

    def zero(self) -> Any:
        """The value the option has when nothing sets it (proto3's zero of its type)."""
        if self.repeated:
            return []
        if self.type == "enum":
            return self.enum.get(0, 0)
        return {"bool": False, "string": "", "float": 0.0, "double": 0.0, "message": None}.get(
            self.type, 0
        )


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def _fields(data: bytes, strict: bool = True) -> list[tuple[int, int, Any]]:
    """A message's fields in order, as (number, wire type, raw value). Not strict: stop at the
    first key that cannot start a field, which ends a message embedded in a larger blob."""
    out: list[tuple[int, int, Any]] = []
    at = 0
    while at < len(data):
        value: Any
        try:
            key, after = _varint(data, at)
            number, wire = key >> 3, key & 7
            if number == 0:
                raise ValueError("field number 0")
            if wire == _VARINT:
                value, after = _varint(data, after)
            elif wire == _LENGTH_DELIMITED:
                length, after = _varint(data, after)
                value, after = data[after : after + length], after + length
                if after > len(data):
                    raise ValueError("runs past the end")
            elif wire == _FIXED64:
                value, after = data[after : after + 8], after + 8
            elif wire == _FIXED32:
                value, after = data[after : after + 4], after + 4
            else:
                raise ValueError(f"wire type {wire}")
        except (IndexError, ValueError):
            if strict:
                raise
            break
        out.append((number, wire, value))
        at = after
    return out


def _first(fields: list[tuple[int, int, Any]], number: int, default: Any = None) -> Any:
    return next((value for n, _, value in fields if n == number), default)


def _library_with_descriptor() -> bytes:
    import jaxlib

    for library in sorted(Path(jaxlib.__file__).parent.glob("*.so")):
        data = library.read_bytes()
        start = data.find(_DESCRIPTOR_START)
        if start >= 0:
            return data[start:]
    raise XlaOptionsUnreadable(
        f"no shared library under {Path(jaxlib.__file__).parent} embeds the descriptor of "
        "xla/xla.proto; this jaxlib stores XLA's options some other way, so read the defaults "
        "from XLA's debug_options_flags.cc for its version instead"
    )


def _enums(scope: list[tuple[int, int, Any]], prefix: str) -> dict[str, dict[int, str]]:
    """The enums declared in a file or message, by full name, each as its names by number."""
    found = {}
    for n, _, raw in scope:
        if n != (_FILE_ENUM if prefix == ".xla." else _MESSAGE_ENUM):
            continue
        enum = _fields(raw)
        values = {}
        for m, _, value in enum:
            if m == _ENUM_VALUE:
                parts = _fields(value)
                values[_first(parts, _ENUM_VALUE_NUMBER, 0)] = _first(
                    parts, _ENUM_VALUE_NAME
                ).decode()
        found[prefix + _first(enum, _ENUM_NAME).decode()] = values
    return found


@functools.cache
def options() -> dict[str, Option]:
    """Every field of ``DebugOptions`` in the installed jaxlib, by name."""
    file = _fields(_library_with_descriptor(), strict=False)
    messages = [_fields(raw) for n, _, raw in file if n == _FILE_MESSAGE]
    debug = next((m for m in messages if _first(m, _MESSAGE_NAME) == b"DebugOptions"), None)
    if debug is None:
        raise XlaOptionsUnreadable("jaxlib's xla/xla.proto descriptor has no DebugOptions message")
    enums = _enums(file, ".xla.") | _enums(debug, ".xla.DebugOptions.")
    found = {}
    for n, _, raw in debug:
        if n != _MESSAGE_FIELD:
            continue
        field = _fields(raw)
        name = _first(field, _FIELD_NAME).decode()
        type_name = (_first(field, _FIELD_TYPE_NAME) or b"").decode()
        field_options = _fields(_first(field, _FIELD_OPTIONS, b""))
        found[name] = Option(
            name=name,
            number=_first(field, _FIELD_NUMBER),
            type=_TYPES.get(_first(field, _FIELD_TYPE), "other"),
            repeated=_first(field, _FIELD_LABEL) == _LABEL_REPEATED,
            deprecated=bool(_first(field_options, _FIELD_OPTIONS_DEPRECATED, 0)),
            enum=enums.get(type_name, {}),
        )
    return found


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _decode(option: Option, wire: int, raw: Any) -> Any:
    import struct

    if option.type == "bool":
        return bool(raw)
    if option.type in ("int32", "int64"):
        return _signed(raw)
    if option.type in ("uint32", "uint64"):
        return raw
    if option.type == "float":
        return struct.unpack("<f", raw)[0]
    if option.type == "double":
        return struct.unpack("<d", raw)[0]
    if option.type == "string":
        return raw.decode()
    if option.type == "enum":
        return option.enum.get(raw, raw)
    return raw


def decode_debug_options(serialized: bytes) -> dict[str, Any]:
    """The value of every option in a serialized ``DebugOptions``, unset ones at their zero."""
    table = options()
    by_number = {option.number: option for option in table.values()}
    values: dict[str, Any] = {name: option.zero() for name, option in table.items()}
    for number, wire, raw in _fields(serialized):
        option = by_number.get(number)
        if option is None:
            continue
        if option.repeated:
            packed = wire == _LENGTH_DELIMITED and option.type not in ("string", "message")
            items = [_varint(raw, at)[0] for at in _packed_starts(raw)] if packed else [raw]
            values[option.name] = values[option.name] + [
                _decode(option, _VARINT, item) for item in items
            ]
        else:
            values[option.name] = _decode(option, wire, raw)
    return values


def _packed_starts(raw: bytes) -> list[int]:
    starts, at = [], 0
    while at < len(raw):
        starts.append(at)
        _, at = _varint(raw, at)
    return starts


_SERIALIZE = (
    "import sys\n"
    "from jax._src.lib import xla_client\n"
    "compile_options = xla_client.CompileOptions()\n"
    # Reading the property fills the options in from XLA's defaults and XLA_FLAGS.
    "compile_options.executable_build_options.debug_options\n"
    "sys.stdout.buffer.write(compile_options.SerializeAsString())\n"
)


@dataclass(frozen=True)
class Reading:
    """What XLA made of one ``XLA_FLAGS``: every option's value."""

    xla_flags: str
    values: dict[str, Any]


def read(xla_flags: str = "") -> Reading:
    """Every option's value in a fresh Python process whose ``XLA_FLAGS`` is ``xla_flags`` (the
    compiled-in defaults when empty)."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["XLA_FLAGS"] = xla_flags
    env.setdefault("JAX_PLATFORMS", "cpu")
    done = subprocess.run(
        [sys.executable, "-c", _SERIALIZE], env=env, capture_output=True, timeout=120
    )
    if done.returncode != 0:
        raise XlaOptionsUnreadable(
            f"reading XLA's options with XLA_FLAGS={xla_flags!r} failed (exit "
            f"{done.returncode}): {done.stderr.decode(errors='replace')[-2000:]}"
        )
    message = done.stdout
    for number in _COMPILE_OPTIONS_PATH:
        message = _first(_fields(message), number, b"")
    return Reading(xla_flags, decode_debug_options(message))
