"""Shared pieces of the ACL integration tests: the accounts file, raw signed requests."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import yaml

from rocklet.client.instance import ClientInstance
from rocklet.protocol.acl import Credentials
from rocklet.protocol.command import RemotingCommand

__all__ = [
    "ADMIN",
    "CONSUMER",
    "PRODUCER",
    "TOPIC",
    "acl_document",
    "raw_request",
    "write_acl",
]

TOPIC: Final = "acl-topic"
GROUP: Final = "acl-group"
#: Sends to TOPIC only.
PRODUCER: Final = Credentials("producer1", "producer-secret-1")
#: Reads TOPIC in GROUP only.
CONSUMER: Final = Credentials("consumer1", "consumer-secret-1")
#: Everything.
ADMIN: Final = Credentials("admin-user", "admin-secret-1")


def acl_document(**producer_overrides: Any) -> dict[str, Any]:
    """The accounts the tests use; ``producer_overrides`` change the producer's entry."""
    producer = {
        "accessKey": PRODUCER.access_key,
        "secretKey": PRODUCER.secret_key,
        "admin": False,
        "defaultTopicPerm": "DENY",
        "defaultGroupPerm": "SUB",
        "topicPerms": [f"{TOPIC}=PUB"],
        **producer_overrides,
    }
    return {
        "globalWhiteRemoteAddresses": ["10.10.103.*"],
        "accounts": [
            producer,
            {
                "accessKey": CONSUMER.access_key,
                "secretKey": CONSUMER.secret_key,
                "defaultTopicPerm": "DENY",
                "defaultGroupPerm": "DENY",
                "topicPerms": [f"{TOPIC}=SUB"],
                "groupPerms": [f"{GROUP}=SUB"],
            },
            {"accessKey": ADMIN.access_key, "secretKey": ADMIN.secret_key, "admin": True},
        ],
    }


def write_acl(path: Path, document: dict[str, Any]) -> None:
    """Write ``document`` as YAML to ``path`` (its directory created), readable by us only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    path.chmod(0o600)


async def raw_request(
    instance: ClientInstance,
    addr: str,
    code: int,
    ext: dict[str, str] | None = None,
    body: bytes = b"",
) -> RemotingCommand:
    """Send one request through ``instance`` (signed when it has credentials)."""
    return await instance.invoke(addr, RemotingCommand(code, ext_fields=ext or {}, body=body))
