"""Record descriptors: the structure of a stream's records (MDDS §V-A).

A descriptor names the record format (a UUID), its fields in order with
their types, and the indexing fields (1 to 9 numeric fields, in the order the
indexes consider them). It is accepted as the paper's XML (as printed in its
listings, with unquoted ``array_len`` values and no closing tag, or as
well-formed XML), as a dict, or as JSON:

.. code-block:: xml

    <description typeid="7c9e6679-7425-40de-944b-e07fc1f90ae7">
     <field name="medallion" type="char" array_len=33/>
     <field name="pickup_datetime" type="epoch_t"/>
     <field name="pickup_latitude" type="float"/>
     <field name="pickup_latitude"/>          <!-- untyped: an indexing field -->
     <field name="pickup_datetime"/>

.. code-block:: python

    {"typeid": "7c9e6679-...", "fields": [{"name": "medallion", "type": "char", "array_len": 33},
     {"name": "pickup_datetime", "type": "epoch_t"}, ...], "index": ["pickup_latitude", "pickup_datetime"]}

Types: ``int8``..``int64`` and ``uint8``..``uint64`` (also spelled with C's
``_t``), ``float`` (32-bit), ``double``, ``epoch_t`` (seconds since the Unix
epoch, stored and queried as a 64-bit integer, as in SQLite and in the
paper's queries) and ``char`` with ``array_len`` (a string of at most that
many UTF-8 bytes, NUL-padded in the binary form).
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tesseradb.errors import DescriptorError, LimitExceededError

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

__all__ = ["DescriptorError", "Field", "RecordDescriptor"]

MAX_INDEX_FIELDS = 9
# Limits on a record's shape, checked when a descriptor is read (docs/reliability.md)
MAX_FIELDS = 1024
MAX_FIELD_NAME = 128
MAX_CHAR_LEN = 1 << 16  # bytes of one char field: records are small and fixed-size

# canonical type -> (numpy type of the binary form, Arrow type name)
_NUMERIC = {
    "int8": ("i1", "int8"),
    "int16": ("<i2", "int16"),
    "int32": ("<i4", "int32"),
    "int64": ("<i8", "int64"),
    "uint8": ("u1", "uint8"),
    "uint16": ("<u2", "uint16"),
    "uint32": ("<u4", "uint32"),
    "uint64": ("<u8", "uint64"),
    "float": ("<f4", "float32"),
    "double": ("<f8", "float64"),
    "epoch_t": ("<i8", "int64"),
}
_ALIASES = {f"{t}_t": t for t in _NUMERIC if t.startswith(("int", "uint"))} | {
    "float32": "float",
    "float64": "double",
}
TYPES = (*_NUMERIC, "char")


@dataclass(frozen=True)
class Field:
    """One field of a record, in order."""

    name: str
    type: str  # one of TYPES, canonical spelling
    array_len: int | None = None  # for char

    @property
    def numpy_type(self) -> str:
        return f"S{self.array_len}" if self.type == "char" else _NUMERIC[self.type][0]

    @property
    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        return pa.string() if self.type == "char" else getattr(pa, _NUMERIC[self.type][1])()

    @property
    def numeric(self) -> bool:
        return self.type != "char"

    @property
    def size(self) -> int:
        import numpy as np

        return int(np.dtype(self.numpy_type).itemsize)


@dataclass(frozen=True)
class RecordDescriptor:
    """The structure of a stream's records and its indexing fields."""

    typeid: str
    fields: tuple[Field, ...]
    index: tuple[str, ...]

    def __post_init__(self) -> None:
        _validate(self)

    # --- derived forms ------------------------------------------------------------
    @property
    def record_size(self) -> int:
        """Bytes per record in the binary form (fields packed in order, no padding)."""
        return sum(f.size for f in self.fields)

    @property
    def numpy_dtype(self) -> np.dtype:
        """The packed structured dtype of the binary form."""
        import numpy as np

        return np.dtype([(f.name, f.numpy_type) for f in self.fields])

    @property
    def arrow_schema(self) -> pa.Schema:
        import pyarrow as pa

        return pa.schema([pa.field(f.name, f.arrow_type) for f in self.fields])

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise DescriptorError(f"the descriptor has no field {name!r}")

    # --- parsing --------------------------------------------------------------------
    @classmethod
    def parse(cls, source: Any) -> RecordDescriptor:
        """A descriptor from XML text, JSON text, a dict, or another descriptor."""
        if isinstance(source, RecordDescriptor):
            return source
        if isinstance(source, dict):
            return cls.from_dict(source)
        if isinstance(source, str):
            text = source.strip()
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as err:  # (a lone surrogate: no parser takes it)
                raise DescriptorError(
                    f"a descriptor is Unicode text; this one has a lone surrogate at {err.start}"
                ) from None
            if text.startswith("{"):
                return cls.from_json(text)
            if text.startswith("<"):
                return cls.from_xml(text)
        raise DescriptorError("a descriptor is XML text, JSON text or a dict")

    @classmethod
    def from_json(cls, text: str) -> RecordDescriptor:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise DescriptorError(
                f"descriptor JSON is malformed at line {err.lineno}, column {err.colno}: {err.msg}"
            ) from None
        except RecursionError:
            raise DescriptorError("descriptor JSON nests too deeply to be a descriptor") from None
        if not isinstance(data, dict):
            raise DescriptorError("a JSON descriptor is an object with typeid, fields and index")
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RecordDescriptor:
        unknown = set(data) - {"typeid", "fields", "index"}
        if unknown:
            raise DescriptorError(
                f"unknown descriptor keys {sorted(unknown)}: expected typeid, fields, index"
            )
        raw_fields = data.get("fields")
        if not isinstance(raw_fields, list) or not raw_fields:
            raise DescriptorError("the descriptor needs a non-empty list of fields")
        fields = []
        for position, raw in enumerate(raw_fields, 1):
            if not isinstance(raw, dict):
                raise DescriptorError(f"field {position} is not an object with name and type")
            fields.append(_field(raw.get("name"), raw.get("type"), raw.get("array_len"), position))
        index = data.get("index")
        if not isinstance(index, list) or not all(isinstance(i, str) for i in index):
            raise DescriptorError("the descriptor's index is a list of field names")
        typeid = data.get("typeid") or _derived_typeid(fields, index)
        return cls(_typeid(typeid), tuple(fields), tuple(index))

    @classmethod
    def from_xml(cls, text: str) -> RecordDescriptor:
        import xml.etree.ElementTree as ET

        fixed = _lenient_xml(text)
        try:
            root = ET.fromstring(fixed)
        except ET.ParseError as err:
            line, column = err.position
            raise DescriptorError(
                f"descriptor XML is malformed at line {line}, column {column + 1}: {err}"
            ) from None
        if root.tag != "description":
            raise DescriptorError(f"a descriptor's root element is <description>, not <{root.tag}>")
        fields: list[Field] = []
        index: list[str] = []
        for position, element in enumerate(root.iter("field"), 1):
            name = element.get("name")
            kind = element.get("type")
            if kind is None:
                if not name:
                    raise DescriptorError(
                        f"indexing field {len(index) + 1} (the <field> at position {position}) has no name"
                    )
                index.append(name)
                continue
            if index:
                raise DescriptorError(
                    f"typed field {name!r} comes after the indexing fields: list the record's fields first"
                )
            fields.append(_field(name, kind, element.get("array_len"), len(fields) + 1))
        if not fields:
            raise DescriptorError("the descriptor has no typed <field> elements: no record format")
        typeid = root.get("typeid") or _derived_typeid(fields, index)
        return cls(_typeid(typeid), tuple(fields), tuple(index))

    # --- writing --------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        fields = [
            {
                "name": f.name,
                "type": f.type,
                **({"array_len": f.array_len} if f.type == "char" else {}),
            }
            for f in self.fields
        ]
        return {"typeid": self.typeid, "fields": fields, "index": list(self.index)}

    def to_xml(self) -> str:
        from xml.sax.saxutils import quoteattr

        lines = [
            '<?xml version="1.0"?>',
            f"<description typeid={quoteattr(self.typeid)}>",
            "  <!-- The record format -->",
        ]
        for f in self.fields:
            extra = f' array_len="{f.array_len}"' if f.type == "char" else ""
            lines.append(f"  <field name={quoteattr(f.name)} type={quoteattr(f.type)}{extra}/>")
        lines.append("  <!-- Fields for indexing -->")
        lines += [f"  <field name={quoteattr(name)}/>" for name in self.index]
        lines.append("</description>")
        return "\n".join(lines) + "\n"


