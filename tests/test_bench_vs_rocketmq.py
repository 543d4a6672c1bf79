"""``rocklet bench vs-rocketmq``: the parts that need no RocketMQ (fast).

The tool's output is parsed from lines in the exact formats the 4.9.4 benchmark
Producer and Consumer print; the end-to-end run against a real release is in
tests/compat/test_vs_rocketmq.py.
"""

from __future__ import annotations

import json
import socket
import stat
from pathlib import Path

import pytest

from rocklet.benchsuite.cases import worker_argv
from rocklet.benchsuite.procs import LOOPBACK, free_ports
from rocklet.benchsuite.vsrmq.configs import broker_conf, free_broker_port, namesrv_properties
from rocklet.benchsuite.vsrmq.cppclient import QUEUES, cpp_job
from rocklet.benchsuite.vsrmq.measure import commit_window
from rocklet.benchsuite.vsrmq.release import JAVA9_FLAGS, ReleaseError, RocketMqRelease, find_java
from rocklet.benchsuite.vsrmq.results import (
    BACKLOG_PER_SECOND,
    CASES,
    CPP_PULL_BACKLOG_PER_SECOND,
    DEFAULT_CASES,
    MIN_BACKLOG,
    Run,
    case_markdown,
    median_or_none,
    pair_ratios,
    parse_cases,
)
from rocklet.benchsuite.vsrmq.runner import order
from rocklet.benchsuite.vsrmq.sdkcase import E2E_RATE, sdk_e2e_job
from rocklet.benchsuite.vsrmq.toolout import (
    busy_consumer_rate,
    consumer_lines,
    consumer_tps,
    producer_tps,
    steady_rate,
)
from rocklet.cli import main

PRODUCER_OUT = """\
topic: VsRmq_x threadCount: 16 messageSize: 1024 keyEnable: false propertySize: 0 tagCount: 0 \
traceEnable: false aclEnable: false messageQuantity: 0
delayEnable: false delayLevel: 1
asyncEnable: false
Current Time: 2026-11-26 02:31:35,120 Send TPS: 2310 Max RT(ms): 301 Average RT(ms):   6.890 \
Send Failed: 0 Response Failed: 0
Current Time: 2026-11-26 02:31:45,120 Send TPS: 3105 Max RT(ms): 88 Average RT(ms):   5.120 \
Send Failed: 0 Response Failed: 0
Current Time: 2026-11-26 02:31:55,120 Send TPS: 3301 Max RT(ms): 90 Average RT(ms):   4.800 \
Send Failed: 0 Response Failed: 0
[Complete] Send Total: 90000 Send TPS: 3000 Max RT(ms): 301 Average RT(ms):   5.000 \
Send Failed: 0 Response Failed: 0
"""
CONSUMER_OUT = """\
topic: VsRmq_x, threadCount 16, group: g, suffix: false, filterType: null, expression: null, \
msgTraceEnable: false, aclEnable: false
Consumer Started.
Current Time: 1764124295120 TPS: 12001 FAIL: 0 AVG(B2C) RT(ms): 9000.123 AVG(S2C) RT(ms): \
8999.000 MAX(B2C) RT(ms): 12000 MAX(S2C) RT(ms): 11999
Current Time: 1764124305120 TPS: 15000 FAIL: 0 AVG(B2C) RT(ms):   1.000 AVG(S2C) RT(ms):   \
1.000 MAX(B2C) RT(ms): 4 MAX(S2C) RT(ms): 4
"""


def run(system: str, pair: int, rate: float | None, messages: int, cpu_s: float) -> Run:
    return Run(system, "producer16", pair, rate, messages, cpu_s, 100.0, 0.5, 1.5)


# --- the tools' output --------------------------------------------------------------------


def test_producer_rates_are_the_periodic_lines_not_the_summary() -> None:
    assert producer_tps(PRODUCER_OUT) == [2310, 3105, 3301]
    assert steady_rate(producer_tps(PRODUCER_OUT)) == pytest.approx((3105 + 3301) / 2)


def test_consumer_rates_are_its_tps_lines_and_never_the_producers() -> None:
    assert consumer_tps(CONSUMER_OUT) == [12001, 15000]
    assert consumer_tps(PRODUCER_OUT) == []
    assert producer_tps(CONSUMER_OUT) == []


