"""ebb termination-executor service (DESIGN §1, §4 Termination): consumes approved ``DisruptionCommand``s
from ``ebb.disruption.commands``, taints, drains (Eviction API) and deletes the nodes, keeps the decision's
state in the store and reports each step on ``ebb.disruption.events``. ``python -m ebb_termination_executor``.
Replacement launching is not implemented yet: a command with replacements fails."""
