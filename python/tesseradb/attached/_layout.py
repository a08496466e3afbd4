"""What an HDF5 file holds, as tables: discovery of groups, compound and N-D datasets.

- A group whose (non-scale) 1-D datasets share one length is a table, one
  column per dataset. A group whose 1-D datasets differ in length is skipped,
  with the reason listed.
- A 1-D compound dataset is a table with one column per (scalar) field.
- An N-D dataset is a table with one column per dimension (the dimension
  scale's values where one is attached, as NetCDF4 does, else the index)
  followed by the value.

Numeric types map to Arrow's; fixed- and variable-length strings become
strings; half floats become float32. Other types (complex, references,
nested arrays, opaque) are skipped with the reason.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import h5py
    import numpy as np
    import pyarrow as pa

__all__ = ["ColumnSource", "FileLayout", "TableLayout", "arrow_type_of", "discover"]


@dataclass
class ColumnSource:
    """One column of an attached table and where its values come from."""

    name: str
    dataset: str  # HDF5 path of the dataset (for a dimension column: of the N-D dataset)
    dtype: str  # numpy dtype string of the values as stored
    arrow: str  # Arrow type name (int64, float32, string, ...)
    field: str | None = None  # compound field
    dim: int | None = None  # for a dimension column of an N-D dataset: which axis
    scale: str | None = None  # that axis's dimension scale dataset, if any


@dataclass
class TableLayout:
    name: str  # the table part of the relation name (`candidate` of `ptf.candidate`)
    kind: str  # group | compound | array
    path: str  # the group or dataset
    rows: int
    columns: list[ColumnSource]
    shape: list[int] = field(default_factory=list)  # for arrays

    def to_spec(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> TableLayout:
        cols = [ColumnSource(**c) for c in spec["columns"]]
        return cls(
            spec["name"],
            spec["kind"],
            spec["path"],
            int(spec["rows"]),
            cols,
            list(spec.get("shape", [])),
        )

    def signature(self) -> list[tuple[str, str, str]]:
        """What must agree between files of one attachment: names and types."""
        return [(c.name, c.arrow, c.dataset) for c in self.columns]


@dataclass
class FileLayout:
    tables: dict[str, TableLayout]
    skipped: list[tuple[str, str]]  # (HDF5 path, reason)


_ARROW_OF_KIND = {"i": "int", "u": "uint", "f": "float", "b": "bool"}


def arrow_type_of(dtype: np.dtype) -> str | None:
    """The Arrow type name for a stored numpy dtype, or None if unsupported."""
    import h5py

    if h5py.check_string_dtype(dtype) is not None or dtype.kind == "S":
        return "string"
    if dtype.kind == "f":
        return "float32" if dtype.itemsize <= 4 else "float64" if dtype.itemsize == 8 else None
    if dtype.kind in ("i", "u"):
        return f"{_ARROW_OF_KIND[dtype.kind]}{dtype.itemsize * 8}"
    if dtype.kind == "b":
        return "bool"
    return None


def to_arrow_type(name: str) -> pa.DataType:
    import pyarrow as pa

    return {"string": pa.string(), "bool": pa.bool_()}.get(name) or getattr(pa, name)()


def _identifier(text: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", text.strip("/")) or "root"
    return cleaned if not cleaned[0].isdigit() else f"_{cleaned}"


def _is_scale(ds: h5py.Dataset) -> bool:
    cls = ds.attrs.get("CLASS")
    return (
        isinstance(cls, (bytes, str))
        and (cls.decode() if isinstance(cls, bytes) else cls) == "DIMENSION_SCALE"
    )


def discover(file: h5py.File) -> FileLayout:
    """The tables of an open HDF5 file."""
    import h5py

    tables: dict[str, TableLayout] = {}
    skipped: list[tuple[str, str]] = []
    groups: list[h5py.Group] = [file]
    file.visititems(lambda _name, obj: groups.append(obj) if isinstance(obj, h5py.Group) else None)

    def add(layout: TableLayout) -> None:
        name = layout.name
        if name in tables:  # two groups with the same basename: use the full path
            name = _identifier(layout.path)
        layout.name = name
        tables[name] = layout

    for group in groups:
        plain: list[h5py.Dataset] = []
        for item in group.values():
            if not isinstance(item, h5py.Dataset):
                continue
            if item.dtype.names is not None:
                _compound(item, add, skipped)
            elif item.ndim >= 2:
                _array(item, add, skipped)
            elif item.ndim == 1 and not _is_scale(item):
                plain.append(item)
            elif item.ndim == 0:
                skipped.append((item.name, "a scalar dataset is not a table"))
        if not plain:
            continue
        lengths = {ds.shape[0] for ds in plain}
        if len(lengths) > 1:
            detail = ", ".join(f"{ds.name.rsplit('/', 1)[-1]}: {ds.shape[0]}" for ds in plain[:6])
            skipped.append((group.name, f"its 1-D datasets differ in length ({detail})"))
            continue
        columns = []
        for ds in sorted(plain, key=lambda d: d.name):
            arrow = arrow_type_of(ds.dtype)
            if arrow is None:
                skipped.append((ds.name, f"unsupported type {ds.dtype}"))
                continue
            columns.append(ColumnSource(ds.name.rsplit("/", 1)[-1], ds.name, ds.dtype.str, arrow))
        if columns:
            name = "root" if group.name == "/" else _identifier(group.name.rsplit("/", 1)[-1])
            add(TableLayout(name, "group", group.name, lengths.pop(), columns))
    return FileLayout(tables, skipped)


def _compound(ds: h5py.Dataset, add: Any, skipped: list[tuple[str, str]]) -> None:
    if ds.ndim != 1:
        skipped.append((ds.name, f"a {ds.ndim}-D compound dataset is not supported"))
        return
    columns = []
    for name in ds.dtype.names:
        sub = ds.dtype.fields[name][0]
        arrow = arrow_type_of(sub) if sub.shape == () else None
        if arrow is None:
            skipped.append((f"{ds.name}.{name}", f"unsupported field type {sub}"))
            continue
        columns.append(ColumnSource(name, ds.name, sub.str, arrow, field=name))
    if columns:
        add(
            TableLayout(
                _identifier(ds.name.rsplit("/", 1)[-1]), "compound", ds.name, ds.shape[0], columns
            )
        )


def _array(ds: h5py.Dataset, add: Any, skipped: list[tuple[str, str]]) -> None:
    arrow = arrow_type_of(ds.dtype)
    if arrow is None or arrow == "string":
        skipped.append((ds.name, f"unsupported type {ds.dtype} for an N-D dataset"))
        return
    base = ds.name.rsplit("/", 1)[-1]
    columns = []
    used = {base}
    for axis in range(ds.ndim):
        dim = ds.dims[axis]
        scale = dim[0] if len(dim) else None
        label = dim.label or (scale.name.rsplit("/", 1)[-1] if scale is not None else f"dim_{axis}")
        name = _identifier(label)
        while name in used:
            name = f"{name}_{axis}"
        used.add(name)
        if (
            scale is not None
            and scale.ndim == 1
            and scale.shape[0] == ds.shape[axis]
            and arrow_type_of(scale.dtype)
        ):
            columns.append(
                ColumnSource(
                    name,
                    ds.name,
                    scale.dtype.str,
                    arrow_type_of(scale.dtype) or "int64",
                    dim=axis,
                    scale=scale.name,
                )
            )
        else:
            columns.append(ColumnSource(name, ds.name, "<i8", "int64", dim=axis))
    columns.append(ColumnSource(_identifier(base), ds.name, ds.dtype.str, arrow))
    rows = 1
    for n in ds.shape:
        rows *= n
    add(TableLayout(_identifier(base), "array", ds.name, rows, columns, list(ds.shape)))
