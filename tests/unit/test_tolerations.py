"""Whether a toleration tolerates a taint, as Kubernetes' ``Toleration.ToleratesTaint`` reads it with the comparison
operators on (Karpenter's ``Taints.ToleratesPod`` asks so): ``Equal`` (or no operator) compares the values, ``Exists``
any value, ``Gt`` and ``Lt`` the taint's value against the toleration's as decimal integers (a value that is not one
tolerates nothing), and an operator Kubernetes does not know tolerates nothing. ebb read ``Gt`` and ``Lt`` as
``Equal``, so it moved a pod onto a node it does not tolerate (``gen Gt 3`` against ``gen=3``).
"""

from __future__ import annotations

import pytest

from ebb.core.labels import tolerates
from ebb.core.model import Taint, Toleration

TAINT = Taint("gen", "5", "NoSchedule")


@pytest.mark.parametrize(("toleration", "tolerated"), [
    (Toleration("gen", "Equal", "5", "NoSchedule"), True),
    (Toleration("gen", "", "5", ""), True),
    (Toleration("gen", "Equal", "3", ""), False),
    (Toleration("gen", "Exists", "", ""), True),
    (Toleration("", "Exists", "", ""), True),
    (Toleration("gen", "Gt", "3", ""), True),  # 5 > 3
    (Toleration("gen", "Gt", "5", ""), False),
    (Toleration("gen", "Lt", "7", ""), True),  # 5 < 7
    (Toleration("gen", "Lt", "5", ""), False),
    (Toleration("gen", "Gt", "03", ""), False),  # not a decimal integer as Kubernetes writes one
    (Toleration("gen", "Gt", "+3", ""), False),
    (Toleration("gen", "Gt", "x", ""), False),
    (Toleration("gen", "Gte", "5", ""), False),  # no such toleration operator
    (Toleration("gen", "Gt", "3", "NoExecute"), False),  # another effect
    (Toleration("other", "Gt", "3", ""), False),
])
def test_a_toleration_tolerates_a_taint_as_kubernetes_reads_it(toleration: Toleration, tolerated: bool) -> None:
    assert tolerates([toleration], TAINT) is tolerated


def test_a_taint_whose_value_is_not_an_integer_is_tolerated_by_no_comparison() -> None:
    assert not tolerates([Toleration("gen", "Gt", "3", "")], Taint("gen", "new", "NoSchedule"))
    assert tolerates([Toleration("gen", "Lt", "0", "")], Taint("gen", "-4", "NoSchedule"))
