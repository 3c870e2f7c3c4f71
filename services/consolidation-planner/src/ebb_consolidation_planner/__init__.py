"""ebb consolidation-planner service: the single leader that turns engine passes into validated, budgeted
disruption commands (DESIGN §1, §4)."""
