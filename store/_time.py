"""Local-time helpers of the store: retention's hour and index file names."""

from __future__ import annotations

import time

__all__ = ["file_time_name", "local_hour"]


def local_hour(now_ms: int) -> int:
    """Hour of the day in local time, as RocketMQ's ``deleteWhen`` check uses.

    Args:
        now_ms: Wall-clock time, ms.

    Returns:
        0..23.
    """
    return time.localtime(now_ms / 1000).tm_hour


def file_time_name(now_ms: int) -> str:
    """Index file name for a creation time: ``yyyyMMddHHmmssSSS`` in local time.

    Args:
        now_ms: Wall-clock time, ms.

    Returns:
        17 digits, as RocketMQ's ``UtilAll.timeMillisToHumanString``.
    """
    return time.strftime("%Y%m%d%H%M%S", time.localtime(now_ms / 1000)) + f"{now_ms % 1000:03d}"
