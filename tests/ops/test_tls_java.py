"""RocketMQ 4.9.4's own admin tool, with ``-Dtls.enable=true``, against a TLS-only Rocklet.

Runs the real ``mqadmin`` (MQAdminStartup) through the shared anchor's wrapper
(``shared/anchor/mqadmin.sh``, set up by its ``setup.sh`` under ``/tmp/anchor``). Where
that distribution or Java is not installed (CI machines without the anchor), the test
is skipped and says so; docs/security.md records the same check done by hand.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from tests.ops.test_tls_processes import server_keys, standalone
from tests.tlscerts import make_pki

ROOT = Path(__file__).resolve().parents[2]
ANCHOR_HOME = Path(os.environ.get("ANCHOR_HOME", "/tmp/anchor"))
_SCRIPTS = [ROOT.parent / "shared" / "anchor", Path("/work/shared/anchor")]
MQADMIN = next((d / "mqadmin.sh" for d in _SCRIPTS if (d / "mqadmin.sh").is_file()), None)
JAVA_TIMEOUT_S = 120.0


def _missing() -> str | None:
    if MQADMIN is None:
        return "the shared anchor scripts (shared/anchor/mqadmin.sh) are not here"
    if not (ANCHOR_HOME / "classpath.txt").is_file():
        return f"RocketMQ 4.9.4 is not set up under {ANCHOR_HOME} (shared/anchor/setup.sh)"
    if shutil.which("java") is None:
        return "no java on PATH"
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=str(_missing()))


async def mqadmin(*args: str, tls: bool) -> tuple[int, str]:
    assert MQADMIN is not None
    env = {**os.environ, "ANCHOR_HOME": str(ANCHOR_HOME)}
    if tls:
        env["JAVA_TOOL_OPTIONS"] = "-Dtls.enable=true"  # how -D reaches the wrapped JVM
    proc = await asyncio.create_subprocess_exec(
        "bash", str(MQADMIN), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), JAVA_TIMEOUT_S)
    assert proc.returncode is not None
    return proc.returncode, out.decode(errors="replace")


async def test_the_java_admin_tool_speaks_tls_to_an_enforcing_rocklet(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    async with standalone(tmp_path, "-Dtls.server.mode=enforcing", *server_keys(pki)) as servers:
        code, out = await mqadmin("clusterList", "-n", servers.namesrv, tls=True)
        assert code == 0 and f"127.0.0.1:{servers.broker_port}" in out, out
        code, out = await mqadmin(
            "updateTopic", "-n", servers.namesrv, "-c", "DefaultCluster", "-t", "JavaTls", tls=True
        )
        assert "success" in out, out
        # Without TLS the same tool cannot get an answer.
        code, out = await mqadmin("clusterList", "-n", servers.namesrv, tls=False)
        assert f"127.0.0.1:{servers.broker_port}" not in out
        # How it fails depends on when the server's close lands (before the request is
        # written: RemotingSendRequestException; after: a timeout or a closed channel).
        assert "ClusterListSubCommand command failed" in out or "Remoting" in out, out
