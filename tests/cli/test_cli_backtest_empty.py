"""`ebb backtest --empty`: the kinds a start from nothing keeps, and those that go with the nodes."""

from __future__ import annotations

from ebb_cli.backtest_cmd import EMPTY_KEEPS
from ebb_embedded.cluster import KINDS


def test_an_empty_start_keeps_the_configuration_and_storage_and_nothing_of_a_node() -> None:
    """A CSINode is its node's (named after it, owned by it): an --empty start has no nodes, so no CSINodes either;
    claims, volumes and classes outlive the nodes and stay; everything kept is a kind the simulated cluster holds."""
    assert set(EMPTY_KEEPS) <= set(KINDS)
    assert set(KINDS) - set(EMPTY_KEEPS) == {"Node", "Pod", "NodeClaim", "CSINode"}
