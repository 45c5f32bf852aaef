"""Request and response models of the note operations."""

from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator

from api.types import NON_BLANK_PATTERN

MAX_CONTENT = 5000


class CreateNoteRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    # The non-blank rule below, in the document (CONTRACT 18a).
    content: StrictStr = Field(
        min_length=1, max_length=MAX_CONTENT, json_schema_extra={"pattern": NON_BLANK_PATTERN}
    )

    @field_validator("content")
    @classmethod
    def not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must contain at least one non-blank character")
        return value


class CreatedNote(BaseModel):
    id: uuid.UUID
    contact_id: uuid.UUID
    content: str
    created_at: datetime


class NoteCreated(BaseModel):
    status: str
    note: CreatedNote


class Note(CreatedNote):
    agent_id: uuid.UUID | None
    updated_at: datetime


class NoteList(BaseModel):
    status: str
    contact_id: uuid.UUID
    note_count: int
    notes: list[Note]


class NoteDeleted(BaseModel):
    status: str
    deleted: bool
    contact_id: uuid.UUID
    note_id: uuid.UUID
