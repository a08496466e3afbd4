"""Values between DuckDB and the PostgreSQL wire protocol: the type OID a DuckDB type is
sent as, result values in PostgreSQL's text and binary forms, and parameters read from
either form (the protocol itself is :mod:`tesseradb.server._pgwire`)."""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import struct
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from pyarrow import MonthDayNano

__all__ = ["ARRAY_TYPES", "TYPE_CATALOG", "ParameterError", "PgType", "pg_type", "read_parameter"]

_EPOCH_DATE = dt.date(2000, 1, 1)  # PostgreSQL's binary dates and timestamps count from here
_EPOCH = dt.datetime(2000, 1, 1)
_EPOCH_TZ = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
_EPOCH_ORDINAL = _EPOCH_DATE.toordinal()

BOOL, BYTEA, INT8, INT2, INT4, TEXT, OID, JSON = 16, 17, 20, 21, 23, 25, 26, 114
FLOAT4, FLOAT8, VARCHAR, DATE, TIME, TIMESTAMP, TIMESTAMPTZ = 700, 701, 1043, 1082, 1083, 1114, 1184
INTERVAL, TIMETZ, NUMERIC, UUID, JSONB, UNKNOWN = 1186, 1266, 1700, 2950, 3802, 705
# the array type of each element type that has one here
ARRAY_OF = {
    BOOL: 1000,
    BYTEA: 1001,
    INT2: 1005,
    INT4: 1007,
    TEXT: 1009,
    INT8: 1016,
    FLOAT4: 1021,
    FLOAT8: 1022,
    DATE: 1182,
    TIMESTAMP: 1115,
    TIMESTAMPTZ: 1185,
    NUMERIC: 1231,
    UUID: 2951,
    JSON: 199,
}
# PostgreSQL's catalog entry of each type sent or read here: its name, its binary
# receive function (what a driver decodes by: ADBC's PostgreSQL driver reads these
# from pg_type as it connects) and its array type
TYPE_CATALOG = {
    BOOL: ("bool", "boolrecv"),
    BYTEA: ("bytea", "bytearecv"),
    INT8: ("int8", "int8recv"),
    INT2: ("int2", "int2recv"),
    INT4: ("int4", "int4recv"),
    TEXT: ("text", "textrecv"),
    OID: ("oid", "oidrecv"),
    JSON: ("json", "json_recv"),
    FLOAT4: ("float4", "float4recv"),
    FLOAT8: ("float8", "float8recv"),
    VARCHAR: ("varchar", "varcharrecv"),
    DATE: ("date", "date_recv"),
    TIME: ("time", "time_recv"),
    TIMESTAMP: ("timestamp", "timestamp_recv"),
    TIMESTAMPTZ: ("timestamptz", "timestamptz_recv"),
    INTERVAL: ("interval", "interval_recv"),
    TIMETZ: ("timetz", "timetz_recv"),
    NUMERIC: ("numeric", "numeric_recv"),
    UUID: ("uuid", "uuid_recv"),
    JSONB: ("jsonb", "jsonb_recv"),
}
ARRAY_TYPES = ARRAY_OF | {VARCHAR: 1015, OID: 1028, TIME: 1183, INTERVAL: 1187, TIMETZ: 1270}
ARRAY_TYPES |= {JSONB: 3807}
# the width PostgreSQL gives a type in a row description (-1: variable)
_WIDTH = {BOOL: 1, INT2: 2, INT4: 4, INT8: 8, FLOAT4: 4, FLOAT8: 8, DATE: 4, TIME: 8}
_WIDTH |= {TIMESTAMP: 8, TIMESTAMPTZ: 8, INTERVAL: 16, UUID: 16}

