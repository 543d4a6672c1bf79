"""``rocklet bench --cases``: which cases a pattern selects."""

from __future__ import annotations

from rocklet.benchsuite.plan import PROFILES, build_plan, select_cases


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
