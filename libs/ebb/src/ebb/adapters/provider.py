"""Where ebb meets machines: the termination-executor's ``Provider`` (docs/architecture.md#decision-semantics).

The executor drives the steps of every disruption itself, in one order: taint → pre-spin (launch the
replacements, wait until they are ready) → drain (ebb's own Eviction API rules: ``ebb.core.drain``, carried
out by ``ebb.adapters.kube.drain``) → retire. What those steps mean on a given cluster is the provider's:

- ``disruption_taint``: the taint ebb puts on a node it disrupts (the drain leaves pods that tolerate it);
- ``launch``, ``ready``, ``delete_replacement``: a replacement, named from the decision so that a command
  resumed after a crash finds what it launched (a second launch is no second machine);
- ``cannot_retire``: why a node cannot be retired here at all (asked before anything is done, so such a
  command fails with nothing tainted or evicted);
- ``retire``: ask for a drained node and its instance to be removed; ``retired``: whether they are gone;
- ``instance_gone``: whether the node's instance is gone already (an interrupted node the cloud took away):
  nothing is tainted or drained then, the node is reported terminated;
- ``termination_grace_period``: the node's ``terminationGracePeriod`` (Karpenter's: its NodeClaim's, copied
  from its NodePool's ``spec.template.spec.terminationGracePeriod``; where there is no NodeClaim, its NodePool's),
  which bounds its drain (``ebb.adapters.kube.drain``), or None: PDBs are waited for until the eviction deadline.

The implementations (``EBB_TERMINATION_EXECUTOR_PROVIDER``):

- ``none``: ``ebb.adapters.kube.node_provider.NodeProvider`` without a launcher. No replacements (a command
  with replacements fails); a node is retired by deleting the Node and removing the
  ``karpenter.sh/termination`` finalizer; taint ``karpenter.sh/disrupted``.
- ``kwok``: ``NodeProvider`` with ``ebb.adapters.kube.launch.KwokLauncher``: replacements are KWOK Nodes;
  otherwise as ``none``.
- ``simulated``: ``NodeProvider`` with the embedded mode's ``SimulatedCluster``: replacements are simulated
  Nodes; otherwise as ``none``.
- ``karpenter``: ``ebb.adapters.kube.karpenter.KarpenterProvider``: replacements are ``karpenter.sh/v1``
  NodeClaims Karpenter launches; a node is retired by deleting its NodeClaim and waiting until Karpenter has
  removed it and the Node; taint ``ebb.sh/disrupted``.

Next to a real Karpenter ebb never adds or removes a ``karpenter.sh/`` taint or finalizer: Karpenter's
disruption controller removes ``karpenter.sh/disrupted`` from every node it is not disrupting itself, and
removing its ``karpenter.sh/termination`` finalizer would skip the instance's termination.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ebb.contracts import Replacement
from ebb.core.quantity import QuantityError, parse_duration

log = logging.getLogger("ebb.provider")


def grace_period_of(spec: Any, where: str) -> float | None:
    """The ``terminationGracePeriod`` of a NodeClaim's spec or a NodePool's template spec, in seconds; None
    when unset or "Never". A value that is not a duration is ignored with a warning (``where`` names it)."""
    value = spec.get("terminationGracePeriod") if isinstance(spec, Mapping) else None
    if value is None:
        return None
    try:
        return parse_duration(value)
    except QuantityError as e:
        log.warning("%s: terminationGracePeriod ignored: %s", where, e)
        return None


class RetireError(RuntimeError):
    """A node cannot be retired (no NodeClaim in ``karpenter`` mode): the command fails for it."""


@dataclass(frozen=True, slots=True)
class Launched:
    """A replacement asked for: its name (a Node's or a NodeClaim's) and what it is, in words (the
    ``Launching`` event says ``launching <name>: <summary>``)."""

    name: str
    summary: str


class Provider(Protocol):
    """How the termination-executor launches, waits for, retires and recognises machines on one cluster."""

    @property
    def name(self) -> str:
        """none, kwok, simulated or karpenter (logs and messages)."""
        ...

    @property
    def disruption_taint(self) -> Mapping[str, str]:
        """The taint (``key`` and ``effect``) ebb puts on a node it disrupts and removes on rollback."""
        ...

    @property
    def launches(self) -> bool:
        """Whether replacements can be launched at all (False: a command with replacements fails)."""
        ...

    async def launch(self, name: str, replacement: Replacement, *, decision_id: str) -> Launched:
        """Ask for the replacement ``name`` (nothing new when it exists); LaunchError when it cannot be."""
        ...

    async def ready(self, name: str) -> bool:
        """Whether the replacement is ready for pods; False while it boots; LaunchError when it can no longer
        become ready (its NodeClaim is gone)."""
        ...

    async def delete_replacement(self, name: str) -> None:
        """Remove a replacement again (rollback); nothing when it is gone."""
        ...

    async def cannot_retire(self, node: str) -> str | None:
        """Why ``node`` cannot be retired by this provider, or None when it can (or is gone already)."""
        ...

    async def retire(self, node: str) -> str | None:
        """Ask for the drained ``node`` and its instance to be removed; what was done, in words (the
        ``Terminated`` event's message once ``retired``), or None when it was gone already. RetireError when
        it cannot be retired."""
        ...

    async def retired(self, node: str) -> bool:
        """Whether a node ``retire`` was asked for is gone, with its instance."""
        ...

    async def instance_gone(self, node: str) -> bool:
        """Whether the node's instance is gone already (there is nothing left to disrupt)."""
        ...

    async def termination_grace_period(self, node: str) -> float | None:
        """The node's terminationGracePeriod in seconds, None when it has none."""
        ...