def _lenient_xml(text: str) -> str:
    """The paper's listings as well-formed XML: quoted attribute values, a closing tag."""
    body = re.sub(r"^\s*<\?xml[^>]*\?>", "", text.strip())
    body = re.sub(r"(\b[\w-]+)=([^\s\"'/>]+)", r'\1="\2"', body)  # array_len=33 -> array_len="33"
    if re.search(r"<description\b", body) and "</description>" not in body:
        body += "\n</description>"
    return body


def _field(name: Any, kind: Any, array_len: Any, position: int) -> Field:
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise DescriptorError(
            f"field {position} has no valid name ({name!r}): names are identifiers"
        )
    if not isinstance(kind, str):
        raise DescriptorError(f"field {name!r} has no type")
    canonical = _ALIASES.get(kind, kind)
    if canonical not in TYPES:
        raise DescriptorError(
            f"field {name!r} has unknown type {kind!r}; types are {', '.join(TYPES)}"
        )
    if canonical == "char":
        try:
            length = int(array_len) if array_len is not None else 0
        except (TypeError, ValueError):
            length = 0
        if length < 1:
            raise DescriptorError(
                f"char field {name!r} needs array_len, a positive byte count (got {array_len!r})"
            )
        return Field(name, "char", length)
    if array_len is not None:
        raise DescriptorError(f"field {name!r} of type {kind} takes no array_len")
    return Field(name, canonical)


