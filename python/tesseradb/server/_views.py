"""What the server reads for its clients: objects described, array slabs (as numbers or as an
image), cells, stream ranges and plots. Each function runs on a request's thread and
returns bytes or plain data; bad parameters raise ``InvalidArgumentError`` naming them."""

from __future__ import annotations

import io
import json
import math
from typing import TYPE_CHECKING, Any

from tesseradb.errors import InvalidArgumentError, TesseraError
from tesseradb.server._client import ipc_bytes

if TYPE_CHECKING:
    import numpy as np

    from tesseradb.database import Database

__all__ = ["read_cell", "read_slab", "stream_plot", "stream_range"]

# colormaps as anchor colours, interpolated to 256 entries (viridis and magma: matplotlib's)
COLORMAPS = {
    "gray": ["#000000", "#ffffff"],
    "viridis": [
        "#440154", "#482878", "#3e4989", "#31688e", "#26828e",
        "#1f9e89", "#35b779", "#6ece58", "#b5de2b", "#fde725",
    ],
    "magma": [
        "#000004", "#1c1044", "#4f127b", "#812581", "#b5367a",
        "#e55964", "#fb8761", "#fec287", "#fcfdbf",
    ],
    "hot": ["#000000", "#e60000", "#ffd200", "#ffffff"],
}  # fmt: skip
MAX_SIDE = 4096  # the largest side of a rendered image


class TooLarge(TesseraError):
    """A request would read more than the server allows (HTTP 413)."""

    status = 413


def parse_box(text: str, ndim: int) -> tuple[Any, ...]:
    """``"0:100,5,:"`` as a key: per dimension ``lo:hi``, ``i`` or ``:``; missing ones ``:``."""
    parts = [p.strip() for p in text.split(",")] if text.strip() else []
    if len(parts) > ndim:
        raise InvalidArgumentError(f"box {text!r} has {len(parts)} parts; the array has {ndim}")
    key: list[Any] = []
    for part in parts + [":"] * (ndim - len(parts)):
        try:
            if ":" in part:
                lo, _, hi = part.partition(":")
                key.append(slice(int(lo) if lo else None, int(hi) if hi else None))
            else:
                key.append(int(part))
        except ValueError:
            raise InvalidArgumentError(
                f"box {text!r}: {part!r} is not lo:hi, an index or ':'"
            ) from None
    return tuple(key)


def _array(db: Database, name: str, version: str | None) -> Any:
    return db.array(name, version=version) if version else db.array(name)


def _cells(arr: Any, key: tuple[Any, ...]) -> int:
    """How many cells ``key`` selects (before reading them)."""
    total = 1
    for part, dim, size in zip(key, arr.schema.dims, arr.extent(), strict=True):
        if isinstance(part, slice):
            lo = dim.start if part.start is None else part.start
            hi = dim.start + size if part.stop is None else part.stop
            total *= max(0, hi - lo)
    return total


def read_slab(
    db: Database, name: str, query: dict[str, str], fmt: str, options: Any
) -> tuple[bytes, str]:
    """A box of an array as ``.npy`` (one attribute), Arrow, JSON or a PNG image."""
    import numpy as np

    arr = _array(db, name, query.get("version"))
    key = parse_box(query.get("box", ""), arr.schema.ndim)
    cells = _cells(arr, key)
    if cells > options.max_slab_cells:
        raise TooLarge(
            f"array {name!r}: box {query.get('box', '')!r} holds {cells:,} cells; a request "
            f"may read {options.max_slab_cells:,}"
        )
    names = [a.name for a in arr.schema.attrs]
    wanted = [a for a in query.get("attrs", query.get("attr", "")).split(",") if a]
    unknown = [a for a in wanted if a not in names]
    if unknown:
        raise InvalidArgumentError(
            f"array {name!r} has no attribute {', '.join(unknown)} (it has {', '.join(names)})"
        )
    attrs = wanted or names
    if fmt in ("npy", "png") and len(attrs) != 1:
        raise InvalidArgumentError(
            f"array {name!r}: {fmt} holds one attribute; give attr= (one of {', '.join(names)})"
        )
    data = arr.read(key, attrs)
    if fmt == "npy":
        out = io.BytesIO()
        np.save(out, data[attrs[0]], allow_pickle=False)
        return out.getvalue(), "application/x-npy"
    if fmt == "png":
        return render_png(data[attrs[0]], query), "image/png"
    if fmt == "json":
        if cells > 1_000_000:
            raise TooLarge(f"array {name!r}: JSON holds a million cells at most; use npy or arrow")
        body = {
            "shape": list(next(iter(data.values())).shape),
            "attrs": {a: _finite(v).tolist() for a, v in data.items()},
        }
        return json.dumps(body).encode(), "application/json"
    import pyarrow as pa

    shape = next(iter(data.values())).shape
    table = pa.table({a: v.reshape(-1) for a, v in data.items()})
    table = table.replace_schema_metadata({"shape": json.dumps(list(shape))})
    return ipc_bytes(table), "application/vnd.apache.arrow.stream"


