"""The test kit: what more than one test module uses, in one place. A test imports shared helpers from here (or
takes a fixture from its directory's conftest.py), never from another test module (tests/test_layout.py checks
it).

Pure (values only; the unit tests may use them):

- ``builders``: kubectl-shaped documents (nodes, pods, NodePools, catalogs, holds, PDBs, ...), snapshots and
  plans of them, and proposed decisions; for every test that needs a cluster.
- ``karpenter_suite``: the NodeClaim conditions and claimed nodes of the translated Karpenter suites.
- ``balanced_clusters``: clusters shaped like the Balanced consolidation RFC's examples.
- ``decisions``: a replace decision for the lifecycle's tests and its rows'.
- ``messages``: one valid message of each wire contract, and the ``ebb.cluster.objects`` message of a document.
- ``simulator_model``, ``simulator_cases``: model objects, and the random clusters the simulator's and the
  engine's properties draw.
- ``hostile``: a valid cluster touching every parser, and the strategy that makes its fields hostile.
- ``backtest``: the back-test's smallest cluster, trace and policy.
- ``eventbridge``: EventBridge events as the interruption-ingester's parser reads them.
- ``cli``: ``said``, a command's words without typer's error box (which wraps them at the terminal's width).

With I/O, for the service and integration tests:

- ``waiting``: ``eventually``, the one poller of every test that waits.
- ``planner``, ``executor``, ``decisions_api``, ``ingester``: each service's runner and test doubles on the
  in-memory bus (a running planner; a fake API server and a drainer on it; the API's token and client; a fake
  SQS queue).
- ``bus_conformance``: the one suite of the Bus contract, run on the in-memory bus (tests/service) and on Kafka
  (tests/integration).
- ``karpenter_fakes``: a fake Karpenter (NodeClaims, an audited node API).
- ``servers``: the addresses of the real servers the integration conftest starts (its fixtures' types).
- ``system``, ``restartable``, ``chaos``, ``karpenter_cluster``, ``kube_audit``: the integration harness (the
  services as processes, topic readers, databases, CRDs and KWOK nodes; servers a test may restart; the chaos
  run and its invariants; a real Karpenter; the API server's audit log and the rules ebb's requests keep).
"""