def _typeid(value: Any) -> str:
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise DescriptorError(f"typeid {value!r} is not a UUID") from None


def _derived_typeid(fields: list[Field], index: list[str]) -> str:
    """A stable UUID for a descriptor given without one: the same structure, the same id."""
    spec = json.dumps([[f.name, f.type, f.array_len] for f in fields] + [index])
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "tesseradb:record:" + spec))


def _validate(descriptor: RecordDescriptor) -> None:
    names = [f.name for f in descriptor.fields]
    if len(names) > MAX_FIELDS:
        raise LimitExceededError(f"{len(names):,} fields: a record has at most {MAX_FIELDS:,}")
    for f in descriptor.fields:
        if len(f.name) > MAX_FIELD_NAME:
            raise LimitExceededError(
                f"field {f.name[:40]!r}...: a field name has at most {MAX_FIELD_NAME} characters"
            )
        if f.type == "char" and (f.array_len or 0) > MAX_CHAR_LEN:
            raise LimitExceededError(
                f"char field {f.name!r}: array_len {f.array_len:,} is above the limit, "
                f"{MAX_CHAR_LEN:,} bytes"
            )
    seen: set[str] = set()
    for name in names:
        if name.lower() in seen:
            raise DescriptorError(f"field {name!r} appears twice")
        seen.add(name.lower())
    if not descriptor.index:
        raise DescriptorError("the descriptor names no indexing fields (1 to 9 numeric fields)")
    if len(descriptor.index) > MAX_INDEX_FIELDS:
        raise DescriptorError(
            f"{len(descriptor.index)} indexing fields: at most {MAX_INDEX_FIELDS}"
        )
    by_name = {f.name: f for f in descriptor.fields}
    for name in descriptor.index:
        if name not in by_name:
            raise DescriptorError(f"indexing field {name!r} is not a field of the record")
        if not by_name[name].numeric:
            raise DescriptorError(
                f"indexing field {name!r} is a char field: indexing fields are numeric"
            )
    if len(set(descriptor.index)) != len(descriptor.index):
        raise DescriptorError("an indexing field is listed twice")
