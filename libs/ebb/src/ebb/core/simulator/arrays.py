"""The simulator's array types and the numpy calls its inner loops make without numpy's Python wrappers.

An array's ``.any()``, ``.all()``, ``.max()`` and ``.min()`` and ``np.ones`` run a Python-level wrapper before the C
reduction; on masks of a few dozen offerings that wrapper is a quarter of the call, and the scheduler asks them on
every placement. These call the ufuncs' reductions (in C) directly, with the same results.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
ObjectArray = npt.NDArray[np.object_]


def any_set(values: np.ndarray[Any, Any]) -> bool:
    """``values.any()`` without numpy's Python-level reduction wrapper (a quarter of its time on a mask of a few
    dozen offerings): the simulator's innermost loops ask it of such small masks."""
    return bool(_count_nonzero(values))


def _c_count_nonzero() -> Any:
    """``np.count_nonzero``'s C function, without its dispatcher and Python wrapper (two frames a call); numpy's
    public one where a numpy keeps it elsewhere."""
    try:
        from numpy._core import multiarray
    except ImportError:  # pragma: no cover - numpy before 2.0
        return np.count_nonzero
    return getattr(multiarray, "count_nonzero", np.count_nonzero)


_count_nonzero = _c_count_nonzero()
#: ``values.min()`` and ``values.max()`` (with ``axis=``), as the ufuncs' reductions
reduce_min = np.minimum.reduce
reduce_max = np.maximum.reduce
_all_along = np.logical_and.reduce


def all_of_rows(values: BoolArray) -> BoolArray:
    """``values.all(axis=1)``: per row of a 2-D mask, whether every entry is set."""
    rows: BoolArray = _all_along(values, axis=1)
    return rows


def trues(n: int) -> BoolArray:
    """``np.ones(n, dtype=bool)``: a new mask of ``n`` set entries."""
    mask: BoolArray = np.empty(n, dtype=bool)
    mask.fill(True)
    return mask
