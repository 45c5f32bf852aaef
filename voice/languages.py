"""The agent's language (`xx-XX`) in the form each vendor takes it, and its name for the model.

- OpenAI transcription, Cartesia and ElevenLabs speech: ISO 639-1 (`de-DE` -> `de`);
- Deepgram transcription (nova-3): the tag where Deepgram lists it, else ISO 639-1;
- Deepgram speech (Aura) takes no language: the voice's model names it (`aura-2-<voice>-de`);
- OpenAI speech takes no language either: it speaks the text's;
- the model is told "Speak <name> (<tag>)." after its system instructions (the name from CLDR,
  through langcodes).
"""

from __future__ import annotations

from functools import cache

import langcodes

# The regional tags of the `xx-XX` form Deepgram's nova-3 lists; other tags go by their
# ISO 639-1 code (nova-3 knows German as `de` and `de-CH`, not `de-DE`).
DEEPGRAM_REGIONAL = frozenset(
    {
        "en-US",
        "en-AU",
        "en-GB",
        "en-IN",
        "en-NZ",
        "fr-CA",
        "pt-BR",
        "pt-PT",
        "de-CH",
        "nl-BE",
        "sv-SE",
        "da-DK",
        "ko-KR",
        "zh-CN",
        "zh-TW",
        "zh-HK",
        "th-TH",
    }
)


@cache
def language_name(code: str) -> str | None:
    """The English name of an ISO 639-1 code from CLDR (`de` -> `German`); None if unassigned."""
    language = langcodes.Language.get(code)
    return language.display_name() if language.is_valid() else None


# The first name looked up loads CLDR's tables (about 50 ms): at import, when the process
# starts, not in the event loop during a call's first turn.
language_name("en")


def iso_639_1(tag: str) -> str:
    """`de-DE` -> `de`."""
    return tag.split("-")[0]


def deepgram_language(tag: str) -> str:
    """The `language` Deepgram's prerecorded transcription (nova-3) is asked for."""
    return tag if tag in DEEPGRAM_REGIONAL else iso_639_1(tag)


def speak_line(tag: str) -> str:
    """The line that tells the model which language to speak: "Speak German (de-DE)."."""
    name = language_name(iso_639_1(tag))
    return f"Speak {name} ({tag})." if name else f"Speak the language of the locale {tag}."