def test_consumer_lines_carry_the_time_they_were_printed_at() -> None:
    assert consumer_lines(CONSUMER_OUT) == [(1764124295120, 12001), (1764124305120, 15000)]


def test_a_drained_consumer_counts_only_the_windows_it_spent_reading() -> None:
    lines = [(10_000, 9000), (20_000, 60_000), (30_000, 64_000), (40_000, 21_000)]
    # Never ran out: every line after the first.
    rate, note = busy_consumer_rate(lines, None)
    assert rate == pytest.approx(48_333.33) and note is None
    # Still reading at 31 s: the lines of 20 s and 30 s; the 40 s window held idle time.
    assert busy_consumer_rate(lines, 31_000) == (
        62_000,
        "msg/s over the 2 window(s) before it ran out",
    )
    # Ran out before the second line: no window was all reading; the highest rate is
    # the closest lower bound (a window with idle time in it reads low).
    assert busy_consumer_rate(lines, 15_000) == (64_000, "msg/s a lower bound")
    assert busy_consumer_rate([], 15_000) == (None, "msg/s a lower bound")


def test_steady_rate_drops_the_warm_up_line_unless_it_is_the_only_one() -> None:
    assert steady_rate([100, 200, 400]) == 300
    assert steady_rate([100]) == 100
    assert steady_rate([]) is None


def test_a_consumer_run_counts_between_its_first_and_last_commit() -> None:
    # The group appears with offset 0, then commits every 5 s; CPU is read at each.
    commits = [(10.0, 0), (10.5, 20_000), (11.0, 40_000), (11.4, 55_000)]
    messages, cpu, notes = commit_window(commits, 9.9, backlog=100_000)
    assert messages == 55_000 and cpu == pytest.approx(1.4) and notes == []
    messages, cpu, notes = commit_window([*commits, (11.5, 100_000)], 9.9, backlog=100_000)
    assert messages == 100_000 and notes == ["backlog of 100,000 drained"]
    # Too short for two commits: the whole run's CPU, and what was committed.
    assert commit_window([(1.0, 700)], 2.5, backlog=10**6) == (700, 2.5, ["CPU over the whole run"])
    assert commit_window([], 2.5, backlog=10**6) == (0, 2.5, ["CPU over the whole run"])


# --- ratios, medians, tables --------------------------------------------------------------


def test_the_default_backlog_outlasts_the_window() -> None:
    # The fastest consumer runs seen on the 2-core machine: ~185k msg/s for a Java
    # consumer, ~41k for the C++ PullConsumer. At the default rates a window ends
    # before its backlog does, however long it is.
    java, cpp = CASES["consumer1"], CASES["cpppull"]
    for seconds in (10, 30, 60):
        assert java.backlog_for(seconds) >= seconds * 185_000
        assert cpp.backlog_for(seconds) >= seconds * 41_000
    assert java.backlog_for(30) == 30 * BACKLOG_PER_SECOND
    assert cpp.backlog_for(30) == 30 * CPP_PULL_BACKLOG_PER_SECOND
    assert java.backlog_for(1) == cpp.backlog_for(1) == MIN_BACKLOG


def test_ratios_are_taken_within_each_pair() -> None:
    runs = [
        run("rocklet", 1, 5000, 150_000, 30.0),  # 200 µs/msg
        run("rocketmq", 1, 10000, 300_000, 30.0),  # 100 µs/msg
        run("rocketmq", 2, 8000, 240_000, 36.0),  # 150 µs/msg
        run("rocklet", 2, 6000, 180_000, 27.0),  # 150 µs/msg
    ]
    ratios = pair_ratios(runs)
    assert [p.pair for p in ratios] == [1, 2]
    assert [p.rate for p in ratios] == pytest.approx([0.5, 0.75])
    assert [p.cpu for p in ratios] == pytest.approx([0.5, 1.0])
    assert median_or_none([p.rate for p in ratios]) == pytest.approx(0.625)


def test_a_missing_figure_leaves_its_ratio_out_of_the_median() -> None:
    runs = [
        run("rocklet", 1, None, 0, 1.0),
        run("rocketmq", 1, 900, 9000, 1.0),
        run("rocklet", 2, 1000, 10_000, 1.0),
        run("rocketmq", 2, 500, 10_000, 2.0),
        run("rocklet", 3, 1000, 10_000, 1.0),  # its RocketMQ run never happened
    ]
    ratios = pair_ratios(runs)
    assert [p.pair for p in ratios] == [1, 2]
    assert ratios[0].rate is None and ratios[0].cpu is None
    assert median_or_none([p.rate for p in ratios]) == pytest.approx(2.0)
    assert median_or_none([None, None]) is None
    assert run("rocklet", 1, None, 0, 1.0).cpu_us_per_msg is None


