"""ebb's embedded mode: the services as tasks of one process on a simulated cluster (``ebb run``)."""
