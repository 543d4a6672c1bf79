"""The official C++ client (rocketmq==0.4.4) and a broker with TLS turned on.

The C++ client has no TLS: its library links no TLS code (checked below), so against a
TLS server it can only use plain TCP. A Rocklet server in ``permissive`` mode serves it
on the same port as TLS clients, as RocketMQ's does; that is what this module shows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import rocketmq

from rocklet.client import PullConsumer
from tests.compat.harness import Standalone, driver_pool, running_standalone
from tests.tlscerts import Pki, make_pki

pytestmark = pytest.mark.compat


def test_the_cpp_client_library_has_no_tls() -> None:
    library = (Path(rocketmq.__file__).parent / "librocketmq.so").read_bytes()
    # OpenSSL's entry points would be named in the dynamic symbol table if it used them.
    assert b"SSL_CTX_new" not in library and b"SSL_connect" not in library


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def permissive(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[Standalone]:
    root = tmp_path_factory.mktemp("permissive")
    properties = {
        "brokerIP1": "127.0.0.1",
        "mappedFileSizeCommitLog": str(16 * 1024 * 1024),
        "tls.server.mode": "permissive",
        "tls.server.certPath": str(pki.server_cert),
        "tls.server.keyPath": str(pki.server_key),
    }
    with running_standalone(root, properties) as broker:
        yield broker


async def test_cpp_client_works_over_plain_tcp_beside_tls_clients(
    permissive: Standalone, pki: Pki, tmp_path: Path
) -> None:
    topic = "CompatTlsPermissive"
    sends = [{"mode": "sync", "keys": f"k-{i}", "body": f"plain {i}"} for i in range(5)]
    async with driver_pool(tmp_path / "home", permissive.namesrv_addr) as pool:
        sent = await pool.produce("producer", topic, sends)
        assert [e["status"] for e in sent] == ["OK"] * 5
        consumer = await pool.spawn(
            "consumer", "push", topic=topic, group="CG_tls", expect_count=5, timeout_s=30.0
        )
        summary = await consumer.finish(45.0)
        assert summary["stopped"] == "signal", consumer.diagnostics()
        got = [e for e in consumer.of("consumed") if not e["failed"]]
    assert Counter(e["keys"] for e in got) == Counter(f"k-{i}" for i in range(5))

    # The same messages, read over TLS on the same ports by the SDK.
    async with PullConsumer("tls-reader", permissive.namesrv_addr, tls=pki.client_context()) as c:
        bodies = []
        for mq in await c.fetch_queues(topic):
            result = await c.pull(mq, 0, 32)
            bodies += [m.body for m in result.messages]
    assert sorted(bodies) == sorted(f"plain {i}".encode() for i in range(5))