def test_the_case_table_shows_every_run_the_ratios_and_the_medians() -> None:
    runs = [
        run("rocklet", 1, 5000, 150_000, 30.0),
        run("rocketmq", 1, 10000, 300_000, 30.0),
        run("rocketmq", 2, 8000, 240_000, 36.0),
        run("rocklet", 2, 6000, 180_000, 27.0),
    ]
    runs[3].notes.append("backlog of 180,000 drained")
    text = case_markdown("producer16", CASES["producer16"].title, runs)
    assert "### Java benchmark Producer, 16 threads, 1 KiB (`producer16`)" in text
    assert "| 1 | rocklet | 5,000 | 150,000 | 200.0 | 100 | 0.50→1.50 |" in text
    assert "| 2 | rocklet (backlog of 180,000 drained) | 6,000 | 180,000 | 150.0 |" in text
    assert "| 2 | 0.75 | 1.00 |" in text
    assert "| median | 0.62 | 0.75 |" in text  # 0.625 and the mean of 0.5 and 1.0
    assert "Median rocketmq: 9,000 msg/s, 125.0 µs broker CPU per message" in text


def test_cases_parse_in_the_order_given_and_reject_unknown_or_repeated_names() -> None:
    assert [c.name for c in parse_cases("consumer16, producer1")] == ["consumer16", "producer1"]
    assert CASES["consumer1"].tool == "consumer" and CASES["consumer1"].threads == 1
    for bad in ("producer2", "producer1,producer1", " , "):
        with pytest.raises(ValueError, match="cases must be"):
            parse_cases(bad)


def cpp_run(
    system: str, pair: int, rate: float, messages: int, cpu_s: float, client_s: float
) -> Run:
    return Run(
        system,
        "cpp1",
        pair,
        rate,
        messages,
        cpu_s,
        80.0,
        1.0,
        2.0,
        client_cpu_s=client_s,
        wall_s=10.0,
    )


def test_a_cpp_case_table_adds_the_clients_cpu_and_the_busier_side() -> None:
    runs = [
        cpp_run("rocklet", 1, 2000, 20_000, 3.0, 6.0),  # 150 µs broker, 300 µs client
        cpp_run("rocketmq", 1, 1000, 10_000, 8.0, 2.0),  # 800 µs broker, 200 µs client
    ]
    text = case_markdown("cpp1", CASES["cpp1"].title, runs)
    assert "send_sync, 1 thread sharing one producer, 1 KiB (`cpp1`)" in text
    assert "| broker CPU µs/msg | client CPU µs/msg | cores busy, broker / client |" in text
    assert "| 1 | rocklet | 2,000 | 20,000 | 150.0 | 300.0 | 0.30 / 0.60 | 80 | 1.00→2.00 |" in text
    assert "| 1 | rocketmq | 1,000 | 10,000 | 800.0 | 200.0 | 0.80 / 0.20 | 80 |" in text
    assert "| 1 | 2.00 | 5.33 |" in text
    assert "broker 0.30, C++ client 0.60; the busier side is the C++ client." in text
    assert "broker 0.80, C++ client 0.20; the busier side is the broker." in text
    assert runs[0].as_json()["client_cpu_us_per_msg"] == pytest.approx(300.0)
    # The Java cases measure no client: their table keeps its columns.
    java = case_markdown("producer16", "t", [run("rocklet", 1, 5000, 150_000, 30.0)])
    assert "client CPU" not in java and "busier" not in java


def test_the_cpp_cases_exist_but_are_not_run_by_default() -> None:
    assert [c.name for c in parse_cases("cpp1,cpp8,cpppull")] == ["cpp1", "cpp8", "cpppull"]
    assert DEFAULT_CASES == ("producer16", "producer1", "consumer1", "consumer16")
    assert CASES["cpp8"].cpp and not CASES["cpp8"].backlog_first
    assert CASES["cpppull"].cpp and CASES["cpppull"].backlog_first
    assert CASES["consumer1"].backlog_first and not CASES["consumer1"].cpp


