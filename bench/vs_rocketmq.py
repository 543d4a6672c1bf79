"""Rocklet beside Apache RocketMQ 4.x: a thin alias of ``rocklet bench vs-rocketmq``.

Usage: python bench/vs_rocketmq.py --rocketmq-home DIR [--pairs 2] [--seconds 30] ...

Every option is the command's (``rocklet bench vs-rocketmq --help``); the implementation
is :mod:`rocklet.benchsuite.vsrmq`. Kept so the commands in older BENCHMARKS.md entries
still have a home.
"""

from __future__ import annotations

import sys

from rocklet.cli import main

if __name__ == "__main__":
    raise SystemExit(main(["bench", "vs-rocketmq", *sys.argv[1:]]))
