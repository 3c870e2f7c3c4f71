"""ebb cluster-watcher service (docs/architecture.md): lists and watches the cluster's Nodes, Pods,
PodDisruptionBudgets, DaemonSets, PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes, Namespaces,
NodePools, NodeClaims and ebb's own kinds (``ebb.adapters.kube.kinds.KINDS``) and publishes each trimmed object on
``ebb.cluster.objects`` (a tombstone on delete). ``python -m ebb_cluster_watcher``."""
