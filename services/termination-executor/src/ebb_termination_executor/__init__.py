"""ebb termination-executor service (termination in docs/architecture.md#decision-semantics): consumes
approved ``DisruptionCommand``s from ``ebb.disruption.commands``, taints, drains (Eviction API) and deletes
the nodes, keeps the decision's state in the store and reports each step on ``ebb.disruption.events``.
``python -m ebb_termination_executor``. Replacements are launched through a launcher (KWOK nodes, or the
embedded mode's simulated cloud); without one a command with replacements fails."""