def test_the_cpp_jobs_are_time_capped_driver_commands() -> None:
    load = cpp_job(CASES["cpp8"], "VsRmq_t", 20.0)
    assert {k: load[k] for k in ("op", "topic", "threads", "body_size", "seconds")} == {
        "op": "load", "topic": "VsRmq_t", "threads": 8, "body_size": 1024, "seconds": 20.0,
    }  # fmt: skip
    assert "count" not in load  # the time cap ends it
    pull = cpp_job(CASES["cpppull"], "VsRmq_t", 5.0)
    assert pull["op"] == "pull" and pull["max_num"] == 32 and pull["seconds"] == 5.0
    # Each run reads with a new group: a warm-up run leaves the measured one at offset 0.
    assert cpp_job(CASES["cpppull"], "VsRmq_t", 5.0)["group"] != pull["group"]
    assert QUEUES == 4  # as many as the Java Producer's first-use topic


def sdk_run(
    system: str, pair: int, p50: float, p99: float, cpu_s: float, stall_ms: float = 2.5
) -> Run:
    return Run(
        system, "sdke2e", pair, 4990.0, 75_000, cpu_s, 150.0, 0.5, 0.9,
        client_cpu_s=4.5, wall_s=16.0,
        latency_ms={"count": 75_000, "p50": p50, "p99": p99, "p999": 3 * p99},
        hiccups={"max_ms": stall_ms, "stalls": 2, "stalled_ms": 2 * stall_ms},
    )  # fmt: skip


def test_the_sdk_case_table_shows_percentiles_and_rocketmqs_p99_over_rocklets() -> None:
    runs = [
        sdk_run("rocklet", 1, 0.5, 1.2, 3.75, stall_ms=312.0),  # 50 µs/msg
        sdk_run("rocketmq", 1, 1.1, 2.4, 7.5),  # 100 µs/msg
        sdk_run("rocketmq", 2, 1.0, 1.8, 6.0),
        sdk_run("rocklet", 2, 0.6, 1.5, 4.5),
    ]
    runs[1].notes.append("3 messages never arrived")
    text = case_markdown("sdke2e", CASES["sdke2e"].title, runs)
    assert "### Rocklet SDK end to end, 5,000 msg/s" in text and "(`sdke2e`)" in text
    assert "| pair | system | p50 ms | p99 ms | p99.9 ms | msg/s | broker CPU µs/msg |" in text
    assert "| client CPU µs/msg | machine stalls, longest / total ms | peak RSS MiB |" in text
    row = "| 1 | rocklet | 0.50 | 1.20 | 3.60 | 4,990 | 50.0 | 60.0 | 312.0 / 624.0 | 150 |"
    assert row in text
    assert "| 1 | rocketmq (3 messages never arrived) | 1.10 | 2.40 | 7.20 |" in text
    assert "| 1 | 2.00 | 2.00 |" in text and "| 2 | 1.20 | 1.33 |" in text
    assert "| median | 1.60 | 1.67 |" in text
    assert "Median rocklet: p50 0.55 ms, p99 1.35 ms, 55.0 µs broker CPU per message." in text
    assert "msg/s | messages |" not in text  # not the throughput table


def test_the_sdk_case_runs_the_suites_end_to_end_workload_in_a_worker() -> None:
    case = CASES["sdke2e"]
    assert case.tool == "sdk-e2e" and not case.cpp and not case.backlog_first
    assert "sdke2e" not in DEFAULT_CASES
    job = sdk_e2e_job("127.0.0.1:9876", "VsRmq_t", 15.0, 4242)
    assert job["op"] == "e2e" and job["client"] == "rocklet" and job["create"]
    assert job["server_pgid"] == 4242  # the broker's CPU over the worker's window
    assert job["args"] | {"seconds": 0} == {
        "size": 1024, "rate": E2E_RATE, "seconds": 0, "warmup_s": 1.0, "per_message": False,
        "consumer": "push", "batch": 256,
    }  # fmt: skip
    assert E2E_RATE == 5000
    assert job["args"]["seconds"] == 15.0
    assert worker_argv(job)[-1] == json.dumps(job)  # what the suite's runner starts


def test_pairs_alternate_which_system_goes_first() -> None:
    assert [order(p) for p in (1, 2, 3)] == [
        ("rocklet", "rocketmq"),
        ("rocketmq", "rocklet"),
        ("rocklet", "rocketmq"),
    ]


