"""The providers where ebb removes Nodes itself: ``none``, ``kwok`` and ``simulated`` (``ebb.adapters.provider``).

These are the clusters without a Karpenter that would act on ebb's nodes: the local and test clusters (KWOK
nodes), the embedded mode's simulated cluster, and a cluster where ebb only deletes (``none``). There ebb
takes Karpenter's part and uses Karpenter's names for it:

- the disruption taint is ``karpenter.sh/disrupted:NoSchedule``, the one pods and tools already know;
- retiring a drained node deletes the Node and then removes the ``karpenter.sh/termination`` finalizer
  the node may carry (there is no instance to terminate and no Karpenter to remove it) and ebb's own
  ``ebb.sh/termination`` (on the nodes ebb launched), so the Node goes at once and there is nothing to wait for;
- a Node ebb launched that someone else deletes (``kubectl delete node``) waits on ``ebb.sh/termination``
  until the executor's finalizer loop has drained it the same way (``ebb_termination_executor.finalizer``);
- a replacement is a Node a ``Launcher`` creates (``ebb.adapters.kube.launch``: ``KwokLauncher``, or the
  simulated cluster's cloud); without a launcher (``none``) a command with replacements fails;
- the instance is gone when the Node is (a KWOK or simulated node is its own instance: there is no Node
  left NotReady by a vanished instance to finalize);
- a node's terminationGracePeriod is its NodePool's ``spec.template.spec.terminationGracePeriod`` (there is no
  NodeClaim to copy it to), read through ``nodepools`` when given (none: no grace period).

These names must never be used next to a real Karpenter (``ebb.adapters.kube.karpenter`` is that provider).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from ebb.adapters.kube.launch import EBB_TERMINATION_FINALIZER, Launcher
from ebb.adapters.kube.node_api import NodeApi, guard, patch_until_done
from ebb.adapters.provider import Launched, grace_period_of
from ebb.contracts import Replacement
from ebb.core.launch import LaunchError
from ebb.core.model import LABEL_NODEPOOL, TAINT_DISRUPTED
from ebb.core.quantity import dollars

#: the disruption taint where ebb removes Nodes itself: Karpenter's
DISRUPTED_TAINT: Final[Mapping[str, str]] = {"key": TAINT_DISRUPTED, "effect": "NoSchedule"}
#: the finalizer Karpenter puts on its Nodes (and the local clusters' nodes carry); ebb removes it after deleting
#: a Node only where no Karpenter runs
TERMINATION_FINALIZER: Final = "karpenter.sh/termination"


#: the termination finalizers removed once a node is drained and deleted: Karpenter's (the local clusters' nodes
#: carry it) and ebb's own on the nodes it launched (``ebb.adapters.kube.launch.EBB_TERMINATION_FINALIZER``)
TERMINATION_FINALIZERS: Final = (TERMINATION_FINALIZER, EBB_TERMINATION_FINALIZER)


def finalizer_patch(node: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The JSON patch that removes the termination finalizers, or None when the node has none."""
    meta = node.get("metadata")
    finalizers = list((meta.get("finalizers") if isinstance(meta, Mapping) else None) or [])
    if not any(f in TERMINATION_FINALIZERS for f in finalizers):
        return None
    kept = [f for f in finalizers if f not in TERMINATION_FINALIZERS]
    return [*guard(node), {"op": "add", "path": "/metadata/finalizers", "value": kept}]


class NodeProvider:
    """Replacements are Nodes a ``Launcher`` creates (none: no replacements); a drained node is retired by
    deleting its Node and removing the termination finalizer."""

    disruption_taint: Mapping[str, str] = DISRUPTED_TAINT

    def __init__(self, name: str, nodes: NodeApi, launcher: Launcher | None = None, *,
                 nodepools: Callable[[str], Awaitable[Mapping[str, Any] | None]] | None = None) -> None:
        #: none, kwok or simulated
        self.name = name
        self.nodes = nodes
        self.launcher = launcher
        #: reads a NodePool by name (its terminationGracePeriod); None: nodes have no grace period
        self.nodepools = nodepools

    @property
    def launches(self) -> bool:
        return self.launcher is not None

    def _launcher(self) -> Launcher:
        if self.launcher is None:
            raise LaunchError(f"the {self.name} provider launches no replacements")
        return self.launcher

    async def launch(self, name: str, replacement: Replacement, *, decision_id: str) -> Launched:
        spec = await self._launcher().launch(name, replacement, decision_id=decision_id)
        return Launched(spec.name,
                        f"{spec.instance_type} ({spec.capacity_type}) in {spec.zone} at ${dollars(spec.price)}/h")

    async def ready(self, name: str) -> bool:
        return await self._launcher().ready(name)

    async def delete_replacement(self, name: str) -> None:
        await self._launcher().delete(name)

    async def cannot_retire(self, node: str) -> str | None:
        return None  # any Node can be deleted

    async def retire(self, node: str) -> str | None:
        existed = await self.nodes.delete_node(node)
        await patch_until_done(self.nodes, node, finalizer_patch)
        return "node deleted" if existed else None

    async def retired(self, node: str) -> bool:
        return True  # deleting the Node (its finalizer removed) is all there is: no instance to wait for

    async def instance_gone(self, node: str) -> bool:
        return await self.nodes.read_node(node) is None

    async def termination_grace_period(self, node: str) -> float | None:
        if self.nodepools is None:
            return None
        obj = await self.nodes.read_node(node)
        labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
        pool_name = labels.get(LABEL_NODEPOOL)
        if not pool_name:
            return None
        pool = await self.nodepools(str(pool_name))
        template = (((pool or {}).get("spec") or {}).get("template") or {}).get("spec")
        return grace_period_of(template, f"NodePool {pool_name}")
