"""``rocklet bench vs-rocketmq``: Rocklet beside a RocketMQ 4.x release, with its own tools.

The release's name server and broker are started straight from its ``lib/`` jars
(:mod:`.release`, :mod:`.servers`), the release's Java benchmark Producer and Consumer
(or the official C++ client, :mod:`.cppclient`) drive each system in turn
(:mod:`.measure`), and :mod:`.results` turns the runs into
tables, per-pair ratios and medians. :mod:`.runner` orders the runs (ABBA) and
:mod:`.cli` is the command line. See ``BENCHMARKS.md`` for the figures.
"""
