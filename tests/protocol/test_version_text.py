"""``MQVersion.getVersionDesc`` and the properties text every side shares."""

from __future__ import annotations

from rocklet.protocol.command import OUR_VERSION
from rocklet.protocol.properties_text import format_properties, parse_properties
from rocklet.protocol.version import version_desc


def test_version_names_are_mqversion_ordinals() -> None:
    # Ordinals of RocketMQ 4.9.4's MQVersion.Version (613 names, HIGHER_VERSION last).
    assert version_desc(0) == "V3_0_0_SNAPSHOT"
    assert version_desc(15) == "V3_0_0_FINAL"
    assert version_desc(233) == "V4_1_0"
    assert version_desc(395) == "V4_9_1"
    assert version_desc(OUR_VERSION) == "V4_9_4"
    assert version_desc(611) == "V5_9_9"
    assert version_desc(612) == version_desc(10_000) == "HIGHER_VERSION"
    assert version_desc(-1) == "-1"


def test_properties_text_reads_back_what_it_writes() -> None:
    pairs = {"a=b": "c:d", "path": "C:\\dir", "multi": "1\n2", "#key": "!"}
    assert parse_properties(format_properties(pairs)) == pairs