_SCALARS = {
    "BOOLEAN": BOOL,
    "TINYINT": INT2,
    "SMALLINT": INT2,
    "INTEGER": INT4,
    "BIGINT": INT8,
    "UTINYINT": INT2,
    "USMALLINT": INT4,
    "UINTEGER": INT8,
    "UBIGINT": NUMERIC,
    "HUGEINT": NUMERIC,
    "UHUGEINT": NUMERIC,
    "BIGNUM": NUMERIC,
    "VARINT": NUMERIC,
    "FLOAT": FLOAT4,
    "DOUBLE": FLOAT8,
    "VARCHAR": TEXT,
    "BLOB": BYTEA,
    "DATE": DATE,
    "TIME": TIME,
    "TIME WITH TIME ZONE": TIMETZ,
    "TIMESTAMP": TIMESTAMP,
    "TIMESTAMP_S": TIMESTAMP,
    "TIMESTAMP_MS": TIMESTAMP,
    "TIMESTAMP_NS": TIMESTAMP,
    "TIMESTAMP WITH TIME ZONE": TIMESTAMPTZ,
    "INTERVAL": INTERVAL,
    "UUID": UUID,
    "JSON": JSON,
}
_LIST = re.compile(r"^(.*)\[\d*\]$")


class ParameterError(ValueError):
    """A parameter's bytes are not a value of the type the client named."""


class PgType:
    """How one result column travels: its OID and width, and its values' encoders."""

    def __init__(self, oid: int, element: PgType | None = None) -> None:
        self.oid = oid
        self.width = _WIDTH.get(oid, -1)
        self.element = element

    def text(self, value: Any) -> bytes:
        """``value`` (not None) in PostgreSQL's text form."""
        return _text(value, self).encode()

    def binary(self, value: Any) -> bytes:
        """``value`` (not None) in PostgreSQL's binary form."""
        if self.element is not None:
            return _binary_array(value, self.element)
        encode = _BINARY.get(self.oid)
        if encode is None:  # (every type without a binary form here is sent as text)
            return self.text(value)
        return encode(value)


def pg_type(duckdb_type: str) -> PgType:
    """The PostgreSQL type a DuckDB result column is sent as (``text`` for the nested and
    other types PostgreSQL has no like of: STRUCT, MAP, UNION, ENUM, BIT go as their text)."""
    name = duckdb_type.upper()
    found = _SCALARS.get(name)
    if found is not None:
        return PgType(found)
    if name.startswith("DECIMAL"):
        return PgType(NUMERIC)
    listed = _LIST.match(name)
    if listed:
        element = pg_type(listed.group(1))
        array = ARRAY_OF.get(element.oid)
        if array is not None and element.element is None:
            return PgType(array, element)
        return PgType(TEXT)
    if name.startswith(("STRUCT", "MAP", "UNION")):
        return PgType(JSON)
    return PgType(TEXT)


