"""A RocketMQ 4.x binary release on disk, and the ``java`` command that runs its classes.

Only the release's own layout is used (``bin/``, ``conf/``, ``lib/``): every class runs
with ``-cp DIR/lib/*``, as its ``bin/runserver.sh`` and ``bin/runbroker.sh`` do. Java 9+
also needs the JDK internals RocketMQ 4.9 touches opened (:data:`JAVA9_FLAGS`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

__all__ = ["JAVA9_FLAGS", "ReleaseError", "RocketMqRelease", "find_java"]

#: What RocketMQ 4.9.x needs opened on Java 9+ (checked with 4.9.4 on Java 17): direct
#: buffers and their cleaner (the store's mapped files), and reflection on java.lang and
#: java.util. preferIPv4Stack keeps its sockets plain AF_INET.
JAVA9_FLAGS: Final = (
    "--add-exports",
    "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.nio=ALL-UNNAMED",
    "--add-opens",
    "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.lang=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.util=ALL-UNNAMED",
    "-Djava.net.preferIPv4Stack=true",
)
#: Jars the classes this benchmark runs cannot start without (name prefixes in lib/).
_REQUIRED_JARS: Final = ("rocketmq-namesrv-", "rocketmq-broker-", "rocketmq-example-", "netty-")


class ReleaseError(RuntimeError):
    """The release directory or the Java runtime cannot run the benchmark."""


def find_java(explicit: Path | None = None) -> Path:
    """The ``java`` to run: ``explicit``, else ``$JAVA_HOME/bin/java``, else ``PATH``'s.

    Raises:
        ReleaseError: None of them is an executable file.
    """
    if explicit is not None:
        candidates = [explicit]
    else:
        home = os.environ.get("JAVA_HOME")
        on_path = shutil.which("java")
        candidates = [Path(home) / "bin" / "java"] if home else []
        candidates += [Path(on_path)] if on_path else []
    for java in candidates:
        if java.is_file() and os.access(java, os.X_OK):
            return java
    raise ReleaseError(
        "no java found: give --java PATH, set JAVA_HOME, or put java on PATH"
        + (f" ({explicit} is not an executable file)" if explicit is not None else "")
    )


def _java_major(java: Path) -> int:
    """The runtime's major version (8 for ``1.8.0_x``, 17 for ``17.0.x``)."""
    out = subprocess.run(
        [str(java), "-version"], capture_output=True, text=True, timeout=60, check=False
    )
    for token in (out.stderr + out.stdout).replace('"', " ").split():
        head = token.split(".")[0]
        if head.isdigit() and "." in token:
            major = int(head)
            return int(token.split(".")[1]) if major == 1 else major
    raise ReleaseError(f"cannot read the version of {java}: {out.stderr.strip()[:200]}")


@dataclass
class RocketMqRelease:
    """A release directory and the JVM command line its classes run with.

    Args:
        home: The release (``bin/``, ``conf/``, ``lib/``).
        java: The ``java`` executable.
        extra_classpath: Jars put after ``lib/*`` (for a release missing some).
    """

    home: Path
    java: Path
    extra_classpath: tuple[str, ...] = ()
    java_major: int = field(default=0)

    def check(self) -> None:
        """Fail early, and clearly, when the release cannot run here.

        Raises:
            ReleaseError: A folder or a required jar is missing, or Java is unusable.
        """
        for sub in ("bin", "conf", "lib"):
            if not (self.home / sub).is_dir():
                raise ReleaseError(f"{self.home} is not a RocketMQ release: no {sub}/ in it")
        jars = [p.name for p in (self.home / "lib").glob("*.jar")]
        extras = [Path(p).name for p in self.extra_classpath]
        for prefix in _REQUIRED_JARS:
            if not any(name.startswith(prefix) for name in jars + extras):
                raise ReleaseError(
                    f"{self.home / 'lib'} has no {prefix}*.jar; a complete 4.x binary release "
                    "has it (give jars it lacks with --extra-classpath)"
                )
        self.java_major = _java_major(self.java)

    def classpath(self) -> str:
        """``lib/*`` (the JVM expands it) followed by the extra jars."""
        return os.pathsep.join([str(self.home / "lib" / "*"), *self.extra_classpath])

    def java_argv(
        self, heap: str, main_class: str, *args: str, props: tuple[str, ...] = ()
    ) -> list[str]:
        """The command running ``main_class`` of the release.

        Args:
            heap: ``-Xms``/``-Xmx`` value, e.g. ``"512m"``.
            main_class: Fully qualified class name.
            *args: The class's own arguments.
            props: More JVM options (``-Dkey=value``), before the class.

        Returns:
            The argv list.
        """
        flags = JAVA9_FLAGS if self.java_major >= 9 else ("-Djava.net.preferIPv4Stack=true",)
        return [
            str(self.java),
            *flags,
            f"-Xms{heap}",
            f"-Xmx{heap}",
            *props,
            "-cp",
            self.classpath(),
            main_class,
            *args,
        ]
