"""ebb: remove Kubernetes nodes that are no longer worth keeping, without hurting their workloads."""

__version__ = "0.1.0"