# --- results in text -------------------------------------------------------------------
def _float_text(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    text = repr(value)  # (the shortest exact form, as PostgreSQL's extra_float_digits=1)
    return text[:-2] if text.endswith(".0") else text


def _offset_text(offset: dt.timedelta | None) -> str:
    if offset is None:
        return ""
    seconds = int(offset.total_seconds())
    sign = "-" if seconds < 0 else "+"
    hours, rest = divmod(abs(seconds), 3600)
    minutes, seconds = divmod(rest, 60)
    text = f"{sign}{hours:02d}"
    if minutes or seconds:
        text += f":{minutes:02d}"
    if seconds:
        text += f":{seconds:02d}"
    return text


def _trimmed(clock: str) -> str:
    """Fractional seconds without trailing zeros, as PostgreSQL prints them."""
    return clock.rstrip("0").rstrip(".") if "." in clock[-7:] else clock


def _interval_parts(value: Any) -> tuple[int, int, int]:
    """An interval's months, days and microseconds: from pyarrow's MonthDayNano (as
    DuckDB keeps them), or a timedelta (DuckDB's Python value: a month as 30 days)."""
    if isinstance(value, dt.timedelta):
        return 0, value.days, value.seconds * 1_000_000 + value.microseconds
    months, days, nanoseconds = value
    return int(months), int(days), int(nanoseconds) // 1000


def _interval_text(value: Any) -> str:
    """PostgreSQL's way: ``1 year 2 mons -3 days 04:05:06.5``."""
    months, days, micros = _interval_parts(value)
    sign = -1 if months < 0 else 1
    years, months = sign * (abs(months) // 12), sign * (abs(months) % 12)
    parts = [
        f"{n} {word if n == 1 else word + 's'}"  # (PostgreSQL: -1 years)
        for n, word in ((years, "year"), (months, "mon"), (days, "day"))
        if n
    ]
    if micros or not parts:
        hours, rest = divmod(abs(micros), 3_600_000_000)
        minutes, rest = divmod(rest, 60_000_000)
        seconds, rest = divmod(rest, 1_000_000)
        clock = f"{hours:02d}:{minutes:02d}:{seconds:02d}" + (f".{rest:06d}" if rest else "")
        parts.append(("-" if micros < 0 else "") + _trimmed(clock))
    return " ".join(parts)


def _array_item(value: Any, kind: PgType | None) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, (list, tuple)):
        return "{" + ",".join(_array_item(v, kind) for v in value) + "}"
    text = _text(value, kind)
    # (quoted as PostgreSQL quotes: around its delimiters and C's white space)
    if text == "" or text.upper() == "NULL" or any(c in text for c in '{},"\\' + _SPACE):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def _text(value: Any, kind: PgType | None) -> str:
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float_text(value)
    if isinstance(value, str):
        return value
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "\\x" + bytes(value).hex()
    if isinstance(value, dt.datetime):
        text = _trimmed(value.replace(tzinfo=None).isoformat(sep=" "))
        return text + _offset_text(value.utcoffset())
    if isinstance(value, dt.time):
        return _trimmed(value.replace(tzinfo=None).isoformat()) + _offset_text(value.utcoffset())
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, (dt.timedelta, MonthDayNano)):
        return _interval_text(value)
    if isinstance(value, (list, tuple)):
        element = kind.element if kind is not None else None
        return "{" + ",".join(_array_item(v, element) for v in value) + "}"
    if isinstance(value, dict):
        return json.dumps(value, default=str, ensure_ascii=False)
    return str(value)


# --- results in binary -----------------------------------------------------------------
def _numeric_binary(value: Any) -> bytes:
    """PostgreSQL's binary NUMERIC: base-10000 digits, weight, sign and scale."""
    number = Decimal(value)
    if number.is_nan():
        return struct.pack("!hhHH", 0, 0, 0xC000, 0)
    if number.is_infinite():
        return struct.pack("!hhHH", 0, 0, 0xD000 if number > 0 else 0xF000, 0)
    sign, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)
    scale = max(-exponent, 0)
    text = "".join(map(str, digits))
    if exponent > 0:
        text += "0" * exponent
        exponent = 0
    whole = text[: len(text) + exponent] if exponent else text
    frac = text[len(text) + exponent :] if exponent else ""
    whole = whole.lstrip("0")
    whole = "0" * (-len(whole) % 4) + whole
    frac = frac + "0" * (-len(frac) % 4)
    groups = [int(whole[i : i + 4]) for i in range(0, len(whole), 4)]
    weight = len(groups) - 1
    groups += [int(frac[i : i + 4]) for i in range(0, len(frac), 4)]
    while groups and groups[-1] == 0:  # (trailing zero groups are implied by the scale)
        groups.pop()
    while groups and groups[0] == 0:  # (leading ones by the weight)
        groups.pop(0)
        weight -= 1
    if not groups:
        weight = 0
    head = struct.pack("!hhHH", len(groups), weight, 0x4000 if sign else 0, scale)
    return head + struct.pack(f"!{len(groups)}H", *groups)


def _timestamp_binary(value: dt.datetime) -> bytes:
    delta = value - _EPOCH_TZ if value.tzinfo is not None else value - _EPOCH
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return struct.pack("!q", micros)


def _time_binary(value: dt.time) -> bytes:
    micros = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000
    return struct.pack("!q", micros + value.microsecond)


