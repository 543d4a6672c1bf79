"""``rocklet admin exportMetadata`` writes the files the real ``mqadmin exportMetadata``
(4.9.4) writes, against Rocklet and against RocketMQ 4.9.4 (the seeded session system:
its topic, retry topics and groups)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.java.admin_seed import CLUSTER, TOPIC, Seeded
from tests.java.javatier import tier_marks

pytestmark = tier_marks()


def _tables(path: Path) -> dict[str, Any]:
    """The file's tables: the export time and the table's version stamp differ per run."""
    content: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    content.pop("exportTime", None)
    content.pop("dataVersion", None)
    return content


@pytest.mark.parametrize(
    ("flags", "file"),
    [
        (("-c", CLUSTER), "metadata.json"),
        (("-c", CLUSTER, "-s"), "metadata.json"),
        (("-c", CLUSTER, "-g"), "subscriptionGroup.json"),
        (("-b", "BROKER", "-t", "-s"), "topic.json"),
    ],
    ids=["cluster", "cluster-special", "cluster-groups", "broker-topics-special"],
)
def test_export_metadata_writes_what_mqadmin_writes(
    seeded: Seeded, tmp_path: Path, flags: tuple[str, ...], file: str
) -> None:
    argv = [seeded.system.broker if f == "BROKER" else f for f in flags]
    theirs, ours = tmp_path / "mqadmin", tmp_path / "rocklet"
    printed = seeded.run("exportMetadata", *argv, "-f", str(theirs))
    assert f"export {theirs / file} success" in printed, printed
    command = [sys.executable, "-m", "rocklet", "admin", "exportMetadata"]
    command += ["-n", seeded.system.namesrv, *argv, "-f", str(ours)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"export {ours / file} success"
    expected = _tables(theirs / file)
    assert _tables(ours / file) == expected
    if "-t" not in argv:
        assert expected["subscriptionGroupTable"]
    if "-g" not in argv:
        assert TOPIC in expected["topicConfigTable"]  # the comparison compared something
        retry = any(t.startswith("%RETRY%") for t in expected["topicConfigTable"])
        assert retry == ("-s" in argv)
    # fastjson's pretty layout: tabs, no space after a colon.
    assert (ours / file).read_text(encoding="utf-8").startswith('{\n\t"')


def test_export_configs_writes_what_mqadmin_writes(seeded: Seeded, tmp_path: Path) -> None:
    theirs, ours = tmp_path / "mqadmin", tmp_path / "rocklet"
    printed = seeded.run("exportConfigs", "-c", CLUSTER, "-f", str(theirs))
    assert f"export {theirs / 'configs.json'} success" in printed, printed
    command = [sys.executable, "-m", "rocklet", "admin", "exportConfigs"]
    command += ["-n", seeded.system.namesrv, "-c", CLUSTER, "-f", str(ours)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    expected = json.loads((theirs / "configs.json").read_text(encoding="utf-8"))
    assert json.loads((ours / "configs.json").read_text(encoding="utf-8")) == expected
    assert expected["clusterScale"]["masterBrokerSize"] == 1
    (config,) = expected["brokerConfigs"].values()
    assert len(config) == 16  # every key mqadmin picks was there to compare
