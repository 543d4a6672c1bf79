"""A directory nothing can be written to, for real: as root too.

Root ignores permission bits, so ``chmod`` alone proves nothing when tests run as root
(CI does): there a read-only tmpfs is mounted on the directory instead. Not root: the
directory is made ``r-x``. Either way the code under test gets EROFS or EACCES from the
kernel; if the mount is not allowed the test fails loudly rather than skip.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["read_only_directory"]


@contextmanager
def read_only_directory(path: Path) -> Iterator[Path]:
    """Make ``path`` (created if needed) read-only while inside; undo it afterwards."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(path)],
            check=True,
            capture_output=True,
        )
        try:
            yield path
        finally:
            subprocess.run(["umount", str(path)], check=True, capture_output=True)
    else:
        path.chmod(0o555)
        try:
            yield path
        finally:
            path.chmod(0o755)
