"""A local fake of every LLM and speech vendor the voice runtime calls, in each one's wire format.

One server, one origin, a mount per vendor (`base_urls(origin)`; `env_for(origin)` gives the
SWITCHBOARD_<VENDOR>_BASE_URL settings):

    openai      /openai/v1      chat/completions, audio/transcriptions, audio/speech
    deepseek    /deepseek/v1    the same OpenAI-compatible endpoints
    grok        /grok/v1        the same OpenAI-compatible endpoints
    anthropic   /anthropic      v1/messages
    google      /google         {version}/models/{model}:streamGenerateContent | :generateContent
    deepgram    /deepgram       v1/listen (prerecorded), v1/speak
    elevenlabs  /elevenlabs     v1/text-to-speech/{voice_id}[/stream][/with-timestamps]
    cartesia    /cartesia       tts/bytes

LLM replies, the same for every vendor, streamed in about three chunks; the first rule that
applies wins:

1. The final message is a tool result: each result of it read out in a sentence (an `error`:
   "Sorry, that did not work: <error>."; `slots`: "The first free time is <its start_local, as
   said on the phone>. Shall I book it?"; an `appointment_id`: "You are booked for <start>.";
   anything else: "Done: <the result, at most 80 characters>.").
2. The final message is not the user's, or is empty: "Are you still there?"
3. The system prompt holds `[fake:end_call_on_goodbye]`, the user's message contains
   "goodbye" (any case) and the request offers a tool named `end_call`: a call to `end_call`
   (its required string parameters set to "goodbye", no others), no text.
4. The system prompt holds `[fake:call=<name>]` markers (each optionally with ` on=<word>` and
   ` args=<JSON object>` before the `]`), the final message is the user's, and the request offers
   a tool of that name the conversation has not called yet (and the user's message contains
   <word>, any case): one call of each such tool in the one reply, in the markers' order, with
   <JSON object> as its arguments (else each required string parameter set to the value of
   that name in the latest tool result holding one, such as a booking's `start` from the slots
   check_availability found, and to "goodbye" without one), in
   the vendor's format (OpenAI `tool_calls` deltas, Anthropic `tool_use` blocks, Gemini
   `functionCall` parts). The tool results then get rule 1.
5. The system prompt holds `[fake:reply=<text>]`: exactly <text>.
6. Otherwise: "Great, thank you for your time."

A structured-output request (OpenAI-format `response_format` json_schema, Anthropic a forced
tool, Gemini `responseSchema`: the worker's call analysis) is answered, before these rules, with
a value of its schema: `[fake:value=<JSON>]` in a property's description gives that JSON, an enum
its first value, a string the contact's first transcript line ("Contact: ..."), numbers 1,
booleans true (`llm.structured_reply`).

Speech synthesis: 55 ms per character (at least 200 ms) of a voiced-like signal, about -14 dBFS
RMS, the same for the same text, at the rate and encoding asked for (PCM, μ-law, A-law, WAV;
not MP3 or Opus). Transcription: the text of the phrase in the catalogue (a directory with
manifest.json, default integrations/telephony/sandbox_audio) whose energy envelope best matches
the audio, or "" for silence and unknown audio.

Latency (`llm_first_token_ms`, `stt_ms`, `tts_first_byte_ms`, default 0) and failures
(`{"openai.tts" | "anthropic" | "stt": 500 | 401 | ... | "hang"}`) are constructor arguments,
`FakeVendors.configure(...)`, or `POST /_fake/config` with the same JSON. Every request is
recorded: `FakeVendors.requests`, `GET /_fake/requests`; `POST /_fake/reset` forgets requests
and settings. Standalone: `python -m voice.fake_vendors --port 8765` prints the origin.
"""

from .server import FakeConfig, FakeVendors, RecordedRequest, base_urls, env_for

__all__ = ["FakeConfig", "FakeVendors", "RecordedRequest", "base_urls", "env_for"]
