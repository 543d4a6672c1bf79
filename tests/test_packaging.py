"""The installed layout: one ``rocklet`` namespace over the checkout's folders.

The checkout keeps ``broker/``, ``client/``, ``protocol/``, ``store/`` ... at its top and
setuptools installs them as ``rocklet.broker``, ``rocklet.client`` ... These tests build
the real wheel and import from a directory full of modules that would shadow bare names.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _folder_of(package: str) -> Path:
    """The checkout folder setuptools builds ``package`` from."""
    mapping: dict[str, str] = SETUPTOOLS["package-dir"]
    parts = package.split(".")
    for cut in range(len(parts), 0, -1):
        prefix = ".".join(parts[:cut])
        if prefix in mapping:
            return ROOT / mapping[prefix] / Path(*parts[cut:])
    return ROOT / Path(*parts)


def test_every_package_folder_is_listed() -> None:
    listed = set(SETUPTOOLS["packages"])
    on_disk: set[str] = set()
    for package in listed:
        folder = _folder_of(package)
        assert (folder / "__init__.py").is_file(), package
        for init in folder.rglob("__init__.py"):
            rel = init.parent.relative_to(folder)
            on_disk.add(".".join((package, *rel.parts)) if rel.parts else package)
    assert on_disk == listed


# Slow tier: it builds in the checkout (setuptools' build/ and egg-info), which the other
# interpreters' tiers, run side by side, would share.
@pytest.mark.slow
def test_the_wheel_has_only_rocklet_and_the_spark_shim(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("rocklet-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == {"rocklet", "pyspark_rocklet"}
    shim = sorted(name for name in names if name.startswith("pyspark_rocklet/"))
    assert shim == ["pyspark_rocklet/__init__.py", "pyspark_rocklet/py.typed"]
    for package in ("protocol", "store", "broker", "client", "spark"):
        assert f"rocklet/{package}/__init__.py" in names
        assert f"rocklet/{package}/py.typed" in names
    assert "rocklet/broker/processors/send.py" in names


def test_user_modules_named_like_ours_do_not_shadow_rocklet(tmp_path: Path) -> None:
    # A user's own modules beside their script, each poisoned so importing it fails loudly.
    for name in ("client", "store", "protocol", "broker", "spark", "transport"):
        (tmp_path / f"{name}.py").write_text(f"raise ImportError('user module {name} imported')\n")
    script = tmp_path / "app.py"
    script.write_text(
        "import rocklet.client, rocklet.store, rocklet.protocol, rocklet.broker\n"
        "from rocklet.client.sync import Producer\n"
        "from rocklet.client import PushConsumer\n"
        "import pyspark_rocklet\n"
        "source = pyspark_rocklet.DefaultSource\n"
        "print(Producer.__module__, PushConsumer.__module__, source.name())\n"
    )
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [
        "rocklet.client.sync",
        "rocklet.client.push_consumer",
        "rocklet",
    ]


def _run_python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, check=False
    )


def test_version_is_the_installed_distributions(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "rocklet", "--version"], capture_output=True, text=True, check=True
    )
    from importlib.metadata import version

    assert proc.stdout.startswith(f"rocklet {version('rocklet')} (Python ")
    # It names the interpreter's binary, not only its version.
    assert f" at {Path(sys.executable).resolve()}, " in proc.stdout


def test_without_uvloop_the_asyncio_loop_runs_the_same_code(tmp_path: Path) -> None:
    # A None entry in sys.modules makes `import uvloop` raise ImportError, as on a
    # platform where uvloop has no wheel.
    proc = _run_python(
        "import sys; sys.modules['uvloop'] = None\n"
        "import asyncio\n"
        "from rocklet.transport.loop import loop_name, run\n"
        "async def main() -> str:\n"
        "    return type(asyncio.get_running_loop()).__module__\n"
        "print(loop_name(), run(main()))\n",
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["asyncio", "asyncio.unix_events"]


def test_a_broker_without_metrics_needs_no_prometheus_client(tmp_path: Path) -> None:
    proc = _run_python(
        "import sys; sys.modules['prometheus_client'] = None\n"
        "import asyncio, dataclasses\n"
        "from pathlib import Path\n"
        "from rocklet.broker.app import Broker\n"
        "from rocklet.broker.config import BrokerConfig, ConfigError\n"
        "async def main() -> None:\n"
        "    config = BrokerConfig(store_path_root_dir=Path('store'), listen_port=0)\n"
        "    broker = await Broker.start(config, host='127.0.0.1')\n"
        "    await broker.stop()\n"
        "    try:\n"
        "        await Broker.start(dataclasses.replace(config, metrics_port=0))\n"
        "    except ConfigError as exc:\n"
        "        print(exc)\n"
        "asyncio.run(main())\n",
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "prometheus_client" not in proc.stderr
    assert "metricsPort is set but prometheus-client is not installed" in proc.stdout
    assert "pip install 'rocklet[metrics]'" in proc.stdout
