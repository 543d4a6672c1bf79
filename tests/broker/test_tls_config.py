"""RocketMQ's ``tls.*`` keys: where they are read, what wins, what is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from rocklet.broker.config import ConfigError, load_broker_config, load_namesrv_config
from rocklet.broker.tls_config import TlsSettings, parse_system_properties, tls_settings
from rocklet.cli import build_parser, tls_settings_of
from rocklet.transport.tls import ClientAuth, TlsMode
from tests.tlscerts import make_pki

NO_FILE = Path("/nonexistent/tls.properties")


def settings(conf: dict[str, str], system: dict[str, str] | None = None) -> TlsSettings:
    return tls_settings(conf, system or {}, default_file=NO_FILE)


def test_nothing_set_means_disabled_and_plain_registration() -> None:
    tls = settings({})
    assert tls.server.mode is TlsMode.DISABLED
    assert not tls.client_enabled
    assert tls.server_tls() is None and tls.client_context() is None


def test_a_certificate_alone_means_rocketmqs_default_permissive(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    tls = settings(
        {"tls.server.certPath": str(pki.server_cert), "tls.server.keyPath": str(pki.server_key)}
    )
    assert tls.server.mode is TlsMode.PERMISSIVE
    assert not tls.client_enabled  # tls.enable defaults to mode == enforcing
    assert tls.server_tls() is not None


def test_enforcing_without_a_certificate_stops_the_start() -> None:
    with pytest.raises(ConfigError, match=r"tls.server.certPath and tls.server.keyPath"):
        settings({}, {"tls.server.mode": "enforcing"})


def test_unknown_values_are_errors_where_rocketmq_guesses() -> None:
    with pytest.raises(ConfigError, match=r"tls.server.mode must be one of"):
        settings({}, {"tls.server.mode": "enforce"})
    with pytest.raises(ConfigError, match=r"need.client.auth must be one of"):
        settings({"tls.server.need.client.auth": "always"})
    with pytest.raises(ConfigError, match=r"tls.enable must be true or false"):
        settings({}, {"tls.enable": "yes"})


def test_dash_d_beats_the_config_file_and_the_tls_file_beats_both(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    tls_file = tmp_path / "tls.properties"
    tls_file.write_text(
        f"tls.server.certPath={pki.server_cert}\n"
        f"tls.server.keyPath={pki.server_key}\n"
        "tls.server.need.client.auth=require\n"
        f"tls.server.trustCertPath={pki.ca_file}\n"
        "tls.server.mode=disabled\n"  # ignored here, as in RocketMQ
    )
    conf = {
        "tls.server.mode": "permissive",
        "tls.server.need.client.auth": "optional",
        "tls.config.file": "/elsewhere",
    }
    system = {"tls.server.mode": "enforcing", "tls.config.file": str(tls_file)}
    with capture_logs() as logs:
        tls = settings(conf, system)
    assert tls.server.mode is TlsMode.ENFORCING
    assert tls.server.need_client_auth is ClientAuth.REQUIRE
    assert tls.server.cert_path == pki.server_cert
    assert tls.config_file == tls_file
    assert tls.client_enabled  # enforcing: the broker registers over TLS too
    assert [e["key"] for e in logs if "ignored in the TLS config file" in e["event"]] == [
        "tls.server.mode"
    ]


def test_a_named_tls_file_that_is_missing_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read tls.config.file"):
        settings({"tls.config.file": str(tmp_path / "missing")})


def test_broker_client_side_keys(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    tls = settings(
        {
            "useTLS": "true",
            "tls.client.trustCertPath": str(pki.ca_file),
            "tls.client.certPath": str(pki.client_cert),
            "tls.client.keyPath": str(pki.client_key),
        }
    )
    ctx = tls.client_context()
    assert ctx is not None and ctx.check_hostname
    assert settings({"useTLS": "true"}, {"tls.enable": "false"}).client_enabled is False
    with capture_logs() as logs:
        insecure = settings({"useTLS": "true", "tls.client.authServer": "false"})
    assert insecure.client_auth_server is False
    assert any("not verified" in e["event"] for e in logs)


def test_passwords_are_never_shown() -> None:
    tls = settings({"tls.server.keyPassword": "pw-one", "tls.client.keyPassword": "pw-two"})
    assert "pw-one" not in repr(tls) and "pw-two" not in repr(tls)


def test_dash_d_takes_only_tls_keys() -> None:
    assert parse_system_properties(["tls.server.mode=enforcing", "tls.enable = true"]) == {
        "tls.server.mode": "enforcing",
        "tls.enable": "true",
    }
    with pytest.raises(ConfigError, match="only the TLS properties"):
        parse_system_properties(["brokerName=x"])
    with pytest.raises(ConfigError, match="key=value"):
        parse_system_properties(["tls.enable"])


def test_the_config_files_know_the_tls_keys(tmp_path: Path) -> None:
    common = (
        "tls.server.mode=disabled\ntls.client.authServer=true\n"
        "tls.server.need.client.auth=none\ntls.test.mode.enable=false\n"
    )
    conf = tmp_path / "broker.conf"
    conf.write_text("useTLS=true\n" + common)  # NettyClientConfig's key: brokers only
    namesrv_conf = tmp_path / "namesrv.properties"
    namesrv_conf.write_text(common)
    with capture_logs() as logs:
        broker = load_broker_config(conf, environ={})
        namesrv = load_namesrv_config(namesrv_conf)
    assert [e for e in logs if e["log_level"] == "warning"] == []
    assert broker.extra["useTLS"] == "true"
    assert namesrv.extra["tls.server.mode"] == "disabled"


def test_the_server_commands_take_dash_d(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    args = build_parser().parse_args(
        [
            "namesrv",
            "-D",
            "tls.server.mode=permissive",
            f"-Dtls.server.certPath={pki.server_cert}",
            "-D",
            f"tls.server.keyPath={pki.server_key}",
        ]
    )
    tls = tls_settings_of(args, {})
    assert tls.server.mode is TlsMode.PERMISSIVE and tls.server.key_path == pki.server_key


def test_key_passwords_are_not_in_the_broker_config_answer() -> None:
    from rocklet.broker.config import BrokerConfig
    from rocklet.broker.processors.admin_config import config_properties

    extra = {"tls.server.keyPassword": "pw-one", "tls.client.keyPassword": "pw-two"}
    props = config_properties(BrokerConfig(extra={**extra, "tls.server.mode": "disabled"}))
    assert props["tls.server.mode"] == "disabled"
    assert not set(extra) & set(props)
