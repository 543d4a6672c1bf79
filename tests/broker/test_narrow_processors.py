"""Processors take the collaborators they use, never the broker's whole context.

``BrokerContext`` is the app's wiring object (:mod:`rocklet.broker.wiring` reads it);
a processor that held it could reach everything, and its constructor would no longer
say what it depends on. The rule is read with ``ast`` from every processor module and
from the transaction check-back service, so an alias, a nested import or a string
annotation counts too.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from rocklet.broker import processors, transaction_check
from rocklet.broker.processors import (
    admin_clients,
    admin_config,
    admin_groups,
    admin_maintenance,
    admin_runtime,
    admin_stats,
    admin_store,
    admin_topics,
    client_manage,
    consumer_manage,
    pull,
    query,
    reply,
    send,
    sendback,
    transaction,
)

PROCESSOR_DIR = Path(processors.__file__).parent
CHECKED = [*sorted(PROCESSOR_DIR.glob("*.py")), Path(transaction_check.__file__)]
#: Modules a narrow processor has no business importing: the wiring object, the app
#: that owns it, and the wiring itself.
FORBIDDEN_MODULES = ("rocklet.broker.context", "rocklet.broker.app", "rocklet.broker.wiring")
FORBIDDEN_NAMES = ("BrokerContext", "Broker")


def violations(source: str) -> list[str]:
    """Every mention of the wiring object (or its modules) in one module's source."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith(FORBIDDEN_MODULES)]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module.startswith(FORBIDDEN_MODULES):
                found.append(module)
            found += [a.name for a in node.names if a.name in (*FORBIDDEN_NAMES, "context")]
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            found.append(node.id)
        elif isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_NAMES:
            found.append(node.attr)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.strip() in FORBIDDEN_NAMES
        ):
            found.append(node.value)  # a string annotation or forward reference
    return found


@pytest.mark.parametrize("path", CHECKED, ids=lambda p: p.name)
def test_processor_modules_never_mention_the_broker_context(path: Path) -> None:
    found = violations(path.read_text(encoding="utf-8"))
    assert not found, f"{path.name} reaches for the whole broker: {found}"


@pytest.mark.parametrize(
    "source",
    [
        "from rocklet.broker.context import BrokerContext\n",
        "from rocklet.broker import context\n",
        "import rocklet.broker.context as c\n",
        "def f(ctx: 'BrokerContext') -> None: ...\n",
        "class P:\n    def __init__(self, ctx: x.BrokerContext) -> None: ...\n",
        "def g():\n    from rocklet.broker.app import Broker\n",
    ],
)
def test_the_checker_catches_every_form(source: str) -> None:
    assert violations(source)


PROCESSOR_CLASSES = [
    send.SendProcessor,
    pull.PullProcessor,
    query.QueryProcessor,
    client_manage.ClientManageProcessor,
    consumer_manage.ConsumerManageProcessor,
    sendback.SendBackProcessor,
    transaction.EndTransactionProcessor,
    reply.ReplyProcessor,
    admin_topics.TopicAdmin,
    admin_groups.GroupAdmin,
    admin_runtime.RuntimeAdmin,
    admin_config.ConfigAdmin,
    admin_store.StoreAdmin,
    admin_stats.StatsAdmin,
    admin_clients.ClientAdmin,
    admin_maintenance.MaintenanceAdmin,
    transaction_check.TransactionCheckService,
]


@pytest.mark.parametrize("cls", PROCESSOR_CLASSES, ids=lambda c: c.__name__)
def test_constructors_name_their_collaborators(cls: type) -> None:
    # Every parameter has a type that is not a catch-all: no ``ctx`` bag, no Any.
    params = list(inspect.signature(cls).parameters.values())
    assert params, cls
    for param in params:
        assert param.name not in ("ctx", "context", "broker"), (cls.__name__, param.name)
        annotation = str(param.annotation)
        assert annotation not in ("Any", "object", str(inspect.Parameter.empty)), (
            cls.__name__,
            param.name,
        )
        assert "Context" not in annotation, (cls.__name__, param.name, annotation)


def test_every_processor_module_is_covered() -> None:
    # A new request family module is checked by the AST test automatically; its class
    # should join PROCESSOR_CLASSES too.
    modules = {c.__module__.rsplit(".", 1)[1] for c in PROCESSOR_CLASSES}
    helpers = {"__init__", "admin", "refusal", "property_filter"}
    families = {p.stem for p in PROCESSOR_DIR.glob("*.py")} - helpers
    assert families <= modules | {"transaction_check"}, families - modules
