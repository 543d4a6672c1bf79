"""``rocklet bench --cases``: which cases a pattern selects."""

from __future__ import annotations

import dataclasses

from rocklet.benchsuite.plan import CASE_TIMEOUT_S, PROFILES, build_plan, select_cases


def test_a_consume_case_brings_the_produce_case_that_fills_its_backlog() -> None:
    plan = build_plan(PROFILES["quick"], ("rocklet",))
    chosen = select_cases(plan, ["rocklet/consume/main/1024", "rocklet/e2e/e2e/*"])
    assert [c.key for c in chosen] == [
        "rocklet/produce/batch/1024",
        "rocklet/consume/main/1024",
        "rocklet/e2e/e2e/1024",
    ]
    assert select_cases(plan, ["nothing/*"]) == []
    assert select_cases(plan, ["*"]) == plan


def test_a_long_latency_case_gets_a_limit_past_its_length() -> None:
    """``--e2e-seconds 600`` must not be cut off by the usual two-minute limit."""
    long = dataclasses.replace(PROFILES["quick"], e2e_s=600.0)
    [e2e] = select_cases(build_plan(long, ("rocklet",)), ["rocklet/e2e/e2e/1024"])
    assert e2e.timeout_s > 600.0 + long.e2e_warmup_s
    [produce] = select_cases(build_plan(long, ("rocklet",)), ["rocklet/produce/batch/1024"])
    assert produce.timeout_s == CASE_TIMEOUT_S
    [short] = select_cases(build_plan(PROFILES["quick"], ("rocklet",)), ["rocklet/e2e/e2e/1024"])
    assert short.timeout_s == CASE_TIMEOUT_S
