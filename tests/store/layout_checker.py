"""Test-side checker of RocketMQ's store layout, written from docs/store-format.md.

It does not use the store package: it reads the files with struct and zlib only, and
checks every invariant the format document states, so it can judge both stores we
write and the golden store RocketMQ wrote.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

MSG_MAGIC = 0xDAA320A7
BLANK_MAGIC = 0xCBD43194


@dataclass
class Record:
    """The fields of one commitlog record the checker compares."""

    offset: int
    size: int
    topic: str
    queue_id: int
    queue_offset: int
    store_ts: int
    sys_flag: int
    props: dict[str, str]


@dataclass
class LayoutReport:
    """Everything the checker found."""

    records: dict[int, Record] = field(default_factory=dict)
    cq_entries: int = 0
    index_entries: int = 0
    errors: list[str] = field(default_factory=list)


def _java_hash(text: str) -> int:
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def _props(raw: bytes) -> dict[str, str]:
    out = {}
    for item in raw.decode("utf-8", "replace").split("\x02"):
        k, sep, v = item.partition("\x01")
        if sep and k and v:
            out[k] = v
    return out


def _walk_commitlog(root: Path, seg_size: int, rep: LayoutReport) -> int:
    files = sorted((root / "commitlog").iterdir())
    end = 0
    for i, path in enumerate(files):
        if not (len(path.name) == 20 and path.name.isdigit()):
            rep.errors.append(f"bad commitlog name {path.name}")
            continue
        base = int(path.name)
        data = path.read_bytes()
        if base % seg_size or len(data) != seg_size:
            rep.errors.append(f"{path.name}: bad base or size {len(data)}")
        if i and base != int(files[i - 1].name) + seg_size:
            rep.errors.append(f"{path.name}: segments not contiguous")
        pos = 0
        while pos + 8 <= len(data):
            size, magic = struct.unpack_from(">iI", data, pos)
            if magic == BLANK_MAGIC:
                if size != len(data) - pos:
                    rep.errors.append(f"{path.name}@{pos}: blank size {size} != rest")
                if i == len(files) - 1:
                    rep.errors.append("blank in the last segment")
                break
            if size == 0 and magic == 0:
                if i == len(files) - 1 and not data[pos:].strip(b"\0"):
                    break
                rep.errors.append(f"{path.name}@{pos}: zeros where a record should be")
            elif magic != MSG_MAGIC:
                rep.errors.append(f"{path.name}@{pos}: bad magic {magic:#x}")
            else:
                rec = _parse(data, pos, base + pos, rep)
                if rec is not None:
                    rep.records[rec.offset] = rec
                    pos += size
                    end = base + pos
                    continue
            nxt = _next_record(data, pos, base)
            if nxt is None:
                break
            pos = nxt
    return end


def _next_record(data: bytes, pos: int, base: int) -> int | None:
    """Where the next record (magic and PHYSICALOFFSET = its own offset) or blank starts."""
    candidates = []
    for magic in (MSG_MAGIC, BLANK_MAGIC):
        at = pos + 1 + 4
        needle = struct.pack(">I", magic)
        while (at := data.find(needle, at)) >= 0:
            start = at - 4
            size = struct.unpack_from(">i", data, start)[0]
            if magic == BLANK_MAGIC and size == len(data) - start:
                candidates.append(start)
                break
            own_offset = start + 36 <= len(data) and (
                struct.unpack_from(">q", data, start + 28)[0] == base + start
            )
            if magic == MSG_MAGIC and own_offset:
                candidates.append(start)
                break
            at += 1
    return min(candidates, default=None)


def _parse(data: bytes, pos: int, offset: int, rep: LayoutReport) -> Record | None:
    size = struct.unpack_from(">i", data, pos)[0]
    if size < 91 or pos + size > len(data):
        rep.errors.append(f"record @{offset}: size {size} out of range")
        return None
    size, _m, crc, qid, _flag, qoff, phy, sysf, _born = struct.unpack_from(">iIiiiqqiq", data, pos)
    p = pos + 48 + (20 if sysf & 0x10 else 8)
    (store_ts,) = struct.unpack_from(">q", data, p)
    p += 8 + (20 if sysf & 0x20 else 8) + 12
    (blen,) = struct.unpack_from(">i", data, p)
    if blen < 0 or p + 4 + blen + 3 > pos + size:
        rep.errors.append(f"record @{offset}: field lengths do not add up to TOTALSIZE")
        return None
    body = data[p + 4 : p + 4 + blen]
    p += 4 + blen
    tlen = data[p]
    topic = data[p + 1 : p + 1 + tlen].decode("utf-8", "replace")
    p += 1 + tlen
    (plen,) = struct.unpack_from(">h", data, p)
    if p + 2 + plen != pos + size:
        rep.errors.append(f"record @{offset}: field lengths do not add up to TOTALSIZE")
        return None
    if phy != offset:
        rep.errors.append(f"record @{offset}: PHYSICALOFFSET says {phy}")
        return None
    if zlib.crc32(body) & 0x7FFFFFFF != crc:
        rep.errors.append(f"record @{offset}: BODYCRC mismatch")
        return None
    props = _props(data[p + 2 : p + 2 + plen])
    return Record(offset, size, topic, qid, qoff, store_ts, sysf, props)


def _walk_consume_queues(root: Path, per_file: int, rep: LayoutReport) -> None:
    cq_root = root / "consumequeue"
    if not cq_root.exists():
        return
    for qdir in sorted(cq_root.glob("*/*")):
        topic, qid = qdir.parent.name, int(qdir.name)
        for path in sorted(qdir.iterdir()):
            base = int(path.name)
            data = path.read_bytes()
            if len(data) != per_file * 20 or base % (per_file * 20):
                rep.errors.append(f"{path}: bad size or name")
            for n, (phy, size, tags) in enumerate(struct.iter_unpack(">qiq", data)):
                index = base // 20 + n
                if phy == 0 and size == 0:
                    break
                if size == 0x7FFFFFFF and phy == 0:
                    continue  # pre-blank
                rep.cq_entries += 1
                _check_entry(rep, topic, qid, index, phy, size, tags)


def _check_entry(
    rep: LayoutReport, topic: str, qid: int, index: int, phy: int, size: int, tags: int
) -> None:
    rec = rep.records.get(phy)
    where = f"cq {topic}/{qid}#{index}"
    if rec is None:
        if rep.records and phy >= min(rep.records):
            rep.errors.append(f"{where}: no record at {phy}")
        return
    if (rec.size, rec.topic, rec.queue_id, rec.queue_offset) != (size, topic, qid, index):
        rep.errors.append(f"{where}: points at {rec.topic}/{rec.queue_id}#{rec.queue_offset}")
    if topic != "SCHEDULE_TOPIC_XXXX":
        want = _java_hash(rec.props["TAGS"]) if rec.props.get("TAGS") else 0
        if tags != want:
            rep.errors.append(f"{where}: tags code {tags} != {want}")
    elif tags <= rec.store_ts:
        rep.errors.append(f"{where}: deliver time {tags} not after store time")


def _walk_index(root: Path, slots: int, max_entries: int, rep: LayoutReport) -> None:
    idx = root / "index"
    if not idx.exists():
        return
    for path in sorted(idx.iterdir()):
        data = path.read_bytes()
        if len(path.name) != 17 or not path.name.isdigit():
            rep.errors.append(f"index name {path.name}")
        if len(data) != 40 + slots * 4 + max_entries * 20:
            rep.errors.append(f"{path.name}: size {len(data)}")
            continue
        begin_ts, _end_ts, _bp, _ep, _slot_count, count = struct.unpack_from(">qqqqii", data)
        base = 40 + slots * 4
        for s in range(slots):
            (n,) = struct.unpack_from(">i", data, 40 + s * 4)
            seen = 0
            while 0 < n < count and seen < count:
                h, phy, diff, prev = struct.unpack_from(">iqii", data, base + n * 20)
                rep.index_entries += 1
                if h % slots != s:
                    rep.errors.append(f"{path.name}: entry {n} in wrong slot")
                _check_index_entry(rep, path.name, h, phy, begin_ts + diff * 1000)
                n, seen = prev, seen + 1


def _check_index_entry(rep: LayoutReport, name: str, h: int, phy: int, when: int) -> None:
    rec = rep.records.get(phy)
    if rec is None:
        if rep.records and phy >= min(rep.records):
            rep.errors.append(f"{name}: index entry points at non-record {phy}")
        return
    keys = [*rec.props.get("KEYS", "").split(), rec.props.get("UNIQ_KEY", "")]
    hashes = {abs(_java_hash(f"{rec.topic}#{k}")) for k in keys if k}
    if h not in hashes:
        rep.errors.append(f"{name}: entry hash {h} matches no key of record {phy}")
    if not rec.store_ts - 1000 < when <= rec.store_ts:
        rep.errors.append(f"{name}: entry time {when} vs store time {rec.store_ts}")


def check_store(
    root: Path, seg_size: int, cq_entries: int, slots: int, max_entries: int
) -> LayoutReport:
    """Walk a store directory and collect every layout violation.

    Args:
        root: The store root.
        seg_size: Commitlog segment size.
        cq_entries: Consume-queue entries per file.
        slots: Index hash slots.
        max_entries: Index entries per file.

    Returns:
        The report; ``errors`` is empty for a well-formed store.
    """
    rep = LayoutReport()
    _walk_commitlog(root, seg_size, rep)
    _walk_consume_queues(root, cq_entries, rep)
    _walk_index(root, slots, max_entries, rep)
    cp = (root / "checkpoint").read_bytes() if (root / "checkpoint").exists() else b""
    if cp and len(cp) != 4096:
        rep.errors.append("checkpoint is not one 4 KiB page")
    return rep
