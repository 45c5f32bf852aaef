"""The TwiML the bridge answers and the addresses it names (CONTRACT 9)."""

from __future__ import annotations

from xml.etree import ElementTree

from tenancy.settings import Settings
from voice.twilio import REJECT, connect_twiml, media_stream_url


def settings(**values):
    return Settings.model_validate(values)


def test_media_stream_url_is_the_ws_form_of_the_public_url():
    assert media_stream_url(settings(SWITCHBOARD_VOICE_PUBLIC_URL="https://v.example.com/")) == (
        "wss://v.example.com/voice/twilio/stream"
    )
    assert media_stream_url(settings(SWITCHBOARD_VOICE_PUBLIC_URL="http://10.0.0.2:8100")) == (
        "ws://10.0.0.2:8100/voice/twilio/stream"
    )
    assert media_stream_url(settings(SWITCHBOARD_VOICE_URL="ws://127.0.0.1:9")) == (
        "ws://127.0.0.1:9/voice/twilio/stream"
    )


def test_connect_twiml_names_the_stream_and_its_parameters_escaped():
    twiml = connect_twiml(
        "wss://v.example.com/voice/twilio/stream", {"call_id": "c1", "token": 'a"<&>'}
    )
    assert twiml.startswith('<?xml version="1.0" encoding="UTF-8"?><Response><Connect><Stream')
    stream = ElementTree.fromstring(twiml).find("./Connect/Stream")
    assert stream.get("url") == "wss://v.example.com/voice/twilio/stream"
    assert {p.get("name"): p.get("value") for p in stream.findall("Parameter")} == {
        "call_id": "c1",
        "token": 'a"<&>',
    }
    assert ElementTree.fromstring(REJECT).find("Reject") is not None