def _timetz_binary(value: dt.time) -> bytes:
    # microseconds of the clock, then the zone in seconds west of Greenwich
    offset = value.utcoffset() or dt.timedelta(0)
    clock = _time_binary(value.replace(tzinfo=None))
    return clock + struct.pack("!i", -int(offset.total_seconds()))


def _interval_binary(value: Any) -> bytes:
    months, days, micros = _interval_parts(value)
    return struct.pack("!qii", micros, days, months)


def _text_bytes(value: Any) -> bytes:
    return _text(value, None).encode()


_BINARY: dict[int, Callable[[Any], bytes]] = {
    BOOL: lambda v: b"\x01" if v else b"\x00",
    INT2: lambda v: struct.pack("!h", v),
    INT4: lambda v: struct.pack("!i", v),
    INT8: lambda v: struct.pack("!q", v),
    FLOAT4: lambda v: struct.pack("!f", v),
    FLOAT8: lambda v: struct.pack("!d", v),
    TEXT: _text_bytes,
    JSON: _text_bytes,
    BYTEA: bytes,
    DATE: lambda v: struct.pack("!i", v.toordinal() - _EPOCH_ORDINAL),
    TIMESTAMP: _timestamp_binary,
    TIMESTAMPTZ: _timestamp_binary,
    TIME: _time_binary,
    TIMETZ: _timetz_binary,
    OID: lambda v: struct.pack("!I", v),
    INTERVAL: _interval_binary,
    UUID: lambda v: uuid.UUID(str(v)).bytes,
    NUMERIC: _numeric_binary,
}


def _binary_array(values: list[Any], element: PgType) -> bytes:
    """A one-dimensional PostgreSQL array in binary (nested lists are sent as text)."""
    has_null = any(v is None for v in values)
    parts = [struct.pack("!iiIii", 1, int(has_null), element.oid, len(values), 1)]
    for value in values:
        if value is None:
            parts.append(b"\xff\xff\xff\xff")
        else:
            data = element.binary(value)
            parts.append(struct.pack("!i", len(data)) + data)
    return b"".join(parts)


# --- parameters ------------------------------------------------------------------------
def _parse_bool(text: str) -> bool:
    word = text.strip().lower()
    if word in ("t", "true", "y", "yes", "on", "1"):
        return True
    if word in ("f", "false", "n", "no", "off", "0"):
        return False
    raise ParameterError(f"{text!r} is not a boolean")


def _parse_bytea(text: str) -> bytes:
    if text.startswith("\\x"):
        return bytes.fromhex(text[2:])
    return text.encode()


_FROM_TEXT: dict[int, Callable[[str], Any]] = {
    BOOL: _parse_bool,
    INT2: int,
    INT4: int,
    INT8: int,
    OID: int,
    FLOAT4: float,
    FLOAT8: float,
    NUMERIC: Decimal,
    BYTEA: _parse_bytea,
    DATE: dt.date.fromisoformat,
    TIMESTAMP: dt.datetime.fromisoformat,
    TIMESTAMPTZ: dt.datetime.fromisoformat,
    UUID: uuid.UUID,
}


_SPACE = " \t\n\r\v\f"  # what PostgreSQL's array text trims (C's isspace, not Unicode's)


def _array_parser(element: int) -> Callable[[str], Any]:
    """A reader of PostgreSQL's array text (``{1,2,NULL}``, ``{"a b",c}``, nested
    ``{{1,2},{3,4}}``) as lists of the element type's values."""
    parse = _FROM_TEXT.get(element, str)

    def read(text: str) -> Any:
        text = text.strip(_SPACE)
        value, at = _array_at(text, 0, parse)
        if at != len(text):
            raise ValueError(f"text after the array's closing brace: {text[at:]!r}")
        return value

    return read


