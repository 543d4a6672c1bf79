"""``rocklet admin``: mqadmin's verbs and flags, tables for people, ``--json`` for scripts.

Examples::

    rocklet admin clusterList -n 127.0.0.1:9876
    rocklet admin updateTopic -n 127.0.0.1:9876 -c DefaultCluster -t orders -r 8 -w 8
    rocklet admin consumerProgress -g billing --json

The name server comes from ``-n``, else the ``NAMESRV_ADDR`` environment variable (as
mqadmin), else ``127.0.0.1:9876``. Exit codes: 0 on success, 1 when the command failed
(unreachable name server or broker, unknown topic, group or cluster, a broker's
refusal; one line on standard error says which), 2 for bad arguments.
"""
