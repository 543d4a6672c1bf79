"""Name server access: the configured addresses, fail-over between them, route queries.

A client is given one or more name servers (``"host:port"``, several separated by
``;``). Requests go to the one that answered last; on a transport failure the next
one is tried, as RocketMQ's ``NettyRemotingClient.getAndCreateNameserverChannel``
rotates. A route query answered with REQUEST_CODE_NOT_SUPPORTED comes from a broker
(the name server always serves it): that is a set-up mistake, reported as
:class:`~rocklet.client.errors.NotANameServerError` rather than a bare response code.
"""

from __future__ import annotations

from rocklet.client.errors import NotANameServerError, TransportError, error_for_code
from rocklet.client.pool import Invoke
from rocklet.protocol.bodies.route import TopicRouteData
from rocklet.protocol.codes import RequestCode, ResponseCode
from rocklet.protocol.command import RemotingCommand
from rocklet.protocol.headers.namesrv import GetRouteInfoRequestHeader

__all__ = ["NameServers", "parse_namesrv"]


def parse_namesrv(namesrv: str) -> list[str]:
    """The addresses in a name server setting (``;`` or ``,`` separated).

    Raises:
        ValueError: No address in it.
    """
    addrs = [a.strip() for a in namesrv.replace(",", ";").split(";") if a.strip()]
    if not addrs:
        raise ValueError(f"no name server address in {namesrv!r}")
    return addrs


class NameServers:
    """The name servers of one client instance.

    Args:
        namesrv: Name server address(es), ``"host:port"``; several separated by ``;``.
        invoke: Sends a request to an address.

    Raises:
        ValueError: ``namesrv`` holds no address.
    """

    def __init__(self, namesrv: str, invoke: Invoke) -> None:
        self.addrs: tuple[str, ...] = tuple(parse_namesrv(namesrv))
        self._invoke = invoke
        self._index = 0

    def __contains__(self, addr: object) -> bool:
        return addr in self.addrs

    async def invoke(self, cmd: RemotingCommand, timeout_s: float | None = None) -> RemotingCommand:
        """Send a request to a name server, trying the next one on transport failure.

        Args:
            cmd: The request.
            timeout_s: Answer timeout per name server. Default: the pool's.

        Returns:
            The answer, whatever its code.

        Raises:
            TransportError: Every name server failed (the last failure).
        """
        return (await self._invoke_any(cmd, timeout_s))[1]

    async def _invoke_any(
        self, cmd: RemotingCommand, timeout_s: float | None
    ) -> tuple[str, RemotingCommand]:
        addrs = self.addrs
        last: TransportError | None = None
        for i in range(len(addrs)):
            index = (self._index + i) % len(addrs)
            try:
                answer = await self._invoke(addrs[index], cmd, timeout_s)
            except TransportError as exc:
                last = exc
                continue
            self._index = index  # stay with the one that works
            return addrs[index], answer
        assert last is not None
        raise last

    async def fetch_route(self, topic: str) -> TopicRouteData | None:
        """Ask for a topic's route (GET_ROUTEINFO_BY_TOPIC).

        Args:
            topic: The topic.

        Returns:
            The route, or ``None`` when the name server does not know the topic.

        Raises:
            TransportError: No name server answered.
            NotANameServerError: The address that answered is a broker.
            BrokerError: Any other error answer.
        """
        header = GetRouteInfoRequestHeader(topic, accept_standard_json_only=True)
        cmd = RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields=header.to_ext_fields())
        addr, answer = await self._invoke_any(cmd, None)
        if answer.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        if answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            raise NotANameServerError(addr)
        if answer.code != ResponseCode.SUCCESS:
            raise error_for_code(answer.code, answer.remark, addr=addr)
        return TopicRouteData.from_json(answer.body)
