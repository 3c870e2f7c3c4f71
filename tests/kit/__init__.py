"""The test kit: what more than one test module uses, in one place. A test imports shared helpers from here (or
takes a fixture from its directory's conftest.py), never from another test module.

Modules, by what they hold:

- ``builders``: kubectl-shaped documents (nodes, pods, NodePools, catalogs, holds, ...) and plan helpers for the
  pure core's tests and every test that needs a cluster; pure.
- ``simulator_model``: ``ebb.core.model`` objects for the simulator's property and checker tests; pure.
- ``simulator_cases``: the random clusters the simulator and engine properties draw from; pure.
- ``karpenter_suite``: the NodeClaim conditions and claimed nodes of the translated Karpenter suites; pure.
- ``messages``: one message of each wire contract, for the contract and fuzzing tests; pure.
- ``hostile``: hostile cluster documents (strategies) for the fuzzing of the parser and the handlers.
- ``waiting``: ``eventually``, the one poller of every test that waits.
- ``planner``, ``executor``, ``decisions_api``, ``ingester``, ``backtest``: each service's test doubles and
  runners on the in-memory bus (a running planner, a fake API server and drainer, the API's client tokens, a
  fake SQS, the back-test's clusters and traces).
- ``bus_conformance``: the one suite of the Bus contract, run on the in-memory bus (tests/service) and on
  Kafka (tests/integration).
- ``karpenter_fakes``: a fake Karpenter (NodeClaims, audited node API) for the executor next to Karpenter.
- ``servers``: the addresses of the real servers the integration conftest starts (the fixtures' types).
- ``system``, ``restartable``, ``chaos``, ``karpenter_cluster``, ``kube_audit``: the integration harness (the
  services as processes, topic readers, databases, CRDs and KWOK nodes; servers a test may restart; the chaos
  run and its invariants; a real Karpenter; the API server's audit log and the rules ebb's requests keep).

tests/unit/ holds the tests of the pure core and the pure contracts only: a test there imports nothing from
``ebb.adapters``, a service, ``ebb_embedded``, ``ebb_cli`` or ``bench``, and only the pure modules of this kit
(tests/test_layout.py checks it).
"""
