"""docker/: the compose file validates, and everything it and the Dockerfile name exists.

There is no Docker engine here, so nothing is built or run: ``docker-compose config``
(Debian's docker-compose, installed by ``make install``) validates, interpolates and
normalizes the compose file, every command is parsed by the real ``rocklet`` argument
parser and every config file loaded by the real config loaders; the image's wheel is
built from exactly the files the Dockerfile copies.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from rocklet.broker.config import BrokerConfig, NamesrvConfig, load_broker_config, parse_properties
from rocklet.cli import broker_config, build_parser
from rocklet.healthcheck import Check, checks_for
from rocklet.protocol import RemotingCommand, RequestCode, ResponseCode
from rocklet.protocol.headers.namesrv import PutKVConfigRequestHeader
from rocklet.transport.dial import open_connection
from tests.test_cli import LISTENING, TIMEOUT, spawn, wait_for_line

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
MASTERS = ("broker-a", "broker-b")
#: Each slave and its master, whose network namespace it shares.
SLAVES = {"broker-a-s": "broker-a", "broker-b-s": "broker-b"}
BROKERS = (*MASTERS, *SLAVES)
ROCKLET_SERVICES = {"namesrv", *BROKERS}
#: The variable that sets the address every broker advertises (brokerIP1).
ADVERTISED = "ROCKLET_ADVERTISED_HOST"


def compose_config(**env: str) -> dict[str, Any]:
    """``docker-compose config`` of docker/docker-compose.yml with ``env`` set."""
    exe = shutil.which("docker-compose")
    if exe is None:
        pytest.fail(
            "docker-compose is not installed; `make install` installs Debian's package "
            "when run as root (or: apt-get install docker-compose)"
        )
    base = {k: v for k, v in os.environ.items() if k != ADVERTISED}
    proc = subprocess.run(
        [exe, "-f", str(DOCKER / "docker-compose.yml"), "config"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**base, **env},
    )
    assert proc.returncode == 0, proc.stderr
    config: dict[str, Any] = yaml.safe_load(proc.stdout)
    return config


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return compose_config()


def host_path(service: dict[str, Any], container_path: str) -> Path:
    """The host file a container path resolves to through the service's bind mounts."""
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if container_path == target or container_path.startswith(target + "/"):
            assert source.startswith("/"), f"{container_path} is on a named volume"
            return Path(source + container_path[len(target) :])
    raise AssertionError(f"{container_path} is not mounted in {service}")


def named_volume_targets(service: dict[str, Any]) -> list[str]:
    return [v.split(":")[1] for v in service.get("volumes", []) if not v.startswith("/")]


def conf_arg(argv: list[str]) -> str:
    return argv[argv.index("-c") + 1]


def load_broker(path: Path) -> BrokerConfig:
    return load_broker_config(path, environ={})


def on_host(service: dict[str, Any]) -> list[str]:
    """The service's command with its ``-c`` file mapped to the host file it mounts."""
    argv = list(service["command"])
    if "-c" in argv:
        at = argv.index("-c") + 1
        argv[at] = str(host_path(service, argv[at]))
    return argv


def service_broker_config(service: dict[str, Any]) -> BrokerConfig:
    """The config ``rocklet broker`` builds from the service's command line."""
    return broker_config(build_parser().parse_args(on_host(service)))


