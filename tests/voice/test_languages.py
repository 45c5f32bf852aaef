"""voice/languages.py: the agent's language (`xx-XX`) in the form each vendor takes it, and the
line that tells the model which language to speak."""

from __future__ import annotations

from voice.agent import AgentConfig
from voice.languages import deepgram_language, iso_639_1, language_name, speak_line

RECORD = {
    "llm_model": "gpt-4o",
    "temperature": 0.7,
    "prompt": "",
    "language": "de-DE",
    "voice_id": "alloy",
    "transcriber": None,
    "first_message": None,
    "silence_timeout": 5,
    "voice_activity_timeout": 300,
    "max_duration": 10,
    "voicemail_detection": False,
    "voicemail_type": None,
    "voicemail_message": None,
    "backcchanneling": True,
    "background_noise": False,
    "background_type": "office",
    "recording": True,
}


def test_openai_cartesia_and_elevenlabs_take_the_iso_639_1_code() -> None:
    assert [iso_639_1(tag) for tag in ("de-DE", "en-US", "pt-BR")] == ["de", "en", "pt"]


def test_deepgram_takes_the_tag_where_nova_3_lists_it_else_the_iso_639_1_code() -> None:
    assert [deepgram_language(tag) for tag in ("de-DE", "en-US", "pt-BR", "es-ES", "de-CH")] == [
        "de",
        "en-US",
        "pt-BR",
        "es",
        "de-CH",
    ]


def test_the_model_is_told_the_language_by_name_and_tag() -> None:
    assert speak_line("de-DE") == "Speak German (de-DE)."
    assert speak_line("nb-NO") == "Speak Norwegian Bokmål (nb-NO)."
    assert speak_line("qq-QQ") == "Speak the language of the locale qq-QQ."
    assert speak_line("el-GR") == "Speak Greek (el-GR)."
    assert speak_line("pa-IN") == "Speak Punjabi (pa-IN)."


def test_every_iso_639_1_code_has_a_name_and_unassigned_ones_none() -> None:
    codes = ["aa", "ab", "de", "he", "nb", "sw", "vo", "yi", "zh", "zu"]
    assert [language_name(code) for code in codes] == [
        "Afar",
        "Abkhazian",
        "German",
        "Hebrew",
        "Norwegian Bokmål",
        "Swahili",
        "Volapük",
        "Yiddish",
        "Chinese",
        "Zulu",
    ]
    assert [language_name(code) for code in ("qq", "xx", "zz")] == [None, None, None]


def test_the_language_line_follows_the_prompt() -> None:
    assert AgentConfig.from_record(RECORD).instructions == "Speak German (de-DE)."
    agent = AgentConfig.from_record({**RECORD, "prompt": "Sell solar panels."})
    assert agent.instructions == "Sell solar panels.\n\nSpeak German (de-DE)."


def test_the_agents_fields_are_read_once_in_the_pipelines_units() -> None:
    agent = AgentConfig.from_record(RECORD)
    assert (agent.silence_seconds, agent.turn_end_seconds, agent.max_duration_seconds) == (
        5.0,
        0.3,
        600.0,
    )
    assert agent.background is None  # background_noise off: no bed, whatever the type
    assert agent.backchanneling and agent.recording and agent.voicemail_message == ""
