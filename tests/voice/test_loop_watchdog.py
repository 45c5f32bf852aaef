"""voice/loop_watchdog.py: an operator reading the voice process's log learns that its event loop
was held, where the loop's thread was at that moment, and for how long; a healthy loop logs
nothing."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator

import pytest

from voice import metrics
from voice.loop_watchdog import LoopWatchdog

LOGGER = "switchboard.voice.loop"


def hold_the_loop_with_a_blocking_call() -> None:
    time.sleep(0.6)


def stalls_counted() -> float:
    body, _ = metrics.exposition()
    found = re.search(rb"^switchboard_voice_loop_stalls_total (\S+)$", body, re.MULTILINE)
    assert found is not None
    return float(found.group(1))


@pytest.fixture
async def watchdog() -> AsyncIterator[LoopWatchdog]:
    dog = LoopWatchdog(asyncio.get_running_loop(), threshold_seconds=0.1)
    dog.start()
    yield dog
    dog.stop()


async def test_a_held_loop_is_logged_once_with_the_blocking_function_in_its_stack(
    watchdog: LoopWatchdog, caplog: pytest.LogCaptureFixture
) -> None:
    counted = stalls_counted()
    await asyncio.sleep(0.2)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        hold_the_loop_with_a_blocking_call()
        await asyncio.sleep(0.3)

    records = [record.getMessage() for record in caplog.records if record.name == LOGGER]
    assert len(records) == 2, records
    caught, ended = records
    assert caught.startswith("event loop held: its heartbeat is ")
    assert "its thread is at:" in caught
    assert "in hold_the_loop_with_a_blocking_call\n" in caught
    assert "time.sleep(0.6)" in caught
    assert re.match(r"event loop was held: its heartbeat ran \d+ ms late", ended)
    assert stalls_counted() == counted + 1


async def test_a_loop_that_keeps_running_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    # The threshold is generous: a test worker sharing its cores may hitch for a moment.
    dog = LoopWatchdog(asyncio.get_running_loop(), threshold_seconds=2.0)
    dog.start()
    try:
        with caplog.at_level(logging.DEBUG, logger=LOGGER):
            for _ in range(20):
                await asyncio.sleep(0.02)
                sum(range(10_000))
    finally:
        dog.stop()

    assert [record for record in caplog.records if record.name == LOGGER] == []
