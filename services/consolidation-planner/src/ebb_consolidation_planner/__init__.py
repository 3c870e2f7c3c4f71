"""ebb consolidation-planner service: settings and composition root (the service's handlers arrive with issue 5)."""
