"""A slave's metadata sync against a master with ACL on (real brokers, in process, on
loopback): while the master refuses the slave's account the log says so for each table
and never that the sync was taken or resumed; once the account is right, it says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from rocklet.broker.app import Broker
from rocklet.broker.ha.metadata import MetadataSync
from rocklet.protocol.acl import Credentials
from tests.broker.acl_helpers import acl_document, write_acl
from tests.cluster import running_cluster, small_broker_config

SLAVE = Credentials("haslave01", "haslave-secret-1")
REFUSED = "master refused the sync"
RESUMED = "metadata sync from the master resumed"
FIRST_TAKEN = "metadata synced from the master"


def _events(captured: Sequence[Mapping[str, Any]]) -> list[str]:
    return [str(e["event"]) for e in captured]


async def test_a_refused_sync_is_never_reported_as_taken(tmp_path: Path) -> None:
    acl_file = tmp_path / "home" / "conf" / "plain_acl.yml"
    write_acl(acl_file, acl_document())  # no account for the slave yet
    async with running_cluster(tmp_path / "master", acl_enable=True, acl_file=acl_file) as cluster:
        acl = cluster.broker.acl
        assert acl is not None
        # The slave's tables: a broker of its own, not following anyone.
        slave = await Broker.start(small_broker_config(tmp_path / "slave", None), host="127.0.0.1")
        try:
            ctx = slave.ctx
            out_of_step: list[str | None] = ["the master was lost"]
            paused = MetadataSync(
                ctx.store,
                ctx.topics,
                ctx.groups,
                ctx.offsets,
                credentials=SLAVE,
                out_of_step=lambda: out_of_step[0],
            )
            fresh = MetadataSync(ctx.store, ctx.topics, ctx.groups, ctx.offsets, credentials=SLAVE)
            for sync in (paused, fresh):
                sync.set_master(cluster.broker.addr)

            with capture_logs() as captured:
                assert not await paused.sync_once()
                out_of_step[0] = None
                await paused.sync_once()  # the master is back, and refuses every table
                await fresh.sync_once()  # a first sync, refused likewise
            events = _events(captured)
            assert "metadata sync from the master paused" in events
            assert events.count(REFUSED) == 8, events
            assert RESUMED not in events and FIRST_TAKEN not in events, events
            refused = [e for e in captured if e["event"] == REFUSED]
            assert {e["what"] for e in refused} == {
                "topics",
                "consumer offsets",
                "delay offsets",
                "subscription groups",
            }
            assert all("No acl config for haslave01" in e["remark"] for e in refused)

            # The operator gives the slave its account: the next syncs are taken, and said so.
            document = acl_document()
            document["accounts"].append(
                {"accessKey": SLAVE.access_key, "secretKey": SLAVE.secret_key, "admin": True}
            )
            write_acl(acl_file, document)
            assert await acl.check_once()
            with capture_logs() as captured:
                await paused.sync_once()
                await fresh.sync_once()
            events = _events(captured)
            assert REFUSED not in events, events
            assert events.count(RESUMED) == 1 and events.count(FIRST_TAKEN) == 1, events
        finally:
            await slave.stop()
