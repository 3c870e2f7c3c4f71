"""Vectorised label matching: evaluate a node selector requirement against many label sets at once.

The simulator asks "which of these 2,000 nodes (or 2,000 instance-type offerings) satisfy this pod's
nodeSelector and node affinity?" once per pod class. Each label key becomes an array of value codes, so
a requirement is one numpy comparison instead of a Python loop over nodes. The operators mean what
`ebb.core.labels` says (an integer operator, Gt, Lt, Gte or Lte, is decided once per distinct value).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ebb.core.labels import integer_bound
from ebb.core.model import FIELD_NODE_NAME, Requirement
from ebb.core.quantity import parse_go_int
from ebb.core.simulator.arrays import BoolArray, IntArray


class LabelTable:
    """Label sets of a fixed sequence of objects, with per-key value codes built on first use."""

    def __init__(self, label_sets: Sequence[Mapping[str, str]], *,
                 like: tuple[LabelTable, IntArray, Sequence[int]] | None = None,
                 names: Callable[[], Sequence[str]] | None = None) -> None:
        """``like``: (a table, the row of it each object's labels are, the objects that are none of its rows): the
        columns that table has made are made here from its codes, not from every object's labels. ``names``: the
        objects' names (nodes'), made when first asked: the values of `FIELD_NODE_NAME`, which a node selector's
        ``matchFields`` reads (without them, no object has one)."""
        self._labels = label_sets
        self._size = len(label_sets)
        self._names = names
        self._keys: dict[str, tuple[IntArray, dict[str, int], list[str]]] = {}
        #: requirement -> its result (read-only): replicas and Jobs of one workload ask the same ones
        self._matched: dict[Requirement, BoolArray] = {}
        #: a selector's items -> its result (read-only)
        self._selected: dict[tuple[tuple[str, str], ...], BoolArray] = {}
        if like is not None:
            table, rows, new = like
            for key, column in list(table._keys.items()):  # a copy in C: the table's owner may add one meanwhile
                self._keys[key] = self._taken(key, column, rows, new)

    def _taken(self, key: str, column: tuple[IntArray, dict[str, int], list[str]], rows: IntArray,
               new: Sequence[int]) -> tuple[IntArray, dict[str, int], list[str]]:
        """`column` of ``key`` made from another table's ``column``: its codes at ``rows``, the ``new`` objects' values
        coded after its values, then every code renumbered in the order values first come here, as `column` codes
        them."""
        codes, lookup, values = column
        codes = codes[rows]
        if len(new):
            lookup, values = dict(lookup), list(values)
            code_of = lookup.setdefault
            names = self._names() if key == FIELD_NODE_NAME and self._names is not None else None
            for i in new:
                value = names[i] if names is not None else self._labels[i].get(key)
                codes[i] = -1 if value is None else code_of(value, len(values))
                if len(values) < len(lookup):
                    values.append(value)  # type: ignore[arg-type]
        in_order = list(dict.fromkeys(codes.tolist()))  # the codes in the order they first come, found in C
        if -1 in in_order:
            in_order.remove(-1)
        renumber = np.full(len(values) + 1, -1, dtype=np.int64)  # the trailing -1: code -1 stays -1
        renumber[in_order] = np.arange(len(in_order), dtype=np.int64)
        ordered = [values[c] for c in in_order]
        return renumber[codes], {value: c for c, value in enumerate(ordered)}, ordered

    def labels_of(self, index: int) -> Mapping[str, str]:
        """The labels of object ``index``."""
        return self._labels[index]

    def __len__(self) -> int:
        return self._size

    def column(self, key: str) -> tuple[IntArray, dict[str, int], list[str]]:
        """(codes per object, value -> code, code -> value); code -1 where the label is missing."""
        hit = self._keys.get(key)
        if hit is None:
            # codes in the order values first come: a value's code is the size of ``lookup`` when it is first seen
            lookup: dict[str, int] = {}
            code_of = lookup.setdefault
            values = (self._names() if key == FIELD_NODE_NAME and self._names is not None
                      else [labels.get(key) for labels in self._labels])
            codes = np.fromiter((-1 if value is None else code_of(value, len(lookup)) for value in values),
                                dtype=np.int64, count=self._size)
            hit = self._keys[key] = (codes, lookup, list(lookup))
        return hit

    def requirement(self, req: Requirement) -> BoolArray:
        """Which objects satisfy ``req`` (read-only: computed once per requirement and shared)."""
        hit = self._matched.get(req)
        if hit is None:
            hit = self._matched[req] = self._requirement(req)
            hit.flags.writeable = False
        return hit

    def _requirement(self, req: Requirement) -> BoolArray:
        codes, lookup, values = self.column(req.key)
        op = req.operator
        if op in ("In", "NotIn"):
            wanted = [lookup[v] for v in req.values if v in lookup]
            inside: BoolArray
            if len(wanted) == 1:
                inside = codes == wanted[0]  # most ask one value: one comparison, not np.isin's set-up
            elif wanted:
                inside = np.isin(codes, np.array(wanted, dtype=np.int64))
            else:
                inside = np.zeros(self._size, dtype=bool)
            return inside if op == "In" else ~inside
        if op == "Exists":
            return codes >= 0
        if op == "DoesNotExist":
            return codes < 0
        bounded = integer_bound(req)  # Gt, Lt, Gte, Lte: once per distinct value, then per object by its code
        if bounded is not None:
            compare, bound = bounded
            numbers = [parse_go_int(v) for v in values]
            per_code = np.array([n is not None and compare(n, bound) for n in numbers] + [False], dtype=bool)
            return np.asarray(per_code[codes], dtype=bool)  # code -1 picks the trailing False
        return np.zeros(self._size, dtype=bool)

    def requirements(self, reqs: Sequence[Requirement]) -> BoolArray:
        out = np.ones(self._size, dtype=bool)
        for req in reqs:
            out &= self.requirement(req)
        return out

    def terms(self, terms: Sequence[Sequence[Requirement]] | None) -> BoolArray:
        """OR of terms, each an AND of requirements; None matches everything."""
        if terms is None:
            return np.ones(self._size, dtype=bool)
        out = np.zeros(self._size, dtype=bool)
        for term in terms:
            out |= self.requirements(term)
        return out

    def admitted(self, selector: Mapping[str, str], terms: Sequence[Sequence[Requirement]]) -> BoolArray:
        """Which objects meet ``terms`` (OR of ANDs; no terms: every object) and have every label of ``selector``: a
        node filter of a topology spread (a new array: the caller may keep or change it)."""
        ok = self.terms(terms) if terms else np.ones(self._size, dtype=bool)
        return ok & self.selector(selector) if selector else ok

    def selector(self, selector: Mapping[str, str]) -> BoolArray:
        """Which objects have every label of ``selector`` (read-only: computed once per selector and shared)."""
        key = tuple(selector.items())
        hit = self._selected.get(key)
        if hit is None:
            hit = self._selected[key] = self.requirements([Requirement(k, "In", (v,)) for k, v in key])
            hit.flags.writeable = False
        return hit