def _array_at(text: str, at: int, parse: Callable[[str], Any]) -> tuple[list[Any], int]:
    if text[at : at + 1] != "{":
        raise ValueError(f"an array begins with '{{', not {text[at : at + 1]!r}")
    at += 1
    items: list[Any] = []
    if text[at : at + 1] == "}":
        return items, at + 1
    while True:
        if text[at : at + 1] == "{":
            item, at = _array_at(text, at, parse)
            items.append(item)
        elif text[at : at + 1] == '"':
            chars, at = [], at + 1
            while at < len(text) and text[at] != '"':
                if text[at] == "\\":
                    at += 1
                chars.append(text[at : at + 1])
                at += 1
            if at >= len(text):
                raise ValueError("a quoted array element is never closed")
            items.append(parse("".join(chars)))
            at += 1
        else:
            end = at
            while end < len(text) and text[end] not in ",}":
                end += 1
            raw = text[at:end].strip(_SPACE)
            items.append(None if raw.upper() == "NULL" else parse(raw))
            at = end
        if text[at : at + 1] == ",":
            at += 1
        elif text[at : at + 1] == "}":
            return items, at + 1
        else:
            raise ValueError("an array element is followed by neither ',' nor '}'")


for _element, _array in ARRAY_TYPES.items():
    _FROM_TEXT[_array] = _array_parser(_element)


def _numeric_from_binary(data: bytes) -> Decimal:
    count, weight, sign, scale = struct.unpack_from("!hhHH", data)
    if sign == 0xC000:
        return Decimal("NaN")
    if sign in (0xD000, 0xF000):
        return Decimal("Infinity") if sign == 0xD000 else Decimal("-Infinity")
    groups = struct.unpack_from(f"!{count}H", data, 8)
    number = Decimal(0)
    for i, group in enumerate(groups):
        number += Decimal(group).scaleb(4 * (weight - i))
    number = number.quantize(Decimal(1).scaleb(-scale)) if scale else number
    return -number if sign == 0x4000 else number


def _micros_after(epoch: dt.datetime, micros: int) -> dt.datetime:
    return epoch + dt.timedelta(microseconds=micros)


_FROM_BINARY: dict[int, Callable[[bytes], Any]] = {
    BOOL: lambda b: b != b"\x00",
    INT2: lambda b: struct.unpack("!h", b)[0],
    INT4: lambda b: struct.unpack("!i", b)[0],
    OID: lambda b: struct.unpack("!I", b)[0],
    INT8: lambda b: struct.unpack("!q", b)[0],
    FLOAT4: lambda b: struct.unpack("!f", b)[0],
    FLOAT8: lambda b: struct.unpack("!d", b)[0],
    TEXT: lambda b: b.decode(),
    VARCHAR: lambda b: b.decode(),
    JSON: lambda b: b.decode(),
    UNKNOWN: lambda b: b.decode(),
    BYTEA: bytes,
    DATE: lambda b: dt.date.fromordinal(_EPOCH_ORDINAL + struct.unpack("!i", b)[0]),
    TIMESTAMP: lambda b: _micros_after(_EPOCH, struct.unpack("!q", b)[0]),
    TIMESTAMPTZ: lambda b: _micros_after(_EPOCH_TZ, struct.unpack("!q", b)[0]),
    UUID: lambda b: uuid.UUID(bytes=b),
    NUMERIC: _numeric_from_binary,
    JSONB: lambda b: b[1:].decode(),  # (a version byte, then the text)
}


def read_parameter(data: bytes | None, oid: int, binary: bool, number: int) -> Any:
    """Parameter ``$number``'s value from its bytes: by the type the client named, else
    as text for DuckDB to cast where the statement uses it."""
    if data is None:
        return None
    try:
        if binary:
            decode = _FROM_BINARY.get(oid)
            if decode is None:
                raise ParameterError(f"type OID {oid} has no binary form here; send it as text")
            return decode(data)
        text = data.decode()
        parse = _FROM_TEXT.get(oid)
        return text if parse is None else parse(text)
    except ParameterError as err:
        raise ParameterError(f"parameter ${number}: {err}") from None
    except (ValueError, struct.error, ArithmeticError) as err:
        kind = "binary" if binary else "text"
        raise ParameterError(
            f"parameter ${number}: its {kind} bytes are not a value of type OID {oid} ({err})"
        ) from None
