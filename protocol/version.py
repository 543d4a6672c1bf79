"""RocketMQ's version numbers: the ``version`` of a command is an ``MQVersion.Version`` ordinal.

:func:`version_desc` names one as ``MQVersion.getVersionDesc`` does (401 is
``V4_9_4``); brokers report their own that way (``brokerVersionDesc``) and mqadmin
prints clients' that way (``producer``, ``consumerConnection``, ``producerConnection``).
"""

from __future__ import annotations

from typing import Final

__all__ = ["version_desc"]


def _names() -> tuple[str, ...]:
    """``MQVersion.Version.values()`` of RocketMQ 4.9.4, in order (613 names)."""
    names = ["V3_0_0_SNAPSHOT", "V3_0_0_ALPHA1", *(f"V3_0_0_BETA{n}" for n in range(1, 6))]
    for n in range(6, 10):
        names += [f"V3_0_0_BETA{n}_SNAPSHOT", f"V3_0_0_BETA{n}"]
    names.append("V3_0_0_FINAL")
    releases = [(3, 0, p) for p in range(1, 16)]
    for major in (3, 4, 5):
        for minor in range(1 if major == 3 else 0, 10):
            first = 1 if major == 3 and minor >= 3 else 0  # V3_3_0 .. V3_9_0 do not exist
            releases += [(major, minor, p) for p in range(first, 10)]
    for major, minor, patch in releases:
        names += [f"V{major}_{minor}_{patch}_SNAPSHOT", f"V{major}_{minor}_{patch}"]
    names.append("HIGHER_VERSION")
    return tuple(names)


_VERSIONS: Final = _names()


def version_desc(version: int) -> str:
    """``MQVersion.getVersionDesc``: the name of a version ordinal.

    Args:
        version: A command's ``version`` (401 for 4.9.4).

    Returns:
        E.g. ``V4_9_4``; a number past the last name is ``HIGHER_VERSION``, as in Java.
        A negative number (Java would throw) is returned as its digits.
    """
    if version < 0:
        return str(version)
    return _VERSIONS[min(version, len(_VERSIONS) - 1)]
