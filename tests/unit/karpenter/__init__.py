"""Karpenter v1.14.1's disruption test suites, translated case by case into ebb's table-driven tests.

One module per Go file (``test_<suite>.py``); every test or table row is named after its Karpenter case
(``It(...)``), and its docstring or comment says the Go file and the Describe/Context path (paths under
``sigs.k8s.io/karpenter@v1.14.1/pkg``). Each case is rebuilt as kubectl-shaped documents (tests.kit.builders)
and planned by ebb. Where ebb deliberately differs, the test asserts ebb's behaviour and names the row of
docs/decisions.md's "Differences from Karpenter v1.14"; the cases a static snapshot cannot express are counted,
with the reason, in docs/decisions.md ("Karpenter's test suites, translated").
"""
