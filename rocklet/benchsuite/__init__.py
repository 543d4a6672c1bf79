"""``rocklet bench``: Rocklet beside its peers and the machine's limits, in one run.

See :mod:`rocklet.benchsuite.runner` for what a run does and ``BENCHMARKS.md`` for the
figures and how to read them.
"""
