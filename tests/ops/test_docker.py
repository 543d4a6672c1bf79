"""docker/: the compose file validates, and everything it and the Dockerfile name exists.

There is no Docker engine here, so nothing is built or run: ``docker-compose config``
(Debian's docker-compose, installed by ``make install``) validates and normalizes the
compose file, and every command is parsed by the real ``rocklet`` argument parser and
every config file loaded by the real config loaders.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from rocklet.broker.config import BrokerConfig, NamesrvConfig, load_broker_config, parse_properties
from rocklet.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
ROCKLET_SERVICES = {"namesrv", "broker-a", "broker-b"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    exe = shutil.which("docker-compose")
    if exe is None:
        pytest.fail(
            "docker-compose is not installed; `make install` installs Debian's package "
            "when run as root (or: apt-get install docker-compose)"
        )
    proc = subprocess.run(
        [exe, "-f", str(DOCKER / "docker-compose.yml"), "config"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    config: dict[str, Any] = yaml.safe_load(proc.stdout)
    return config


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


def test_compose_has_one_namesrv_two_masters_and_prometheus(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == ROCKLET_SERVICES | {"prometheus"}
    for name in ROCKLET_SERVICES:
        assert services[name]["build"]["dockerfile"] == "docker/Dockerfile"
        assert Path(services[name]["build"]["context"]) == REPO
    for name in ("broker-a", "broker-b"):
        assert services[name]["depends_on"]["namesrv"]["condition"] == "service_healthy"


def test_every_rocklet_command_parses_and_its_config_loads(compose: dict[str, Any]) -> None:
    services = compose["services"]
    parser = build_parser()
    ns_service = services["namesrv"]
    ns_args = parser.parse_args(ns_service["command"])
    assert ns_args.command == "namesrv"
    ns_conf = host_path(ns_service, conf_arg(ns_service["command"]))
    namesrv = NamesrvConfig.from_properties(parse_properties(ns_conf.read_text()))
    assert {p["target"] for p in ns_service["ports"]} == {namesrv.listen_port}
    for name in ("broker-a", "broker-b"):
        service = services[name]
        assert parser.parse_args(service["command"]).command == "broker"
        config = load_broker(host_path(service, conf_arg(service["command"])))
        assert config.broker_name == name and config.broker_id == 0 and not config.extra
        assert config.broker_cluster_name == "DefaultCluster"
        assert config.namesrv_addr == f"namesrv:{namesrv.listen_port}"
        assert config.broker_ip1 == service["networks"]["rocklet"]["ipv4_address"]
        assert {p["target"] for p in service["ports"]} == {config.listen_port}
        assert any(
            config.store_path_root_dir.is_relative_to(t) for t in named_volume_targets(service)
        ), "the store must live on a named volume"
        assert config.metrics_port is not None


def test_healthchecks_are_admin_commands_against_the_service_itself(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    parser = build_parser()
    for name in ROCKLET_SERVICES:
        test = services[name]["healthcheck"]["test"]
        assert test[:2] == ["CMD", "rocklet"]
        args = parser.parse_args(test[2:])
        assert args.command == "admin"
        if name == "namesrv":
            assert args.namesrvAddr == "127.0.0.1:9876"
        else:
            config = load_broker(host_path(services[name], conf_arg(services[name]["command"])))
            assert args.verb == "brokerStatus"
            assert args.brokerAddr == f"127.0.0.1:{config.listen_port}"


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
    for name in ("broker-a", "broker-b"):
        config = load_broker(host_path(services[name], conf_arg(services[name]["command"])))
        expected.add(f"{name}:{config.metrics_port}")
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
    assert health[0] == "rocklet" and parser.parse_args(health[1:]).command == "admin"
