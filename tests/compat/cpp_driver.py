"""Drive the official RocketMQ C++ client (PyPI ``rocketmq==0.4.4``) for one job.

Run it as a child process, never inside pytest: the wheel is a ctypes binding of
``librocketmq.so``, which runs its own threads and can crash or hang the interpreter
that loads it. Usage::

    python cpp_driver.py '<json command>'

The command's ``op`` picks the job; every job prints one JSON line per event to stdout
and ends with a ``{"event": "done", ...}`` summary line:

* ``produce``: ``sends`` is a list of sends, each ``{"mode": "sync" | "oneway" |
  "orderly" | "batch", "tags", "keys", "body", "shard", "delay_level", "props",
  "messages": [...]}`` (``messages`` for a batch). One ``sent`` (or ``error``) line each.
  With ``control`` it then prints ``ready`` and takes more ``{"sends": [...]}`` lines on
  stdin until ``stop``.
* ``load``: ``count`` sync sends of ``body_size`` bytes from ``threads`` threads sharing
  one producer (with ``seconds``, sends stop then even short of ``count``, which may be
  left out); the summary has msg/s and the send latency percentiles (benchmarks).
* ``push``: a push consumer (``orderly``, ``model`` clustering/broadcasting, a tag
  ``expression``) printing a ``consumed`` line per delivery. Deliveries of messages
  whose key is in ``fail_first_keys`` fail the first time (RECONSUME_LATER). It stops
  after ``expect_count`` successful deliveries, on a ``stop`` line on stdin
  (``control``), or after ``timeout_s``; ``instance`` and ``threads`` set the client's
  instance name and consume threads.
* ``pull``: the wheel's ``PullConsumer`` reads every queue of the topic until
  NO_NEW_MSG (or for at most ``seconds``), printing a ``consumed`` line per message.

With ``quiet`` the per-message lines are left out (benchmarks). With ``access_key`` and
``secret_key`` the client signs its requests (ACL; ``set_session_credentials``, channel
``channel`` or ``"ALIYUN"``, the C++ client's default).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from rocketmq.client import Message, Producer, PullConsumer, RecvMessage
from rocketmq.exceptions import ffi_check
from rocketmq.ffi import MSG_CALLBACK_FUNC, MessageModel, dll

_print_lock = threading.Lock()
_CONSUME_SUCCESS = 0
_RECONSUME_LATER = 1
_BODY_INLINE_MAX = 512
_MAX_REASONS = 5


#: Clean-ups a job leaves until its summary has been printed.
_AFTER_DONE: list[Callable[[], None]] = []


def emit(event: str, **fields: Any) -> None:
    """Print one event line (thread-safe; the C++ consume threads call it too)."""
    line = json.dumps({"event": event, **fields}, separators=(",", ":"))
    with _print_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _text(raw: bytes | str | None) -> str:
    if raw is None:
        return ""
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw


def _body(spec: dict[str, Any]) -> str:
    # The wheel's set_body passes a C string: bodies are text without NUL bytes.
    if "body" in spec:
        return str(spec["body"])
    size = int(spec.get("body_size", 16))
    return ("0123456789abcdef" * (size // 16 + 1))[:size]


def _message(topic: str, spec: dict[str, Any]) -> Any:
    msg = Message(topic)
    if spec.get("tags"):
        msg.set_tags(spec["tags"])
    if spec.get("keys"):
        msg.set_keys(spec["keys"])
    for name, value in (spec.get("props") or {}).items():
        msg.set_property(name, value)
    if spec.get("delay_level"):
        msg.set_delay_time_level(int(spec["delay_level"]))
    msg.set_body(_body(spec))
    return msg


def _producer(cmd: dict[str, Any]) -> Any:
    producer = Producer(cmd.get("group", "PG_COMPAT"), timeout=int(cmd.get("timeout_ms", 3000)))
    producer.set_namesrv_addr(cmd["namesrv"])
    if cmd.get("access_key"):
        producer.set_session_credentials(cmd["access_key"], cmd["secret_key"], _channel(cmd))
    producer.start()
    return producer


def _channel(cmd: dict[str, Any]) -> str:
    return str(cmd.get("channel", "ALIYUN"))


# --- produce -------------------------------------------------------------------------


def _send_one(producer: Any, topic: str, spec: dict[str, Any]) -> dict[str, Any]:
    mode = spec.get("mode", "sync")
    if mode == "batch":
        result = producer.send_batch([_message(topic, m) for m in spec["messages"]])
        return {"status": result.status.name, "msg_id": result.msg_id, "offset": result.offset}
    msg = _message(topic, spec)
    if mode == "oneway":
        producer.send_oneway(msg)
        return {}
    if mode == "orderly":
        chosen: list[int] = []

        def select(queue_count: int, _msg: Any, arg: Any) -> int:
            queue = int(ctypes.cast(arg, ctypes.POINTER(ctypes.c_int))[0]) % queue_count
            chosen.append(queue)
            return queue

        result = producer.send_orderly(msg, int(spec.get("shard", 0)), queue_selector=select)
        return {
            "status": result.status.name,
            "msg_id": result.msg_id,
            "offset": result.offset,
            "queue": chosen[-1],
        }
    result = producer.send_sync(msg)
    return {"status": result.status.name, "msg_id": result.msg_id, "offset": result.offset}


def _send_and_report(producer: Any, topic: str, index: int, spec: dict[str, Any]) -> bool:
    started = time.time()
    try:
        outcome = _send_one(producer, topic, spec)
    except Exception as exc:
        emit("error", i=index, keys=spec.get("keys"), error=f"{type(exc).__name__}: {exc}")
        return False
    emit(
        "sent",
        i=index,
        mode=spec.get("mode", "sync"),
        keys=spec.get("keys"),
        t_start=started,
        t_end=time.time(),
        **outcome,
    )
    return True


def produce(cmd: dict[str, Any]) -> dict[str, Any]:
    """Run the ``produce`` job.

    With ``control``, after the initial ``sends`` it prints ``ready`` and reads more
    from stdin, one ``{"sends": [...]}`` object per line, until ``stop`` or EOF.
    """
    producer = _producer(cmd)
    outcomes: list[bool] = []
    try:
        for spec in cmd.get("sends", []):
            outcomes.append(_send_and_report(producer, cmd["topic"], len(outcomes), spec))
        if cmd.get("control"):
            emit("ready")
            for line in sys.stdin:
                if line.strip() == "stop":
                    break
                for spec in json.loads(line)["sends"]:
                    outcomes.append(_send_and_report(producer, cmd["topic"], len(outcomes), spec))
                emit("flushed", total=len(outcomes))
    finally:
        producer.shutdown()
    return {"sent": outcomes.count(True), "errors": outcomes.count(False)}


def _first_send(producer: Any, msg: Any, within_s: float = 15.0) -> None:
    """Send the first message, retrying while its route lookup fails.

    The client asks the name server once per send until it has a route; under load
    that ask can time out ("No route info of this topic") although the topic is routed,
    which must not end a benchmark run before it starts.
    """
    deadline = time.monotonic() + within_s
    while True:
        try:
            producer.send_sync(msg)
            return
        except Exception:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.2)  # the next lookup; nothing to wait on in the wheel's API


def load(cmd: dict[str, Any]) -> dict[str, Any]:
    """Run the ``load`` job: timed sync sends from several threads."""
    producer = _producer(cmd)
    topic, threads = cmd["topic"], int(cmd.get("threads", 1))
    # A time-capped run (``seconds``) has no count of its own: the cap ends it.
    count = int(cmd.get("count", sys.maxsize // 2))
    cap_s = float(cmd.get("seconds", "inf"))
    body = _body({"body_size": int(cmd.get("body_size", 1024))})
    _first_send(producer, _message(topic, {"body": body}))  # route lookup and connect: warm-up
    latencies: list[list[float]] = [[] for _ in range(threads)]
    failures = [0] * threads
    reasons: list[str] = []

    def worker(slot: int) -> None:
        mine = latencies[slot]
        for _ in range(count // threads + (slot < count % threads)):
            if time.perf_counter() >= deadline:
                break
            msg = Message(topic)
            msg.set_body(body)
            began = time.perf_counter()
            try:
                producer.send_sync(msg)
            except Exception as exc:
                failures[slot] += 1
                if len(reasons) < _MAX_REASONS:
                    reasons.append(f"{type(exc).__name__}: {exc}")
                continue
            mine.append(time.perf_counter() - began)

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    began = time.perf_counter()
    deadline = began + cap_s
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    elapsed = time.perf_counter() - began
    # After the summary is out: the C++ client has been seen to abort in its shutdown
    # (boost::thread_interrupted), which would otherwise lose a finished run's figures.
    _AFTER_DONE.append(producer.shutdown)
    merged = sorted(x for per in latencies for x in per)
    return {
        "sent": len(merged),
        "errors": sum(failures),
        "error_samples": reasons,
        "seconds": elapsed,
        "msgs_per_s": len(merged) / elapsed,
        "p50_ms": _percentile(merged, 0.50) * 1000,
        "p99_ms": _percentile(merged, 0.99) * 1000,
    }


def _percentile(ordered: list[float], q: float) -> float:
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# --- consume -------------------------------------------------------------------------


def _describe(msg: Any) -> dict[str, Any]:
    body = msg.body or b""
    return {
        "topic": msg.topic,
        "tags": _text(msg.tags),
        "keys": _text(msg.keys),
        # Big bodies are compared by digest, to keep the lines short.
        "body": _text(body) if len(body) <= _BODY_INLINE_MAX else None,
        "body_sha256": hashlib.sha256(body).hexdigest(),
        "body_len": len(body),
        "queue_id": msg.queue_id,
        "queue_offset": msg.queue_offset,
        "reconsume_times": msg.reconsume_times,
        "msg_id": msg.id,
        "store_timestamp": msg.store_timestamp,
        "born_timestamp": msg.born_timestamp,
        "retry_topic": _text(msg.get_property("RETRY_TOPIC")),
        "t": time.time(),
        "thread": threading.get_ident(),
    }


class _Deliveries:
    """Counts deliveries, decides which fail, and signals when to stop."""

    def __init__(self, cmd: dict[str, Any]) -> None:
        self.count = 0
        self.failed = 0
        self.done = threading.Event()
        self._expect = cmd.get("expect_count")
        self._fail_first = set(cmd.get("fail_first_keys") or [])
        self._quiet = bool(cmd.get("quiet"))
        self._lock = threading.Lock()

    def on_message(self, msg: Any) -> int:
        info = _describe(msg) if not self._quiet else None
        keys = _text(msg.keys)
        with self._lock:
            if keys in self._fail_first:
                self._fail_first.discard(keys)
                self.failed += 1
                fail = True
            else:
                self.count += 1
                fail = False
            reached = self._expect is not None and self.count >= int(self._expect)
        if info is not None:
            emit("consumed", failed=fail, **info)
        if reached:
            self.done.set()
        return _RECONSUME_LATER if fail else _CONSUME_SUCCESS


class _PushConsumer:
    """The wheel's C API for a push consumer, with a callback that returns a status.

    The wheel's own ``PushConsumer.subscribe`` re-raises the callback's exception
    inside the ctypes callback, so the status the C++ client receives for a failed
    message is whatever was left in the return slot. Calling the same C functions with
    a callback that returns RECONSUME_LATER itself makes the failure deterministic.
    """

    def __init__(self, cmd: dict[str, Any], on_message: Callable[[Any], int]) -> None:
        self._handle = dll.CreatePushConsumer(cmd["group"].encode())
        broadcasting = cmd.get("model") == "broadcasting"
        model = MessageModel.BROADCASTING if broadcasting else MessageModel.CLUSTERING
        ffi_check(dll.SetPushConsumerMessageModel(self._handle, model))
        ffi_check(dll.SetPushConsumerNameServerAddress(self._handle, cmd["namesrv"].encode()))
        if cmd.get("instance"):
            ffi_check(dll.SetPushConsumerInstanceName(self._handle, cmd["instance"].encode()))
        if cmd.get("threads"):
            ffi_check(dll.SetPushConsumerThreadCount(self._handle, int(cmd["threads"])))
        if cmd.get("access_key"):
            keys = (cmd["access_key"], cmd["secret_key"], _channel(cmd))
            ffi_check(
                dll.SetPushConsumerSessionCredentials(self._handle, *(k.encode() for k in keys))
            )
        topic, expression = cmd["topic"].encode(), cmd.get("expression", "*").encode()
        ffi_check(dll.Subscribe(self._handle, topic, expression))
        # Keep a reference: the C++ side holds only the raw function pointer.
        self._callback = MSG_CALLBACK_FUNC(lambda _consumer, msg: on_message(RecvMessage(msg)))
        register = (
            dll.RegisterMessageCallbackOrderly
            if cmd.get("orderly")
            else dll.RegisterMessageCallback
        )
        ffi_check(register(self._handle, self._callback))

    def start(self) -> None:
        ffi_check(dll.StartPushConsumer(self._handle))

    def shutdown(self) -> None:
        ffi_check(dll.ShutdownPushConsumer(self._handle))


def _watch_stdin(stop: threading.Event) -> None:
    for line in sys.stdin:
        if line.strip() == "stop":
            break
    stop.set()  # "stop", or the test went away (EOF)


def push(cmd: dict[str, Any]) -> dict[str, Any]:
    """Run the ``push`` job."""
    deliveries = _Deliveries(cmd)
    consumer = _PushConsumer(cmd, deliveries.on_message)
    if cmd.get("control"):
        threading.Thread(target=_watch_stdin, args=(deliveries.done,), daemon=True).start()
    began = time.perf_counter()
    consumer.start()
    emit("started")
    reached = deliveries.done.wait(float(cmd.get("timeout_s", 60)))
    elapsed = time.perf_counter() - began
    count = deliveries.count
    consumer.shutdown()
    return {
        "consumed": count,
        "failed": deliveries.failed,
        "seconds": elapsed,
        "stopped": "signal" if reached else "timeout",
    }


def pull(cmd: dict[str, Any]) -> dict[str, Any]:
    """Run the ``pull`` job."""
    consumer = PullConsumer(cmd.get("group", "CG_COMPAT_PULL"))
    consumer.set_namesrv_addr(cmd["namesrv"])
    if cmd.get("access_key"):
        consumer.set_session_credentials(cmd["access_key"], cmd["secret_key"], _channel(cmd))
    consumer.start()
    quiet, count = bool(cmd.get("quiet")), 0
    began = time.perf_counter()
    deadline = began + float(cmd.get("seconds", "inf"))
    try:
        for msg in consumer.pull(
            cmd["topic"], cmd.get("expression", "*"), int(cmd.get("max_num", 32))
        ):
            count += 1
            if not quiet:
                emit("consumed", **_describe(msg))
            if time.perf_counter() >= deadline:
                break
    finally:
        elapsed = time.perf_counter() - began
        consumer.shutdown()
    return {"consumed": count, "seconds": elapsed}


JOBS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "produce": produce,
    "load": load,
    "push": push,
    "pull": pull,
}


def main() -> None:
    """Run the job given as the first argument and exit without running finalizers."""
    cmd = json.loads(sys.argv[1])
    try:
        summary = JOBS[cmd["op"]](cmd)
    except Exception as exc:
        emit("fatal", error=f"{type(exc).__name__}: {exc}")
        status = 1
    else:
        emit("done", **summary)
        status = 0
        for close in _AFTER_DONE:
            close()
    # The wheel's __del__ methods shut the clients down a second time, and the C++
    # library's static destructors have been seen to hang at exit: leave at once.
    sys.stdout.flush()
    os._exit(status)


if __name__ == "__main__":
    main()
