"""ebb consolidation-planner service: the single leader that turns engine passes into validated, budgeted
disruption commands (docs/architecture.md)."""
