"""Canary for the Pipecat seam: every private name voice/pipecat_seam.py relies on, checked by name.

After an upgrade of Pipecat (pinned in pyproject.toml), a failure here names the class, the
attribute and what changed, before a call finds out. The last tests hold the seam itself: no other
module of voice/ names a private attribute of an object it did not define or imports a private
Pipecat name, our subclasses of Pipecat classes share with Pipecat only the names they mean to
override, and every event the runtime listens to is still raised under its name (Pipecat only
logs a warning for a handler of an event it does not know, and never calls it).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import textwrap
from importlib import metadata
from pathlib import Path
from typing import Any

import openai
import pytest
from pipecat.audio.vad.silero import SileroOnnxModel, SileroVADAnalyzer
from pipecat.audio.vad.vad_analyzer import VADAnalyzer, VADParams, VADState
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.processors.audio.audio_buffer_processor import AudioBufferProcessor
from pipecat.services.openai.stt import OpenAISTTService
from pipecat.services.openai.tts import OpenAITTSService
from pipecat.transports.websocket.fastapi import (
    FastAPIWebsocketOutputTransport,
    FastAPIWebsocketParams,
    FastAPIWebsocketTransport,
)
from starlette.websockets import WebSocket

import voice
from voice import deepgram, metrics, pipecat_seam, processors, silero, transport, vendors
from voice.pipecat_seam import (
    SILERO_MODEL,
    SILERO_SAMPLE_RATES,
    PacedWebsocketOutput,
    SileroModelOverSession,
    SileroOverModel,
    WebsocketTransport,
    without_retries,
)

ROOT = Path(__file__).resolve().parents[2]
SEAM = ROOT / "voice" / "pipecat_seam.py"


def version() -> str:
    return f"pipecat-ai {metadata.version('pipecat-ai')}"


def attribute(owner: Any, name: str) -> Any:
    where = getattr(owner, "__qualname__", repr(owner))
    assert hasattr(owner, name), (
        f"Pipecat's {where}.{name} is gone ({version()}): voice/pipecat_seam.py relies on it; "
        f"adapt the seam or keep the pin in pyproject.toml"
    )
    return getattr(owner, name)


def parameters(function: Any, expected: list[str]) -> None:
    found = list(inspect.signature(function).parameters)
    assert found == expected, (
        f"{function.__module__}.{function.__qualname__} now takes {found}, the seam passes "
        f"{expected} ({version()}): adapt voice/pipecat_seam.py"
    )


def source(function: Any) -> str:
    return inspect.getsource(inspect.unwrap(function))


def assigned_on_self(owner: Any) -> set[str]:
    """The attributes a class's (or function's) own code sets on `self`."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(owner)))
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    }


def websocket() -> WebSocket:
    async def receive() -> dict[str, str]:
        return {"type": "websocket.disconnect"}

    async def send(_message: object) -> None:
        return None

    return WebSocket({"type": "websocket", "path": "/", "headers": []}, receive, send)


# Private names of Pipecat, one test per thing the runtime does with them.


async def test_websocket_output_pacing() -> None:
    output = FastAPIWebsocketOutputTransport
    attribute(output, "_write_audio_sleep")
    assert "await self._write_audio_sleep()" in source(output.write_audio_frame), (
        "Pipecat's output no longer sleeps through _write_audio_sleep after each audio chunk"
    )
    assert "self._next_send_time = 0" in source(output.process_frame), (
        "Pipecat no longer resets the send clock (_next_send_time) on an interruption"
    )
    assert "self._send_interval =" in source(output.setup)
    assert {"_next_send_time", "_send_interval"} <= assigned_on_self(output.__init__)
    assert "self._next_send_time" in source(output._write_audio_sleep)

    asked = []

    class Recorded(PacedWebsocketOutput):
        def audio_wait(self, playout: float, chunk_seconds: float) -> tuple[float, float]:
            asked.append((playout, chunk_seconds))
            return 0.0, playout + chunk_seconds

    class Paced(WebsocketTransport):
        output_class = Recorded

    paced = Paced(websocket(), FastAPIWebsocketParams()).output()
    paced._send_interval = 0.02  # what setup() computes from the line's rate
    await paced._write_audio_sleep()
    await paced._write_audio_sleep()
    assert asked == [(0, 0.02), (0.02, 0.02)]
    assert paced._next_send_time == pytest.approx(0.04)


