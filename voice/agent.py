"""The agent of a call as the runtime uses it: its fields read once, typed and in the units the
pipeline takes, from the record `answer_call` returns (CONTRACT 6 "every agent field acts on the
call")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from voice.languages import speak_line


@dataclass(frozen=True)
class AgentConfig:
    llm_model: str
    temperature: float
    prompt: str  # the system instructions ("" for none)
    language: str  # xx-XX
    voice_id: str
    transcriber: str | None  # None: the default one of the sub-account's
    first_message: str | None
    silence_seconds: float  # silence_timeout
    turn_end_seconds: float  # voice_activity_timeout (milliseconds on the agent)
    max_duration_seconds: float  # max_duration (minutes on the agent)
    voicemail_detection: bool
    voicemail_type: str | None
    voicemail_message: str
    backchanneling: bool  # backcchanneling, as the SPEC spells it
    background: str | None  # background_type while background_noise is on
    recording: bool

    @classmethod
    def from_record(cls, row: Mapping[str, Any]) -> AgentConfig:
        return cls(
            llm_model=row["llm_model"],
            temperature=float(row["temperature"]),
            prompt=row["prompt"] or "",
            language=row["language"],
            voice_id=row["voice_id"],
            transcriber=row["transcriber"],
            first_message=row["first_message"] or None,
            silence_seconds=float(row["silence_timeout"]),
            turn_end_seconds=float(row["voice_activity_timeout"]) / 1000,
            max_duration_seconds=float(row["max_duration"]) * 60,
            voicemail_detection=bool(row["voicemail_detection"]),
            voicemail_type=row["voicemail_type"],
            voicemail_message=row["voicemail_message"] or "",
            backchanneling=bool(row["backcchanneling"]),
            background=row["background_type"] if row["background_noise"] else None,
            recording=bool(row["recording"]),
        )

    @property
    def instructions(self) -> str:
        """The model's system instructions: the prompt, then the language to speak."""
        return "\n\n".join(part for part in (self.prompt, speak_line(self.language)) if part)
