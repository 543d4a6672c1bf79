"""``rocklet admin exportMetadata`` in process: what it refuses, how it merges masters.

The files themselves are compared with the real mqadmin's in
tests/java/test_mqadmin_export.py.
"""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

from rocklet.admin.run import run_admin_async
from rocklet.admin.verbs_export import merge_tables
from rocklet.cli import build_parser
from tests.cluster import running_cluster

TIMEOUT_S = 20.0


async def _admin(namesrv: str, *argv: str) -> tuple[int, str]:
    args = build_parser().parse_args(["admin", *argv, "-n", namesrv])
    out, err = io.StringIO(), io.StringIO()
    code = await asyncio.wait_for(run_admin_async(args, out, err, environ={}), TIMEOUT_S)
    return code, out.getvalue() + err.getvalue()


def test_masters_merge_as_mqadmin_merges_them() -> None:
    # What mqadmin 4.9.4 wrote for a topic on both masters of a cluster (4 + 4 queues),
    # one on a single master, and a group with 2 retry queues on each.
    topics: dict[str, dict[str, object]] = {}
    a = {"topicName": "both", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}
    b = {"topicName": "both", "readQueueNums": 4, "writeQueueNums": 4, "perm": 4}
    only = {"topicName": "only", "readQueueNums": 2, "writeQueueNums": 3, "perm": 6}
    merge_tables(topics, {"both": a, "only": only}, ("readQueueNums", "writeQueueNums"))
    merge_tables(topics, {"both": b}, ("readQueueNums", "writeQueueNums"))
    assert topics == {
        "both": {"topicName": "both", "readQueueNums": 8, "writeQueueNums": 8, "perm": 4},
        "only": only,
    }
    groups: dict[str, dict[str, object]] = {}
    group = {"groupName": "g", "retryQueueNums": 2}
    merge_tables(groups, {"g": group}, ("retryQueueNums",))
    merge_tables(groups, {"g": group}, ("retryQueueNums",))
    assert groups == {"g": {"groupName": "g", "retryQueueNums": 4}}


async def test_export_writes_whole_files_and_says_what_is_missing(tmp_path: Path) -> None:
    out = tmp_path / "export"
    async with running_cluster(tmp_path / "store") as cluster:
        ns, broker = cluster.namesrv_addr, cluster.broker.addr
        code, text = await _admin(ns, "updateTopic", "-b", broker, "-t", "ExportT", "-r", "3")
        assert code == 0, text
        code, text = await _admin(ns, "updateSubGroup", "-b", broker, "-g", "ExportG")
        assert code == 0, text

        code, text = await _admin(ns, "exportMetadata", "-c", "DefaultCluster", "-f", str(out))
        assert code == 0 and f"export {out / 'metadata.json'} success" in text, text
        metadata = json.loads((out / "metadata.json").read_text())
        assert list(metadata) == ["exportTime", "topicConfigTable", "subscriptionGroupTable"]
        assert metadata["topicConfigTable"]["ExportT"]["readQueueNums"] == 3
        assert "TBW102" not in metadata["topicConfigTable"]  # a system topic
        assert list(metadata["subscriptionGroupTable"]) == ["ExportG"]  # no system group
        assert [p.name for p in out.iterdir()] == ["metadata.json"]  # no temporary left

        # mqadmin writes nothing for -b without -t or -g and says nothing; this says why.
        code, text = await _admin(ns, "exportMetadata", "-b", broker, "-f", str(out / "b"))
        assert code == 1 and "-t (topics) or -g (groups)" in text, text
        assert not (out / "b").exists()
        code, text = await _admin(ns, "exportMetadata", "-f", str(out / "n"))
        assert code == 1 and "-b" in text and "-c" in text, text
        code, text = await _admin(ns, "exportMetadata", "-c", "NoSuchCluster", "-f", str(out))
        assert code == 1 and "NoSuchCluster" in text, text
        # A directory that cannot be made: the reason, not a traceback.
        blocker = tmp_path / "a-file"
        blocker.write_text("")
        code, text = await _admin(
            ns, "exportConfigs", "-c", "DefaultCluster", "-f", str(blocker / "sub")
        )
        assert code == 1 and f"cannot write {blocker / 'sub' / 'configs.json'}" in text, text
