"""Tests of the benchmarks' own code (``bench``): the workload generators and the committed catalog they make,
the machine line, the peer comparison's timelines and the work counters; not the benchmarks themselves
(``make bench``)."""
