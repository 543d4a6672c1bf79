"""A Python process's stacks as text, for running info asked with ``jstackEnable``.

A Java client answers GET_CONSUMER_RUNNING_INFO with ``jstackEnable=true`` by putting
every thread's stack in ``ConsumerRunningInfo.jstack``; ``mqadmin consumerStatus -s``
prints it. A Rocklet consumer spends its life in asyncio tasks, not threads: a thread
dump alone would show the event loop waiting in ``select`` and nothing of where a
listener or a pull is stuck. So the dump has two parts, in a format of our own:

- every thread (``sys._current_frames``), named as :mod:`threading` knows it;
- every unfinished asyncio task of the loop the dump is taken on (the client
  instance's), with its coroutine stack followed through the ``await`` chain (what
  ``Task.get_stack`` leaves out: it stops at the outermost coroutine) down to what the
  innermost one awaits.

Each stack is printed innermost call last, as Python tracebacks are. The dump is
bounded: at most :data:`MAX_FRAMES` frames per stack (the innermost kept) and
:data:`MAX_CHARS` characters in all, and it says where it cut. Frames are captured on
the event loop (cheap, and the only safe place to read the tasks); the source lines
are looked up afterwards in a worker thread, since that may read files.

"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Final

__all__ = ["MAX_CHARS", "MAX_FRAMES", "stack_dump"]

#: Frames shown per thread or task; the innermost are kept.
MAX_FRAMES: Final = 48
#: The dump's size limit, in characters (the running-info body must stay small).
MAX_CHARS: Final = 256 * 1024


@dataclass(frozen=True, slots=True)
class _Stack:
    """One thread's or task's stack, captured but not yet formatted."""

    is_thread: bool
    heading: str
    frames: list[traceback.FrameSummary]
    cut: int  #: outer frames left out
    awaiting: str | None = None  #: what the innermost coroutine awaits (tasks)


def _summary(frame: FrameType, lineno: int | None = None) -> traceback.FrameSummary:
    # lookup_line=False: the source line is read later, off the event loop.
    code = frame.f_code
    line = frame.f_lineno if lineno is None else lineno
    return traceback.FrameSummary(code.co_filename, line, code.co_name, lookup_line=False)


def _thread_stack(
    ident: int, frame: FrameType, thread: threading.Thread | None, max_frames: int
) -> _Stack:
    frames = [_summary(f, n) for f, n in traceback.walk_stack(frame)]  # innermost first
    if thread is None:
        heading = f"thread ident {ident} (not started by threading)"
    else:
        kind = "daemon" if thread.daemon else "non-daemon"
        heading = f'thread "{thread.name}" (ident {ident}, native id {thread.native_id}, {kind})'
    kept = frames[:max_frames]
    kept.reverse()
    return _Stack(True, heading, kept, len(frames) - len(kept))


def _await_chain(coro: object) -> tuple[list[traceback.FrameSummary], str | None]:
    """The frames of a coroutine and of everything it awaits, outermost first."""
    frames: list[traceback.FrameSummary] = []
    current: object = coro
    while current is not None:
        frame = (
            getattr(current, "cr_frame", None)
            or getattr(current, "ag_frame", None)
            or getattr(current, "gi_frame", None)
        )
        if frame is None:
            break  # a future's iterator, or a coroutine that has finished
        frames.append(_summary(frame))
        current = (
            getattr(current, "cr_await", None)
            or getattr(current, "ag_await", None)
            or getattr(current, "gi_yieldfrom", None)
            or _driven(current, frame)
        )
    awaiting = None if current is None else _describe_awaited(current)
    return frames, awaiting


def _driven(awaitable: object, frame: FrameType) -> object | None:
    """The coroutine a generator drives by hand, which ``gi_yieldfrom`` does not show.

    On Python 3.11, :func:`rocklet.transport.eager_start.start_eagerly` continues a
    coroutine in a task through a generator that calls ``coro.send``; every request a
    connection handles in a task runs that way. The driven coroutine is that frame's
    local ``coro``.
    """
    if getattr(awaitable, "gi_frame", None) is not frame:
        return None
    driven = frame.f_locals.get("coro")
    return driven if asyncio.iscoroutine(driven) else None


def _describe_awaited(obj: object) -> str:
    kind = type(obj)
    return f"{kind.__module__}.{kind.__qualname__}"


def _task_stack(task: asyncio.Task[object], max_frames: int) -> _Stack:
    coro = task.get_coro()
    name = getattr(coro, "__qualname__", type(coro).__qualname__)
    state = "cancelling" if task.cancelling() else "pending"
    heading = f'asyncio task "{task.get_name()}" ({state}), coroutine {name}'
    frames, awaiting = _await_chain(coro)
    kept = frames[-max_frames:]
    return _Stack(False, heading, kept, len(frames) - len(kept), awaiting)


def _capture(max_frames: int) -> list[_Stack]:
    """Every thread's stack (the calling one first), then every task's of the running loop."""
    me = threading.get_ident()
    current = sys._current_frames()
    # Start the calling thread at its caller, where the dump was asked for.
    current[me] = sys._getframe(1)
    threads = {t.ident: t for t in threading.enumerate()}
    order = sorted(current, key=lambda ident: (ident != me, ident))
    stacks = [_thread_stack(i, current[i], threads.get(i), max_frames) for i in order]
    try:
        tasks = asyncio.all_tasks()
    except RuntimeError:  # no running loop: threads only
        tasks = set()
    for task in sorted(tasks, key=lambda t: t.get_name()):
        stacks.append(_task_stack(task, max_frames))
    return stacks


def _render(stack: _Stack) -> Iterator[str]:
    yield f"--- {stack.heading}\n"
    if stack.cut:
        shown = len(stack.frames)
        yield f"  ... {stack.cut} outer frames not shown, the {shown} innermost follow\n"
    yield from traceback.StackSummary.from_list(stack.frames).format()
    if stack.awaiting is not None:
        yield f"  awaiting {stack.awaiting}\n"
    yield "\n"


def _format(stacks: list[_Stack], max_frames: int, max_chars: int) -> str:
    """The dump's text; reads source lines, so it runs off the event loop."""
    threads = sum(s.is_thread for s in stacks)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    head = (
        f"Python stacks of pid {os.getpid()} at {stamp}: {threads} threads, "
        f"{len(stacks) - threads} asyncio tasks; innermost call last, "
        f"at most {max_frames} frames each\n\n"
    )
    parts = [head]
    size = len(head)
    for index, stack in enumerate(stacks):
        text = "".join(_render(stack))
        if size + len(text) > max_chars:
            left = len(stacks) - index
            parts.append(f"[dump cut at {max_chars} characters: {left} more stacks not shown]\n")
            break
        parts.append(text)
        size += len(text)
    return "".join(parts)


async def stack_dump(*, max_frames: int = MAX_FRAMES, max_chars: int = MAX_CHARS) -> str:
    """Every thread's and every asyncio task's stack of this process, as text.

    Call it on the event loop whose tasks should be shown.

    Args:
        max_frames: Frames kept per stack (the innermost).
        max_chars: The text's size limit.

    Returns:
        The dump (see the module's description).
    """
    stacks = _capture(max_frames)
    return await asyncio.to_thread(_format, stacks, max_frames, max_chars)
