"""A small pcap/pcapng reader that rebuilds each TCP connection's byte streams.

Golden-data tests feed the real broker captures to :class:`rocklet.protocol.FrameDecoder`, which
needs each direction of each connection as one contiguous byte string. Segments are
placed by sequence number, so retransmitted, overlapping and out-of-order segments
are handled the way a receiving TCP stack would handle them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import dpkt

_SEQ_MOD = 1 << 32


class Endpoint(NamedTuple):
    """One side of a connection."""

    ip: str
    port: int


class Segment(NamedTuple):
    """One TCP segment as captured."""

    src: Endpoint
    dst: Endpoint
    seq: int
    syn: bool
    payload: bytes


@dataclass
class _Direction:
    isn: int | None = None
    segments: list[tuple[int, bytes]] = field(default_factory=list)


@dataclass(frozen=True)
class Connection:
    """Both byte streams of one TCP connection.

    Attributes:
        client: The side that sent the first SYN (or the first segment seen).
        server: The other side.
        to_server: Bytes the client sent, in stream order.
        to_client: Bytes the server sent, in stream order.
    """

    client: Endpoint
    server: Endpoint
    to_server: bytes
    to_client: bytes


def reassemble(segments: Iterable[tuple[int, bytes]], isn: int | None = None) -> bytes:
    """Join one direction's segments into its byte stream.

    Args:
        segments: ``(sequence number, payload)`` pairs in capture order.
        isn: Sequence number of the first payload byte (the SYN's plus one); when
            unknown, the smallest sequence number seen is used.

    Returns:
        The stream's bytes.

    Raises:
        ValueError: A byte range is missing (the capture lost a segment).
    """
    segs = [(seq, data) for seq, data in segments if data]
    if not segs:
        return b""
    base = isn if isn is not None else min(seq for seq, _ in segs)
    ordered = sorted(((seq - base) % _SEQ_MOD, data) for seq, data in segs)
    out = bytearray()
    for start, data in ordered:
        if start > len(out):
            raise ValueError(f"stream has a gap at relative offset {len(out)}")
        # A retransmission or an overlapping segment repeats bytes we already have.
        out += data[len(out) - start :]
    return bytes(out)


def read_segments(path: Path) -> Iterator[Segment]:
    """Yield every TCP segment of an Ethernet capture (pcap or pcapng).

    Args:
        path: The capture file.

    Yields:
        Segments in capture order; non-TCP frames are skipped.
    """
    with path.open("rb") as fh:
        magic = fh.read(4)
        fh.seek(0)
        reader: Any = (
            dpkt.pcapng.Reader(fh) if magic == b"\x0a\x0d\x0d\x0a" else dpkt.pcap.Reader(fh)
        )
        for _ts, frame in reader:
            ip = dpkt.ethernet.Ethernet(frame).data
            if not isinstance(ip, dpkt.ip.IP | dpkt.ip6.IP6):
                continue
            tcp = ip.data
            if not isinstance(tcp, dpkt.tcp.TCP):
                continue
            src = Endpoint(_ip_text(ip.src), int(tcp.sport))
            dst = Endpoint(_ip_text(ip.dst), int(tcp.dport))
            syn = bool(tcp.flags & dpkt.tcp.TH_SYN)
            yield Segment(src, dst, int(tcp.seq), syn, bytes(tcp.data))


def _ip_text(raw: bytes) -> str:
    if len(raw) == 4:
        return ".".join(str(b) for b in raw)
    return raw.hex()


def connections(segments: Iterable[Segment]) -> list[Connection]:
    """Group segments into connections and reassemble both directions.

    Args:
        segments: Segments in capture order.

    Returns:
        The connections, in the order their first segment was captured.
    """
    order: list[tuple[Endpoint, Endpoint]] = []
    flows: dict[tuple[Endpoint, Endpoint], _Direction] = {}
    for seg in segments:
        key = (seg.src, seg.dst)
        if key not in flows and (seg.dst, seg.src) not in flows:
            # A connection's client is whoever sent the first SYN without ACK; the
            # captures start before every connect, so that is the first segment.
            order.append(key)
        direction = flows.setdefault(key, _Direction())
        if seg.syn:
            direction.isn = (seg.seq + 1) % _SEQ_MOD
        direction.segments.append((seg.seq, seg.payload))
    out = []
    for client, server in order:
        up = flows.get((client, server), _Direction())
        down = flows.get((server, client), _Direction())
        out.append(
            Connection(
                client=client,
                server=server,
                to_server=reassemble(up.segments, up.isn),
                to_client=reassemble(down.segments, down.isn),
            )
        )
    return out