def _finite(values: np.ndarray) -> Any:
    """Values for JSON: NaN becomes None."""
    import numpy as np

    if values.dtype.kind == "f" and not np.isfinite(values).all():
        out = values.astype(object)
        out[np.isnan(values)] = None
        return out
    return values


def colormap(name: str) -> np.ndarray:
    """A 256 x 3 uint8 lookup table."""
    import numpy as np

    anchors = COLORMAPS.get(name)
    if anchors is None:
        raise InvalidArgumentError(f"cmap is one of {', '.join(COLORMAPS)}, not {name!r}")
    rgb = np.array([[int(h[i : i + 2], 16) for i in (1, 3, 5)] for h in anchors], dtype=float)
    at = np.linspace(0, 1, len(anchors))
    x = np.linspace(0, 1, 256)
    table = np.stack([np.interp(x, at, rgb[:, c]) for c in range(3)], axis=1)
    return np.rint(table).astype(np.uint8)


def _number(query: dict[str, str], name: str) -> float | None:
    text = query.get(name)
    if text in (None, ""):
        return None
    try:
        value = float(text)
    except ValueError:
        raise InvalidArgumentError(f"{name} is a number, not {text!r}") from None
    if not math.isfinite(value):
        raise InvalidArgumentError(f"{name} is a finite number, not {text!r}")
    return value


def render_png(values: np.ndarray, query: dict[str, str]) -> bytes:
    """A 2-D slice as a PNG: ``cmap``, ``vmin``/``vmax`` (default: the slice's range),
    at most ``max_side`` pixels a side (every n-th cell); NaN cells are transparent."""
    import numpy as np
    from PIL import Image

    if values.ndim != 2:
        raise InvalidArgumentError(
            f"an image is a 2-D slice; the box gives {values.ndim} dimensions "
            "(give an index, not a range, for each other dimension)"
        )
    given = _number(query, "max_side")
    side = int(given) if given is not None else 1024
    if given is not None and given != side:
        raise InvalidArgumentError(f"max_side is a whole number, not {given:g}")
    if not 1 <= side <= MAX_SIDE:
        raise InvalidArgumentError(f"max_side is 1 to {MAX_SIDE}, not {side}")
    step = max(1, math.ceil(max(values.shape) / side))
    view = values[::step, ::step].astype(np.float64)
    finite = np.isfinite(view)
    lo, hi = _number(query, "vmin"), _number(query, "vmax")
    if lo is not None and hi is not None and lo > hi:
        raise InvalidArgumentError(f"vmin ({lo:g}) is above vmax ({hi:g})")
    if lo is None:
        lo = float(view[finite].min()) if finite.any() else 0.0
    if hi is None:
        hi = float(view[finite].max()) if finite.any() else 1.0
    span = hi - lo if hi > lo else 1.0
    index = np.clip((np.where(finite, view, lo) - lo) / span * 255, 0, 255).astype(np.uint8)
    rgba = np.empty((*view.shape, 4), dtype=np.uint8)
    rgba[..., :3] = colormap(query.get("cmap", "gray"))[index]
    rgba[..., 3] = np.where(finite, 255, 0)
    out = io.BytesIO()
    Image.fromarray(rgba, "RGBA").save(out, format="PNG")
    return out.getvalue()


def read_cell(db: Database, name: str, at: str, version: str | None) -> dict[str, Any]:
    """The attributes of one cell (``at``: one index per dimension)."""
    arr = _array(db, name, version)
    try:
        key = tuple(int(p) for p in at.split(","))
    except ValueError:
        raise InvalidArgumentError(f"at is one index per dimension, not {at!r}") from None
    if len(key) != arr.schema.ndim:
        raise InvalidArgumentError(
            f"at {at!r} has {len(key)} indexes; array {name!r} has {arr.schema.ndim} dimensions"
        )
    values = arr.read(key)
    return {"at": list(key), "values": {k: v.item() for k, v in values.items()}}