def test_websocket_transport_builds_its_output() -> None:
    build = source(FastAPIWebsocketTransport.__init__)
    assert "self._output = FastAPIWebsocketOutputTransport(" in build, (
        f"FastAPIWebsocketTransport builds its output differently now ({version()}): adapt "
        f"WebsocketTransport"
    )
    assert {"_client", "_params", "_output"} <= assigned_on_self(FastAPIWebsocketTransport.__init__)
    assert "name=self._output_name" in build
    parameters(
        FastAPIWebsocketOutputTransport.__init__,
        ["self", "transport", "client", "params", "kwargs"],
    )
    assert attribute(FastAPIWebsocketTransport, "output") is not None
    assert not hasattr(FastAPIWebsocketTransport, "output_class"), (
        "Pipecat's FastAPIWebsocketTransport now has output_class of its own: the seam's name "
        "collides"
    )

    built = WebsocketTransport(websocket(), FastAPIWebsocketParams())
    assert type(built.output()) is FastAPIWebsocketOutputTransport
    assert isinstance(
        transport.MediaStreamTransport(websocket(), FastAPIWebsocketParams()).output(),
        transport.LeadingOutput,
    )


def test_silero_analyzer_state() -> None:
    """The seam builds SileroVADAnalyzer's state itself and replaces two of its steps."""
    assert assigned_on_self(SileroVADAnalyzer.__init__) == {
        "_model",
        "_windows_since_reset",
        "_low_confidence_windows",
    }, f"SileroVADAnalyzer.__init__ sets other state now ({version()}): adapt SileroOverModel"
    assert assigned_on_self(SileroOnnxModel.__init__) == {"session", "sample_rates"}, (
        f"SileroOnnxModel.__init__ sets other state now ({version()}): adapt SileroModelOverSession"
    )
    assert f"self.sample_rates = {SILERO_SAMPLE_RATES}" in source(SileroOnnxModel.__init__)
    parameters(attribute(VADAnalyzer, "_run_analyzer"), ["self", "buffer"])
    parameters(attribute(VADAnalyzer, "_get_smoothed_volume"), ["self", "audio"])
    parameters(attribute(SileroOnnxModel, "reset_states"), ["self", "batch_size"])
    assert "self._get_smoothed_volume(" in source(VADAnalyzer._run_analyzer)
    assert "self._model" in source(SileroVADAnalyzer.voice_confidence)
    assert "self._executor" in source(VADAnalyzer.analyze_audio), (
        "Pipecat's analyze_audio no longer hands frames to a thread: SharedSileroVAD's in-place "
        "analysis may be unneeded"
    )
    assert SILERO_MODEL.is_file(), "Pipecat no longer ships pipecat/audio/vad/data/silero_vad.onnx"
    for ours in ("silero_model", "analyze_in_place"):
        assert not hasattr(SileroVADAnalyzer, ours), (
            f"Pipecat's SileroVADAnalyzer now has {ours} of its own: the seam's name collides"
        )

    model = SileroModelOverSession(silero.shared_session())
    analyzer = SileroOverModel(params=VADParams(min_volume=0.0), model=model)
    analyzer.set_sample_rate(8000)
    assert analyzer.silero_model is model and model.session is silero.shared_session()
    assert analyzer.analyze_in_place(bytes(640)) == VADState.QUIET


@pytest.mark.parametrize(
    ("service", "sends"),
    [
        (OpenAISTTService, "_transcribe"),
        (OpenAITTSService, "run_tts"),
    ],
    ids=["stt", "tts"],
)
def test_openai_speech_services_client(service: type, sends: str) -> None:
    built = service(api_key="sk-canary", base_url="http://127.0.0.1:9/v1")
    client = attribute(built, "_client")
    assert isinstance(client, openai.AsyncOpenAI) and client.max_retries > 0
    without_retries(built)
    assert built._client.max_retries == 0
    assert str(built._client.base_url) == "http://127.0.0.1:9/v1/"
    assert "self._client." in source(attribute(service, sends)), (
        f"{service.__qualname__}.{sends} no longer sends through self._client ({version()}): "
        f"without_retries has no effect"
    )