# --- configs and ports --------------------------------------------------------------------


def properties(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def test_the_broker_config_is_an_async_master_flushing_in_the_background(tmp_path: Path) -> None:
    conf = properties(broker_conf(listen_port=40111, namesrv_port=40200, store=tmp_path))
    assert conf["brokerRole"] == "ASYNC_MASTER"
    assert conf["flushDiskType"] == "ASYNC_FLUSH"
    assert conf["brokerIP1"] == "127.0.0.1"
    assert conf["listenPort"] == "40111"
    assert conf["namesrvAddr"] == "127.0.0.1:40200"
    assert conf["storePathRootDir"] == str(tmp_path)
    assert conf["storePathCommitLog"] == str(tmp_path / "commitlog")
    assert conf["autoCreateTopicEnable"] == "true"
    assert properties(namesrv_properties(40200)) == {"listenPort": "40200"}


def test_the_broker_port_comes_with_its_two_neighbours_free() -> None:
    port = free_broker_port()
    for p in (port - 2, port, port + 1):
        with socket.socket() as sock:
            sock.bind(("0.0.0.0", p))  # raises if taken


def test_ports_asked_for_together_are_distinct_and_free() -> None:
    # 200 ports one at a time repeat one about four times in five (a birthday
    # collision among ~14k even ports): each must be held until all are chosen.
    ports = free_ports(200)
    assert len(set(ports)) == 200
    for p in ports[:5]:
        with socket.socket() as sock:
            sock.bind((LOOPBACK, p))  # raises if taken


# --- the release and java -----------------------------------------------------------------


def fake_release(root: Path, jars: list[str]) -> Path:
    for sub in ("bin", "conf", "lib"):
        (root / sub).mkdir(parents=True)
    for jar in jars:
        (root / "lib" / jar).write_bytes(b"")
    return root


FULL = ["rocketmq-namesrv-4.9.4.jar", "rocketmq-broker-4.9.4.jar", "rocketmq-example-4.9.4.jar"]


def test_a_directory_without_lib_is_not_a_release(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    with pytest.raises(ReleaseError, match="not a RocketMQ release: no conf/"):
        RocketMqRelease(tmp_path, Path("/bin/true")).check()


def test_a_release_without_netty_asks_for_the_missing_jars(tmp_path: Path) -> None:
    home = fake_release(tmp_path / "rmq", FULL)
    with pytest.raises(ReleaseError, match=r"no netty-\*\.jar.*--extra-classpath"):
        RocketMqRelease(home, Path("/bin/true")).check()


def test_the_jvm_command_uses_lib_star_the_extras_and_java9_flags(tmp_path: Path) -> None:
    home = fake_release(tmp_path / "rmq", [*FULL, "netty-all-4.1.65.Final.jar"])
    release = RocketMqRelease(home, Path("/opt/jdk/bin/java"), ("/x/zstd.jar",), java_major=17)
    argv = release.java_argv("512m", "org.example.Main", "-c", "f.conf", props=("-Da=b",))
    assert argv[0] == "/opt/jdk/bin/java"
    assert list(JAVA9_FLAGS) == argv[1 : 1 + len(JAVA9_FLAGS)]
    assert argv[argv.index("-cp") + 1] == f"{home}/lib/*:/x/zstd.jar"
    assert argv[-3:] == ["org.example.Main", "-c", "f.conf"]
    assert "-Xmx512m" in argv and "-Da=b" in argv
    java8 = RocketMqRelease(home, Path("/opt/jdk/bin/java"), java_major=8)
    assert "--add-opens" not in java8.java_argv("1g", "M")


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_java_comes_from_the_flag_then_java_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flag = executable(tmp_path / "flag" / "java")
    home_java = executable(tmp_path / "jdk" / "bin" / "java")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    assert find_java(flag) == flag
    assert find_java(None) == home_java
    with pytest.raises(ReleaseError, match="not an executable file"):
        find_java(tmp_path / "nowhere" / "java")
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ReleaseError, match="no java found"):
        find_java(None)


def test_the_command_refuses_a_directory_that_is_not_a_release(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    java = executable(tmp_path / "java")
    code = main(["bench", "vs-rocketmq", "--rocketmq-home", str(tmp_path), "--java", str(java)])
    assert code == 2
    assert "is not a RocketMQ release: no bin/" in capsys.readouterr().err