# the query parameters of the stream views that are not fields' ranges
_STREAM_PARAMETERS = frozenset({"columns", "limit", "format", "x", "y", "kind", "width", "height"})


def _bounds(db: Database, name: str, query: dict[str, str]) -> tuple[Any, dict[str, Any]]:
    stream = db.stream(name)
    fields = [f.name for f in stream.descriptor.fields]
    bounds: dict[str, Any] = {}
    for key, text in query.items():
        if key not in fields and key not in _STREAM_PARAMETERS:
            # (an unknown field must not mean "no bound": every record would answer)
            raise InvalidArgumentError(
                f"stream {name!r} has no field {key!r} (its fields: {', '.join(fields)})"
            )
        if key in fields:
            lo, sep, hi = text.partition(":")
            if not sep:
                raise InvalidArgumentError(
                    f"{key}={text!r}: a range is lo:hi (either may be empty)"
                )
            try:
                bounds[key] = (float(lo) if lo else None, float(hi) if hi else None)
            except ValueError:
                raise InvalidArgumentError(f"{key}={text!r}: the ends are numbers") from None
    return stream, bounds


def stream_range(db: Database, name: str, query: dict[str, str], fmt: str) -> tuple[bytes, str]:
    """Records of a stream within per-field ranges (``field=lo:hi``), as Arrow or JSON."""

    stream, bounds = _bounds(db, name, query)
    columns = [c for c in query.get("columns", "").split(",") if c] or None
    table = stream.range(columns, **bounds)
    limit = query.get("limit")
    if limit is not None:
        if not limit.isdigit():
            raise InvalidArgumentError(f"limit is a whole number of records, not {limit!r}")
        table = table.slice(0, int(limit))
    if fmt == "json":
        body = {
            "columns": table.column_names,
            "rows": [list(r.values()) for r in table.to_pylist()],
        }
        return json.dumps(body, default=str).encode(), "application/json"
    return ipc_bytes(table), "application/vnd.apache.arrow.stream"


def stream_plot(db: Database, name: str, query: dict[str, str]) -> bytes:
    """A scatter (or line) plot of two fields of a stream's records in a range, as a PNG."""
    import numpy as np
    from PIL import Image, ImageDraw

    stream, bounds = _bounds(db, name, query)
    fields = [f.name for f in stream.descriptor.fields]
    x, y = query.get("x", fields[0]), query.get("y", fields[1] if len(fields) > 1 else fields[0])
    for axis in (x, y):
        if axis not in fields:
            raise InvalidArgumentError(f"stream {name!r} has no field {axis!r}")
    width = int(_number(query, "width") or 800)
    height = int(_number(query, "height") or 400)
    if not (64 <= width <= MAX_SIDE and 64 <= height <= MAX_SIDE):
        raise InvalidArgumentError(f"width and height are 64 to {MAX_SIDE}")
    table = stream.range([x, y], **bounds)
    xs = table.column(x).to_numpy().astype(np.float64)
    ys = table.column(y).to_numpy().astype(np.float64)
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    margin = 48
    draw.rectangle([margin, 8, width - 8, height - margin], outline="#888888")
    if len(xs):
        order = np.argsort(xs, kind="stable")
        xs, ys = xs[order], ys[order]
        x0, x1 = float(xs.min()), float(xs.max())
        y0, y1 = float(ys.min()), float(ys.max())
        px = margin + (xs - x0) / ((x1 - x0) or 1) * (width - 8 - margin)
        py = height - margin - (ys - y0) / ((y1 - y0) or 1) * (height - margin - 8)
        if query.get("kind", "scatter") == "line" and len(xs) > 1:
            draw.line(list(zip(px.tolist(), py.tolist(), strict=True)), fill="#1f77b4", width=1)
        else:
            step = max(1, len(px) // 200_000)  # at most 200k points drawn
            for u, v in zip(px[::step].tolist(), py[::step].tolist(), strict=True):
                draw.point((u, v), fill="#1f77b4")
        draw.text((margin, height - margin + 6), f"{x}: {x0:.6g} .. {x1:.6g}", fill="black")
        draw.text((4, 8), f"{y}: {y0:.6g} .. {y1:.6g}", fill="black")
    draw.text((width - 200, height - margin + 6), f"{len(xs):,} records", fill="black")
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()
