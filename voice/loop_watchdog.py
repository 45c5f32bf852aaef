"""A watchdog on the voice process's event loop: every call's audio is paced by that one loop, so
anything that holds it (a blocking call, a long garbage collection) makes every call's audio late.

The loop runs a heartbeat every `interval`; a thread of its own looks at the heartbeat as often.
When the heartbeat is more than `threshold` late, the thread logs once, while the loop is still
held, the loop thread's stack (sys._current_frames) and any garbage collection under way; when the
loop runs the heartbeat again it logs how long it was held and how much of it was garbage
collection, and counts the stall (switchboard_voice_loop_stalls_total). A collection holds the
GIL, so the thread gets to take the stack only in the callbacks a collection runs (weak
references, finalisers) or after it: the stack shows the allocation that set it off, and the
collection's time is named beside it. Cost: one callback on the loop and one thread wake-up
per interval, two calls per collection.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import threading
import time
import traceback
from typing import Any

from voice import metrics

log = logging.getLogger("switchboard.voice.loop")

STACK_FRAMES = 40


class LoopWatchdog:
    """Watches `loop`, which must be the running loop when `start` is called."""

    def __init__(self, loop: asyncio.AbstractEventLoop, threshold_seconds: float) -> None:
        self.loop = loop
        self.threshold = threshold_seconds
        self.interval = min(threshold_seconds / 2, 0.05)
        self._beat_at = time.monotonic()
        self._handle: asyncio.TimerHandle | None = None
        self._loop_thread = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # Garbage collection: when the current one began, which generation, and the time spent
        # collecting since the last heartbeat.
        self._gc_started: float | None = None
        self._gc_generation = 0
        self._gc_seconds = 0.0
        self._gc_longest = (0.0, 0)

    def start(self) -> None:
        self._loop_thread = threading.get_ident()
        self._beat_at = time.monotonic()
        self._handle = self.loop.call_later(self.interval, self._beat)
        gc.callbacks.append(self._on_gc)
        self._thread = threading.Thread(
            target=self._watch, name="switchboard-loop-watchdog", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._handle is not None:
            self._handle.cancel()
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        if self._thread is not None:
            self._thread.join()

    # --- the loop's side ----------------------------------------------------------------------

    def _beat(self) -> None:
        now = time.monotonic()
        held = now - self._beat_at - self.interval
        if held > self.threshold:
            metrics.LOOP_STALLS.inc()
            gc_seconds, (longest, generation) = self._gc_seconds, self._gc_longest
            log.warning(
                "event loop was held: its heartbeat ran %.0f ms late (garbage collection "
                "%.0f ms of it%s)",
                held * 1000,
                gc_seconds * 1000,
                f", the longest {longest * 1000:.0f} ms of generation {generation}"
                if longest
                else "",
            )
        self._gc_seconds, self._gc_longest = 0.0, (0.0, 0)
        self._beat_at = now
        self._handle = self.loop.call_later(self.interval, self._beat)

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        # Collections run one at a time, under the GIL, in whichever thread set one off (a VAD
        # thread's holds the loop as well as the loop's own).
        if phase == "start":
            self._gc_started, self._gc_generation = time.monotonic(), info["generation"]
        elif self._gc_started is not None:
            seconds = time.monotonic() - self._gc_started
            self._gc_started = None
            self._gc_seconds += seconds
            if seconds > self._gc_longest[0]:
                self._gc_longest = (seconds, info["generation"])

    # --- the watching thread ------------------------------------------------------------------

    def _watch(self) -> None:
        reported_beat = 0.0
        while not self._stop.wait(self.interval):
            beat_at = self._beat_at
            late = time.monotonic() - beat_at - self.interval
            if late <= self.threshold or beat_at == reported_beat:
                continue
            # Taken together, before anything else lets the loop's thread run on.
            frame = sys._current_frames().get(self._loop_thread)
            gc_started, gc_generation, gc_seconds = (
                self._gc_started,
                self._gc_generation,
                self._gc_seconds,
            )
            if self._beat_at != beat_at:
                continue  # the loop came back meanwhile; it logs the stall itself
            reported_beat = beat_at
            if frame is not None and frame.f_code is LoopWatchdog._on_gc.__code__:
                frame = frame.f_back  # caught in our own collection callback: the caller's stack
            collecting = ""
            if gc_started is not None:
                collecting = (
                    f"; a garbage collection of generation {gc_generation} has run "
                    f"for {(time.monotonic() - gc_started) * 1000:.0f} ms"
                )
            elif gc_seconds:
                collecting = f"; garbage collection took {gc_seconds * 1000:.0f} ms of it"
            stack = traceback.format_stack(frame, limit=STACK_FRAMES) if frame else []
            log.warning(
                "event loop held: its heartbeat is %.0f ms late%s; its thread is at:\n%s",
                late * 1000,
                collecting,
                "".join(stack).rstrip(),
            )
