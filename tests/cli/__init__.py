"""Tests of the ``ebb`` command (``ebb_cli``): ``ebb plan``, ``ebb run``, ``ebb db``, the back-test's table and the
HTML report, run in process or as a subprocess, on the example and scenario files."""
