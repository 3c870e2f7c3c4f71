"""ebb termination-executor service (termination in docs/architecture.md#decision-semantics): consumes
approved ``DisruptionCommand``s from ``ebb.disruption.commands``, taints, drains (Eviction API) and retires
the nodes, keeps the decision's state in the store and reports each step on ``ebb.disruption.events``.
``python -m ebb_termination_executor``. Replacements are launched and nodes retired through the cluster's
provider (``ebb.adapters.provider``: NodeClaims next to a real Karpenter, KWOK nodes, or the embedded mode's
simulated cloud); with ``none`` a command with replacements fails."""
