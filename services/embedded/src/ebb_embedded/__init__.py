"""ebb's embedded mode: the services as tasks of one process on a simulated cluster (``ebb run``)."""

#: what a back-test's worker process imports before it is given a run: the server the workers are forked from
#: (``ebb_embedded.backtest.run_backtests``) imports them once. ``ebb_embedded.backtest`` imports the rest, the
#: embedded mode, only where a run starts, so the process that hands out the runs and shows their progress (``ebb
#: backtest``'s) is ready without it; this list is here so that the server can be started before even that module
#: is imported
BACKTEST_WORKER_MODULES = ["ebb_embedded.backtest", "ebb_embedded.runner", "ebb_embedded.workload",
                           "ebb_embedded.provisioner"]
