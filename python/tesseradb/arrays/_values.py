"""Values going into an array: checked against the attribute's type, never wrapped.

A write compares every value with the target type's bounds instead of trusting a
wrapping cast: 2**63 into int64, -1 into uint64, a fraction or NaN into an integer,
an integer a float64 would change are refused with an :class:`ArrayDtypeError`
naming the attribute and the value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tesseradb.errors import ArrayDtypeError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["fit_values", "kept_by_cast"]


def fit_values(values: Any, attr: Any, shape: tuple[int, ...], where: str) -> np.ndarray:
    """``values`` as an array of ``attr``'s type and ``shape``; error if anything would be lost.

    Scalars broadcast. A cast that is not safe for the types is allowed only
    when every value survives it exactly (an int64 array of small numbers
    into int32). Masked cells of a numpy masked array become the fill value
    of a nullable attribute.
    """
    import numpy as np

    dtype = attr.numpy_dtype
    if isinstance(values, np.ma.MaskedArray):
        if values.mask is not np.ma.nomask and values.mask.any():
            if not attr.nullable:
                raise ArrayDtypeError(
                    f"{where}: masked (NULL) cells given for attribute {attr.name!r}, which is not nullable"
                )
            values = values.filled(attr.fill)
        else:
            values = values.data
    arr = np.asarray(values)
    if arr.dtype.kind not in "biuf":
        raise ArrayDtypeError(
            f"{where}: attribute {attr.name!r} takes {attr.dtype} values, not {arr.dtype}"
        )
    if arr.shape != shape:
        if arr.ndim == 0:
            arr = np.broadcast_to(arr, shape)
        elif arr.size == int(np.prod(shape)) and tuple(n for n in arr.shape if n != 1) == tuple(
            n for n in shape if n != 1
        ):
            arr = arr.reshape(shape)
        else:
            raise ArrayDtypeError(
                f"{where}: attribute {attr.name!r} got values of shape {arr.shape} for a box of shape {shape}"
            )
    if arr.dtype == dtype:
        return arr
    # (numpy calls int64 into float64 "safe", though 2**53 + 1 does not survive it)
    widening_float = arr.dtype.kind in "iu" and np.dtype(dtype).kind == "f"
    if np.can_cast(arr.dtype, dtype, casting="safe") and not widening_float:
        return arr.astype(dtype)
    kept = kept_by_cast(arr, dtype)
    if not bool(np.all(kept)):
        bad = np.argwhere(~kept)[0]
        raise ArrayDtypeError(
            f"{where}: attribute {attr.name!r} is {attr.dtype}; value {arr[tuple(bad)].item()!r} at "
            f"{tuple(int(i) for i in bad)} of the {arr.dtype} input would change (no lossy casts)"
        )
    with np.errstate(all="ignore"):
        return arr.astype(dtype)


def kept_by_cast(arr: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    """Per value of ``arr``, whether casting it to ``dtype`` keeps it exactly.

    Integers are compared with the target's bounds (a round trip through a
    wrapping cast would not tell: uint64 2**63 becomes int64 -2**63 and comes
    back the same); floats into integers must be whole and within the bounds
    (the upper bound, a power of two, is exact as a float); anything into a
    float must come back the same (NaN as NaN).
    """
    import numpy as np

    target = np.dtype(dtype)
    if arr.dtype.kind == "b":
        return np.ones(arr.shape, dtype=bool)
    if target.kind in "iu":
        info = np.iinfo(target)
        if arr.dtype.kind in "iu":
            if arr.size == 0:
                return np.ones(arr.shape, dtype=bool)
            source = np.iinfo(arr.dtype)
            kept = np.ones(arr.shape, dtype=bool)
            if source.min < info.min:
                kept &= arr >= (info.min if info.min >= source.min else source.min)
            if source.max > info.max:
                kept &= arr <= np.array(info.max).astype(arr.dtype)
            return kept
        with np.errstate(all="ignore"):
            whole = np.isfinite(arr) & (np.floor(arr) == arr)
            return whole & (arr >= float(info.min)) & (arr < float(int(info.max) + 1))
    if target.kind == "b":
        return (arr == 0) | (arr == 1)
    with np.errstate(all="ignore"):
        cast = arr.astype(target)
        if arr.dtype.kind in "iu":
            # back into the source's integers only where the float is within their range
            unsigned = arr.dtype.kind == "u"
            low, high = (0.0, 2.0**64) if unsigned else (-(2.0**63), 2.0**63)
            fits = np.isfinite(cast) & (cast >= low) & (cast < high)
            back = np.where(fits, cast, 0).astype(np.uint64 if unsigned else np.int64)
            return fits & (back == arr)
        back = cast.astype(arr.dtype)
        return (back == arr) | (np.isnan(arr) & np.isnan(back))
