"""``rocklet produce`` / ``consume`` / ``admin`` with and without credentials, against a
broker with ACL on (in process, the same code the commands run)."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest

from rocklet.admin.run import run_admin_async
from rocklet.broker.config import ConfigError
from rocklet.cli import build_parser
from rocklet.consume import run_consume_async
from rocklet.produce import run_produce_async
from tests.broker.acl_helpers import (
    ADMIN,
    CONSUMER,
    GROUP,
    PRODUCER,
    TOPIC,
    acl_document,
    write_acl,
)
from tests.cluster import running_cluster

TIMEOUT_S = 20.0


async def test_cli_commands_sign_with_options_or_environment(tmp_path: Path) -> None:
    acl_file = tmp_path / "conf" / "plain_acl.yml"
    write_acl(acl_file, acl_document())
    async with running_cluster(tmp_path / "store", acl_enable=True, acl_file=acl_file) as cluster:
        ns = ["-n", cluster.namesrv_addr]
        admin_env = {"ROCKLET_ACCESS_KEY": ADMIN.access_key, "ROCKLET_SECRET_KEY": ADMIN.secret_key}

        async def admin(*argv: str, env: dict[str, str]) -> tuple[int, str]:
            args = build_parser().parse_args(["admin", *argv, *ns])
            out, err = io.StringIO(), io.StringIO()
            code = await asyncio.wait_for(run_admin_async(args, out, err, environ=env), TIMEOUT_S)
            return code, out.getvalue() + err.getvalue()

        code, text = await admin("updateTopic", "-c", "DefaultCluster", "-t", TOPIC, env={})
        assert code == 1 and "No accessKey is configured" in text
        code, text = await admin("updateTopic", "-c", "DefaultCluster", "-t", TOPIC, env=admin_env)
        assert code == 0, text

        async def produce(*extra: str) -> tuple[int, str]:
            argv = ["produce", "-t", TOPIC, "--body", "hi", "--timeout", "3", *ns, *extra]
            out, err = io.StringIO(), io.StringIO()
            run = run_produce_async(build_parser().parse_args(argv), io.StringIO(), out, err, {})
            code = await asyncio.wait_for(run, TIMEOUT_S)
            return code, out.getvalue() + err.getvalue()

        code, text = await produce()
        assert code == 1 and "No accessKey is configured" in text
        code, text = await produce(
            "--access-key", PRODUCER.access_key, "--secret-key", PRODUCER.secret_key
        )
        assert code == 0, text

        argv = ["consume", "-t", TOPIC, "-g", GROUP, "--count", "1", "--timeout", "10", *ns]
        out, err = io.StringIO(), io.StringIO()
        env = {"ROCKLET_ACCESS_KEY": CONSUMER.access_key, "ROCKLET_SECRET_KEY": CONSUMER.secret_key}
        run = run_consume_async(build_parser().parse_args(argv), out, err, env)
        assert await asyncio.wait_for(run, TIMEOUT_S) == 0, err.getvalue()
        assert "hi" in out.getvalue()

        with pytest.raises(ConfigError, match="both needed"):
            await produce("--access-key", PRODUCER.access_key)