def test_compose_has_one_namesrv_two_masters_a_slave_each_and_prometheus(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    assert set(services) == ROCKLET_SERVICES | {"prometheus"}
    for name in ROCKLET_SERVICES:
        assert services[name]["build"]["dockerfile"] == "docker/Dockerfile"
        assert Path(services[name]["build"]["context"]) == REPO
    for name in MASTERS:
        assert services[name]["depends_on"]["namesrv"]["condition"] == "service_healthy"
    for name, master in SLAVES.items():
        assert services[name]["depends_on"][master]["condition"] == "service_healthy"


def test_slaves_follow_their_master_over_its_loopback(compose: dict[str, Any]) -> None:
    """A slave shares its master's network: the HA address it is given is loopback."""
    services = compose["services"]
    for name, master in SLAVES.items():
        slave_conf = service_broker_config(services[name])
        master_conf = service_broker_config(services[master])
        assert services[name]["network_mode"] == f"service:{master}"
        assert (slave_conf.broker_name, slave_conf.broker_id) == (master_conf.broker_name, 1)
        assert slave_conf.broker_role.value == "SLAVE"
        assert master_conf.broker_role.value == "ASYNC_MASTER"
        assert slave_conf.ha_master_address is None  # learned from the name server
        # haServerAddr = brokerIP2:listenPort+1, on the loopback the two share; the
        # ports they both bind in one namespace differ.
        assert master_conf.broker_ip2 == "127.0.0.1"
        master_ports = {master_conf.listen_port, master_conf.listen_port + 1}
        master_ports.add(master_conf.metrics_port or 0)
        assert not master_ports & {slave_conf.listen_port, slave_conf.metrics_port}
        # The master publishes the slave's client port, never the HA port.
        published = {p["published"] for p in services[master]["ports"]}
        assert published == {master_conf.listen_port, slave_conf.listen_port}


def test_every_rocklet_command_parses_and_its_config_loads(compose: dict[str, Any]) -> None:
    services = compose["services"]
    parser = build_parser()
    ns_service = services["namesrv"]
    ns_args = parser.parse_args(ns_service["command"])
    assert ns_args.command == "namesrv"
    ns_conf = host_path(ns_service, conf_arg(ns_service["command"]))
    namesrv = NamesrvConfig.from_properties(parse_properties(ns_conf.read_text()))
    assert {p["target"] for p in ns_service["ports"]} == {namesrv.listen_port}
    # The KV table is kept on the service's volume, not in the container.
    assert namesrv.kv_config_path == Path("/data/kvConfig.json")
    for name in BROKERS:
        service = services[name]
        assert parser.parse_args(service["command"]).command == "broker"
        config = load_broker(host_path(service, conf_arg(service["command"])))
        assert config.broker_name == SLAVES.get(name, name) and not config.extra
        assert config.broker_id == (1 if name in SLAVES else 0)
        assert config.broker_cluster_name == "DefaultCluster"
        assert config.namesrv_addr == f"namesrv:{namesrv.listen_port}"
        assert config.broker_ip1 is None  # the command line gives it (see below)
        # Clients connect to brokerIP1:listenPort: published under the same number
        # (a slave's by its master's service, whose network it runs in).
        publisher = services[SLAVES.get(name, name)]
        assert (config.listen_port, config.listen_port) in [
            (p["published"], p["target"]) for p in publisher["ports"]
        ]
        assert any(
            config.store_path_root_dir.is_relative_to(t) for t in named_volume_targets(service)
        ), "the store must live on a named volume"
        assert config.metrics_port is not None


def test_brokers_advertise_the_host_address_from_the_environment(
    compose: dict[str, Any],
) -> None:
    for name in BROKERS:
        assert service_broker_config(compose["services"][name]).broker_ip1 == "127.0.0.1"
    lan = compose_config(**{ADVERTISED: "192.0.2.7"})
    for name in BROKERS:
        assert service_broker_config(lan["services"][name]).broker_ip1 == "192.0.2.7"


def test_no_fixed_subnet_or_addresses(compose: dict[str, Any]) -> None:
    assert all("ipam" not in (net or {}) for net in compose["networks"].values())
    for name, service in compose["services"].items():
        if name in SLAVES:
            assert "networks" not in service  # its master's (tested above)
            continue
        assert service["networks"] == {"rocklet": None}, name  # no ipv4_address


def test_healthchecks_ask_each_role_on_its_own_port(compose: dict[str, Any]) -> None:
    """The check every service runs resolves, from the service's own command, to its role."""
    services = compose["services"]
    expected = {
        "namesrv": [Check("namesrv", "127.0.0.1", 9876)],
        "broker-a": [Check("broker", "127.0.0.1", 10911)],
        "broker-b": [Check("broker", "127.0.0.1", 10921)],
        "broker-a-s": [Check("broker", "127.0.0.1", 10931)],
        "broker-b-s": [Check("broker", "127.0.0.1", 10941)],
    }
    for name in ROCKLET_SERVICES:
        test = services[name]["healthcheck"]["test"]
        assert test == ["CMD", "rocklet", "healthcheck"]
        assert build_parser().parse_args(test[2:]).pid == 1  # the container's server
        # PID 1 runs ENTRYPOINT ["rocklet"] + command, from WORKDIR /home/rocklet.
        checks = checks_for(["/usr/local/bin/rocklet", *on_host(services[name])], Path("/"))
        assert checks == expected[name], name
        publisher = services[SLAVES.get(name, name)]
        published = {p["target"] for p in publisher["ports"]}
        assert {c.port for c in checks} <= published


def test_every_stateful_service_keeps_its_state_on_a_volume(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert named_volume_targets(services["namesrv"]) == ["/data"]
    assert named_volume_targets(services["prometheus"]) == ["/prometheus"]
    for name in BROKERS:
        assert named_volume_targets(services[name]) == ["/data"]
    assert set(compose["volumes"]) == {f"{b}-data" for b in BROKERS} | {
        "prometheus-data",
        "namesrv-data",
    }


async def test_the_name_server_writes_only_its_kv_table(tmp_path: Path) -> None:
    """What its volume holds: a real ``rocklet namesrv`` stores a KV config and stops."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rocklet", "namesrv", "--port", "0", "--host", "127.0.0.1",
        cwd=work, env={**os.environ, "HOME": str(home)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    try:
        port = int((await wait_for_line(proc, LISTENING)).group(2))
        header = PutKVConfigRequestHeader("ORDER_TOPIC_CONFIG", "orders", "broker-a:4")
        async with await open_connection("127.0.0.1", port) as conn:
            answer = await conn.request(
                RemotingCommand(RequestCode.PUT_KV_CONFIG, ext_fields=header.to_ext_fields()),
                TIMEOUT,
            )
        assert answer.code == ResponseCode.SUCCESS
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), TIMEOUT) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    # RocketMQ's default place, under the home directory; nothing else anywhere.
    assert [p.relative_to(home) for p in sorted(home.rglob("*"))] == [
        Path("namesrv"),
        Path("namesrv/kvConfig.json"),
    ]
    assert list(work.iterdir()) == []


def test_prometheus_scrapes_every_broker_metrics_port(compose: dict[str, Any]) -> None:
    services = compose["services"]
    prom = services["prometheus"]
    flag = next(a for a in prom["command"] if a.startswith("--config.file="))
    prom_conf = yaml.safe_load(host_path(prom, flag.split("=", 1)[1]).read_text())
    targets = {
        target
        for job in prom_conf["scrape_configs"]
        for static in job["static_configs"]
        for target in static["targets"]
    }
    expected = set()
    for name in BROKERS:
        config = load_broker(host_path(services[name], conf_arg(services[name]["command"])))
        # A slave answers under its master's name (it shares the master's network).
        expected.add(f"{SLAVES.get(name, name)}:{config.metrics_port}")
    assert targets == expected


def dockerfile_instructions() -> list[tuple[str, str]]:
    joined = (DOCKER / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [ln.strip() for ln in joined.splitlines()]
    pairs = [ln.split(None, 1) for ln in lines if ln and not ln.startswith("#")]
    return [(p[0].upper(), p[1]) for p in pairs]


def test_dockerfile_copies_existing_sources_runs_as_non_root_and_its_commands_parse() -> None:
    instructions = dockerfile_instructions()
    allowed = {
        ln[1:].strip()
        for ln in (REPO / ".dockerignore").read_text().splitlines()
        if ln.startswith("!")
    }
    for keyword, rest in instructions:
        if keyword == "COPY" and not rest.startswith("--from"):
            *sources, _dest = rest.split()
            for source in sources:
                assert (REPO / source).exists(), source
                assert source.rstrip("/").removeprefix("./") in allowed, f"{source} is ignored"
    parser = build_parser()
    values = {k: v for k, v in instructions}  # the last of each (the final stage's)
    assert instructions[0][1].startswith("python:3.11-slim")
    assert values["USER"] not in ("root", "0")
    assert json.loads(values["VOLUME"]) == ["/data"]
    assert json.loads(values["ENTRYPOINT"]) == ["rocklet"]
    cmd = json.loads(values["CMD"])
    assert parser.parse_args(cmd).command == "namesrv"
    assert (DOCKER / "conf" / Path(conf_arg(cmd)).name).exists()  # COPY docker/conf /etc/rocklet
    health = json.loads(values["HEALTHCHECK"].split(" CMD ", 1)[1])
    assert health == ["rocklet", "healthcheck"]
    default = [*json.loads(values["ENTRYPOINT"]), *cmd]
    default[default.index("-c") + 1] = str(DOCKER / "conf" / Path(conf_arg(cmd)).name)
    assert checks_for(default, Path("/")) == [Check("namesrv", "127.0.0.1", 9876)]


def build_stage_copies() -> list[str]:
    """The checkout paths the Dockerfile's build stage copies into its context."""
    copies: list[str] = []
    for keyword, rest in dockerfile_instructions():
        if keyword == "FROM" and copies:
            break  # the final stage: it installs the wheel, it builds nothing
        if keyword == "COPY" and not rest.startswith("--from"):
            copies.extend(rest.split()[:-1])
    return copies


def test_the_wheel_builds_from_exactly_what_the_dockerfile_copies(tmp_path: Path) -> None:
    context = tmp_path / "src"
    context.mkdir()
    for source in build_stage_copies():
        origin = REPO / source
        if origin.is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
            shutil.copytree(origin, context / source, ignore=ignore)
        else:
            shutil.copy2(origin, context / source)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(context),
            "--no-deps",
            "-q",
            "-w",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, f"the image's build stage would fail:\n{proc.stderr}"
    (wheel,) = tmp_path.glob("rocklet-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    packages = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    for package in packages["packages"]:
        assert f"{package.replace('.', '/')}/__init__.py" in names, package
    # The server and tool entry points the image runs import from the wheel alone.
    assert {"rocklet/cli.py", "rocklet/healthcheck.py", "rocklet/transport/server.py"} <= names


async def test_the_broker_ip1_flag_is_the_address_clients_get(tmp_path: Path) -> None:
    """What compose's --broker-ip1 does: the name server hands out that address."""
    proc = await spawn(
        "standalone", "--data-dir", str(tmp_path), "--namesrv-port", "0", "--listen-port", "0",
        "--broker-ip1", "198.51.100.9",
    )  # fmt: skip
    try:
        ns_port = int((await wait_for_line(proc, LISTENING)).group(2))
        listening = await wait_for_line(proc, re.compile(r"broker listening.*addr=(\S+)"))
        addr = listening.group(1)
        assert addr.startswith("198.51.100.9:")
        async with await open_connection("127.0.0.1", ns_port) as ns:
            info = await ns.request(RemotingCommand(RequestCode.GET_BROKER_CLUSTER_INFO), TIMEOUT)
        assert info.code == ResponseCode.SUCCESS and addr.encode() in info.body
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), TIMEOUT) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
