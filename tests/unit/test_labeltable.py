"""`LabelTable`: a requirement or a selector evaluated over many label sets at once, as `ebb.core.labels` decides it
for one (In and NotIn of no, one or several values present; a label missing; a selector of several labels)."""

from __future__ import annotations

import pytest

from ebb.core.labels import requirements_match
from ebb.core.model import Requirement
from ebb.core.simulator.labeltable import LabelTable

LABELS = [{"zone": "a", "tier": "x"}, {"zone": "b"}, {"zone": "c", "tier": "y"}, {}, {"zone": "a", "tier": "y"}]


@pytest.mark.parametrize("req", [
    Requirement("zone", "In", ("a",)),
    Requirement("zone", "In", ("a", "c")),
    Requirement("zone", "In", ("z",)),
    Requirement("zone", "In", ("z", "b")),
    Requirement("zone", "NotIn", ("a",)),
    Requirement("zone", "NotIn", ("a", "b")),
    Requirement("zone", "NotIn", ("z",)),
    Requirement("tier", "In", ("y",)),
    Requirement("tier", "Exists", ()),
    Requirement("tier", "DoesNotExist", ()),
])
def test_a_requirement_matches_the_label_sets_labels_matches_one_by_one(req: Requirement) -> None:
    got = LabelTable(LABELS).requirement(req).tolist()
    assert got == [requirements_match((req,), labels) for labels in LABELS]


@pytest.mark.parametrize(("selector", "expected"), [
    ({"zone": "a"}, [True, False, False, False, True]),
    ({"zone": "a", "tier": "y"}, [False, False, False, False, True]),
    ({"tier": "z"}, [False] * 5),
    ({}, [True] * 5),
])
def test_a_selector_is_every_label_of_it_kept_once_per_table(selector: dict[str, str], expected: list[bool]) -> None:
    table = LabelTable(LABELS)
    got = table.selector(selector)
    assert got.tolist() == expected
    assert table.selector(dict(selector)) is got and not got.flags.writeable  # kept: callers combine into copies
