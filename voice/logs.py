"""Pipecat logs through loguru; the voice process hands those records to the standard logging
every Switchboard process uses, so they share its format, context and redaction (CONTRACT 9).

Called before Pipecat is imported (its import logs a banner). Pipecat's DEBUG lines (every frame
link, every turn) stay out unless the process logs at DEBUG.
"""

from __future__ import annotations

import logging

from loguru import logger


def route_pipecat_logs(level: int = logging.INFO) -> None:
    def sink(message: object) -> None:
        record = message.record  # type: ignore[attr-defined]
        logging.getLogger(record["name"] or "pipecat").log(
            record["level"].no,
            "%s",
            record["message"],
            exc_info=record["exception"]
            and (
                record["exception"].type,
                record["exception"].value,
                record["exception"].traceback,
            ),
        )

    logger.remove()
    logger.add(sink, level=level, format="{message}")