# The events the runtime listens to (voice/call.py), by the object that raises them.


def event_sources() -> dict[str, Any]:
    user, assistant = LLMContextAggregatorPair(LLMContext())
    return {
        "user aggregator": user,
        "assistant aggregator": assistant,
        "transport": transport.MediaStreamTransport(websocket(), FastAPIWebsocketParams()),
        "worker": PipelineWorker(Pipeline([]), enable_rtvi=False, enable_turn_tracking=False),
        "recorder": AudioBufferProcessor(num_channels=1),
    }


EVENTS = {
    "user aggregator": {"on_user_turn_started", "on_user_turn_stopped", "on_user_turn_idle"},
    "assistant aggregator": {"on_assistant_turn_started", "on_assistant_turn_stopped"},
    "transport": {"on_client_disconnected"},
    "worker": {"on_pipeline_error", "on_frame_reached_downstream"},
    "recorder": {"on_audio_data"},
}


def test_the_events_the_runtime_listens_to_are_raised() -> None:
    for name, source_object in event_sources().items():
        raised = set(source_object._event_handlers)
        assert EVENTS[name] <= raised, (
            f"Pipecat's {type(source_object).__qualname__} no longer raises "
            f"{sorted(EVENTS[name] - raised)} ({version()}): the runtime's handler is never "
            f"called"
        )


def voice_modules() -> list[Path]:
    return sorted(
        path for path in (ROOT / "voice").rglob("*.py") if "fake_vendors" not in path.parts
    )


def test_every_event_the_runtime_listens_to_is_named_here() -> None:
    named = set().union(*EVENTS.values())
    listened = set()
    for path in voice_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("add_event_handler", "event_handler")
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                listened.add(node.args[0].value)
    assert listened and listened <= named, (
        f"events listened to in voice/ but not checked here: {sorted(listened - named)}"
    )


# Our subclasses of Pipecat classes share with Pipecat only the names they mean to override:
# the methods they replace, and (for the seam's own classes) the private state they set.

OVERRIDES: dict[type, set[str]] = {
    pipecat_seam.PacedWebsocketOutput: {"_write_audio_sleep", "_next_send_time"},
    pipecat_seam.WebsocketTransport: {"__init__", "_output"},
    pipecat_seam.SileroModelOverSession: {"__init__", "session", "sample_rates"},
    pipecat_seam.SileroOverModel: {
        "__init__",
        "_model",
        "_windows_since_reset",
        "_low_confidence_windows",
        "_get_smoothed_volume",
    },
    transport.LeadingOutput: set(),
    transport.MediaStreamTransport: set(),
    transport.MediaStreamSerializer: {"__init__", "deserialize"},
    silero.SharedSileroVAD: {"__init__", "analyze_audio"},
    vendors._OpenAILLM: {"__init__", "create_client", "run_function_calls"},
    vendors._DeepSeekLLM: {"__init__", "create_client", "run_function_calls"},
    vendors._GrokLLM: {"__init__", "create_client", "run_function_calls"},
    vendors._AnthropicLLM: {"run_function_calls"},
    vendors._GoogleLLM: {"run_function_calls"},
    vendors._OpenAISTT: {"__init__"},
    vendors._OpenAITTS: {"__init__"},
    deepgram.DeepgramHttpSTTService: {"__init__", "run_stt"},
    processors.FirstMessage: {"__init__", "process_frame"},
    processors.AfterHangUp: {"__init__", "process_frame"},
    processors.Backchannel: {"__init__", "process_frame"},
    processors.VoicemailMessage: {"__init__", "process_frame"},
    metrics.ResponseTimer: {"__init__", "process_frame"},
}
OWN = {
    "__module__",
    "__doc__",
    "__qualname__",
    "__annotations__",
    "__dict__",
    "__weakref__",
    "__firstlineno__",
    "__static_attributes__",
    "__orig_bases__",
    "__parameters__",
    "__abstractmethods__",
    "_abc_impl",
}


