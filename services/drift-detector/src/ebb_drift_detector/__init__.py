"""ebb drift-detector service: ebb.cluster.objects in, Drifted / Expired / Empty / Consolidatable findings
out on ebb.node.findings, and the ebb.sh/drifted annotation on drifted Nodes (DESIGN §1-§2)."""
