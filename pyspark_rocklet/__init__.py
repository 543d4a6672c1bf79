"""Spark's discovery hook for the ``rocklet`` data source, and nothing else.

Spark registers the ``DefaultSource`` of every top-level ``pyspark_*`` package it finds
at session start, so this thin package is what makes ``format("rocklet")`` work without
a ``spark.dataSource.register`` call. The connector itself is :mod:`rocklet.spark`.
"""

from rocklet.spark import DefaultSource

__all__ = ["DefaultSource"]
