"""Table-driven unit tests of the pure core (``ebb.core``) and the pure wire contracts (``ebb.contracts``): nothing
here imports an adapter, a service, the embedded mode, the CLI or the benchmarks, and of the tests only the pure
modules of tests/kit/ (tests/test_layout.py checks it). Tests of what does I/O live beside it: tests/adapters,
tests/service, tests/cli, tests/benchmarks, tests/deploy, tests/integration."""