def is_pipecat(cls: type) -> bool:
    return cls.__module__.split(".")[0] == "pipecat"


def names_of(cls: type) -> set[str]:
    """What a class defines itself: class attributes and attributes its code sets on self."""
    return (set(vars(cls)) | assigned_on_self(cls)) - OWN


def ours(cls: type) -> set[str]:
    """What our classes in cls's line define, the seam's classes apart (held by their own
    entry) unless cls is one of them."""
    line = [
        base
        for base in cls.__mro__
        if base.__module__.startswith("voice.")
        and (base is cls or base.__module__ != pipecat_seam.__name__)
    ]
    return set().union(*(names_of(base) for base in line))


@pytest.mark.parametrize("cls", list(OVERRIDES), ids=lambda cls: cls.__qualname__)
def test_subclasses_override_only_what_they_mean_to(cls: type) -> None:
    pipecat = [base for base in cls.__mro__ if is_pipecat(base)]
    theirs = set().union(*(names_of(base) for base in pipecat))
    shared = ours(cls) & theirs
    assert shared == OVERRIDES[cls], (
        f"{cls.__qualname__} shares {sorted(shared)} with {pipecat[0].__module__}."
        f"{pipecat[0].__qualname__} ({version()}), meant to override {sorted(OVERRIDES[cls])}: "
        f"a name of ours collides with a new one of Pipecat, or one we override is gone"
    )
    if cls.__module__ != pipecat_seam.__name__:
        private = {name for name in shared if name.startswith("_") and not name.startswith("__")}
        assert not private, (
            f"{cls.__qualname__} replaces Pipecat's private {sorted(private)}: "
            f"that belongs in voice/pipecat_seam.py"
        )


def test_every_subclass_of_a_pipecat_class_is_listed() -> None:
    found = set()
    for module in pkgutil.walk_packages(voice.__path__, "voice."):
        if "fake_vendors" in module.name or module.name == "voice.app":
            continue
        for value in vars(importlib.import_module(module.name)).values():
            if (
                inspect.isclass(value)
                and value.__module__ == module.name
                and any(is_pipecat(base) for base in value.__mro__[1:])
            ):
                found.add(value)
    assert found == set(OVERRIDES), (
        f"subclasses of Pipecat classes not listed in OVERRIDES: "
        f"{sorted(c.__qualname__ for c in found - set(OVERRIDES))}"
    )


# Nothing outside the seam names a private name of Pipecat.


def pipecat_imports(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {
                (alias.asname or alias.name).split(".")[0]
                for alias in node.names
                if alias.name.split(".")[0] == "pipecat"
            }
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "pipecat":
            names |= {alias.asname or alias.name for alias in node.names}
    return names


def defined_here(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
    return names


def seam_problems(source_text: str, where: str) -> list[str]:
    tree = ast.parse(source_text, where)
    if not pipecat_imports(tree):
        return []
    own = defined_here(tree)
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "pipecat":
            problems += [
                f"{where}:{node.lineno} imports {node.module}.{alias.name}"
                for alias in node.names
                if alias.name.startswith("_")
            ]
        elif (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and node.attr not in own
        ):
            problems.append(f"{where}:{node.lineno} reads .{node.attr}, not defined here")
    return problems


def test_only_the_seam_names_pipecat_private_names() -> None:
    problems = [
        problem
        for path in voice_modules()
        if path != SEAM
        for problem in seam_problems(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert not problems, "private names of Pipecat belong in voice/pipecat_seam.py:\n" + "\n".join(
        problems
    )


def test_the_guard_sees_what_it_should() -> None:
    text = (
        "from pipecat.frames.frames import Frame\nfrom pipecat.audio import _private\n"
        "class Mine:\n    def f(self, frame: Frame) -> None:\n"
        "        self._mine = frame._secret\n"
    )
    found = seam_problems(text, "example.py")
    assert found == [
        "example.py:2 imports pipecat.audio._private",
        "example.py:5 reads ._secret, not defined here",
    ], found
