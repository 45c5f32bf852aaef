"""N concurrent sandbox calls through `switchboard voice` against fake vendors of fixed latency.

Set-up (once): embedded PostgreSQL and Redis (bench/common.py), `switchboard migrate`, the fake
vendors in a process of their own (bench/voice/processes.py, `vendors`) with fixed latencies,
`switchboard serve` and `switchboard voice --processes P` (SWITCHBOARD_VOICE_MAX_CALLS=M per
process: a contact beyond it is refused with 503 and dials again until a place is free, as the
sandbox carrier does) as subprocesses with the fakes' base URLs. Through the
real API: an organisation (`switchboard create-organisation`), a sub-account, its key, the openai
integration (any key), an agent (gpt-4o, voice alloy, transcriber openai, no first_message, so
the contact speaks first; voice_activity_timeout PAUSE_MS; recording on), a number assigned to it
and one contact per call. No worker runs, so each call placed with POST /contacts/{id}/call stays
`queued`; the bench then plays each call's contact itself.

Each round of N calls: N calls placed; N sandbox contacts (script "person": "Hello?", then an
answer to each agent turn, then a hang-up 0.5 s after "Thank you, goodbye.") dial the runtime's
Media Streams WebSocket with the call's stream parameters (tenancy.call_tokens), from one process
of their own (`contacts`), started RAMP seconds apart in total (call k at k * RAMP / N), so turns
do not all fall on the same instant. A warm-up call runs first and is not reported.

Measured (all times on the system monotonic clock, shared by the processes):

- Response time of a turn: the contact's end of speech (the start of its line plus the end of
  speech in that recording: the last 20 ms frame above the sandbox's speech threshold, within
  60 ms of the clip's end) to the arrival, at the contact, of the first agent media message after
  the contact began that line. Turns: "Hello?", "Yes, I have a minute.", "That sounds good." (the
  agent's reply to "Thank you, goodbye." is cut by the hang-up and not counted).
- Added latency = response time - (voice_activity_timeout + stt_ms + llm_first_token_ms +
  tts_first_byte_ms). What is left: Silero VAD's own end-of-speech decision beyond the pause
  (32 ms analysis windows), the runtime's frame processing, its HTTP requests to the vendors,
  resampling and serialisation, loopback, and the fake vendors' own work beyond their configured
  latency (their handler time minus the latency is reported beside it, so that part can be read
  off; it is not subtracted).
- Late frames: within each agent turn, message k is due at (arrival of the turn's first message)
  + (audio duration of the messages before it), the real-time schedule a phone plays it on;
  late when it arrives more than 40 ms after that.
- CPU per call: the runtime's CPU time (user + system, all threads of its processes: with
  --processes, the parent and its children; /proc via psutil)
  from the first call's answer to the last call's end, divided by the sum of the calls'
  durations (so: cores per concurrent call); also the CPU rate in the window when all N calls
  were up, divided by N.
- Memory per call: (peak RSS of the runtime's processes together during the round - their RSS
  just before the round) / N;
  RSS after the round's calls have ended is reported beside it.

`--tool-ms D` (section "Voice runtime: tool calls"): the agent also has three http tools whose
target (`POST /_bench/tool` of the fake vendors' process, on loopback) answers after D ms, and its
prompt has the fake model call one on each of the contact's first three lines (arguments naming
the contact and the turn). Per tool call, on the shared monotonic clock: the fake LLM's end of
streaming the call (S), the target's receipt of the runtime's signed POST (R) and its answer
(A), and the arrival at the fake LLM of the first request carrying the result (F). The runtime's
own added time per tool call = (F - S) - (A - R): parsing the streamed call, running the
handler, signing, connecting and posting (S to R), reading the answer, handing it to the model
and sending the next request (A to F). The turn's added latency there also subtracts D and a
second LLM first-token latency.

`--baseline-tree DIR` (section "Voice runtime: first turn"): a second `switchboard voice` runs
from DIR (another commit's tree, `git archive <commit> | tar -x -C DIR`) against the same
database and fakes; each round runs once against each runtime, their order alternating, so the
two are compared in one run on the same machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil

from bench.common import bench_servers, free_port, percentile, serve, write_section
from bench.voice.processes import TOOL_PATH

if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] in ("vendors", "contacts"):
    from bench.voice.processes import main as role_main

    role_main(sys.argv[1:])
    sys.exit(0)

from integrations.telephony.sandbox_audio import SAMPLE_RATE, load_clip  # noqa: E402
from integrations.telephony.sandbox_media import SPEECH_RMS  # noqa: E402
from tenancy.call_tokens import stream_parameters  # noqa: E402
from tenancy.settings import get_settings  # noqa: E402

LATE_SECONDS = 0.040
TARGET_CALLS = 40
TARGET_P50_MS = 50.0
TARGET_P99_MS = 150.0
BASE = "/webhooks/inbound"
STREAM_PATH = "/voice/twilio/stream"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.voice")
    parser.add_argument(
        "--calls",
        default="1,10,20,40,80",
        help="comma-separated numbers of concurrent calls, one round each",
    )
    parser.add_argument(
        "--ramp", type=float, default=4.0, help="seconds over which a round's calls are started"
    )
    parser.add_argument("--pause-ms", type=int, default=300, help="voice_activity_timeout")
    parser.add_argument("--stt-ms", type=int, default=150)
    parser.add_argument("--llm-ms", type=int, default=250, help="LLM first token")
    parser.add_argument("--tts-ms", type=int, default=150, help="TTS first byte")
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        help="voice processes on the port (switchboard voice --processes)",
    )
    parser.add_argument(
        "--max-calls",
        type=int,
        default=20,
        help="SWITCHBOARD_VOICE_MAX_CALLS: calls per voice process",
    )
    parser.add_argument(
        "--tool-ms",
        type=int,
        default=0,
        help="give the agent http tools whose target answers after this long (0: none)",
    )
    parser.add_argument(
        "--baseline-tree",
        default="",
        help="also run each round against `switchboard voice` from this directory's code",
    )
    parser.add_argument(
        "--no-write",
        action="store_true",
        help="print the section instead of writing bench/RESULTS.md",
    )
    return parser.parse_args(argv)


# --- processes ----------------------------------------------------------------------------------


@contextlib.contextmanager
def vendors_process(
    args: argparse.Namespace, env: dict[str, str]
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.voice",
            "vendors",
            "--llm-ms",
            str(args.llm_ms),
            "--stt-ms",
            str(args.stt_ms),
            "--tts-ms",
            str(args.tts_ms),
            "--tool-ms",
            str(args.tool_ms),
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        origin = ""
        while not origin.startswith("http"):
            origin = process.stdout.readline().strip()
            if process.poll() is not None:
                raise RuntimeError("the fake vendors did not start")
        yield origin, process
    finally:
        process.terminate()
        process.wait(30)


@contextlib.contextmanager
def voice_process(
    env: dict[str, str], port: int, log_path: Path, processes: int, tree: str = ""
) -> Iterator[subprocess.Popen[bytes]]:
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cli",
                "voice",
                "--port",
                str(port),
                "--processes",
                str(processes),
            ],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=tree or None,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the voice runtime did not start; see {log_path}")
                time.sleep(0.2)
            yield process
        finally:
            process.terminate()
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.contextmanager
def worker_process(env: dict[str, str]) -> Iterator[None]:
    process = subprocess.Popen(
        [sys.executable, "-m", "cli", "worker"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(3)
        yield
    finally:
        process.terminate()
        process.wait(30)


# --- provisioning through the API ---------------------------------------------------------------


@dataclass
class Setup:
    sub_account_id: uuid.UUID
    key: str
    agent_id: str
    contacts: list[str]


def phone(rng: random.Random) -> str:
    from api.contacts.service import valid_phone

    while True:
        number = f"+1415{rng.randint(2_000_000, 9_999_999)}"
        # A "person" (any number but the sandbox's special endings) with a valid number.
        if (
            number[-4:] not in ("0155", "0166", "0177", "0186", "0187", "0199")
            and valid_phone(number) == number
        ):
            return number


TOOLS = ("lookup_1", "lookup_2", "lookup_3")
# The contact's lines each tool is called on (the person script: "Hello?", "Yes, I have a
# minute.", "That sounds good.").
TOOL_WORDS = ("hello", "minute", "sounds")


def tool_prompt() -> str:
    """The fake model calls lookup_k on the contact's k-th line, its arguments naming the contact
    (a placeholder rendered per call) and the turn, so each call of a round is told apart."""
    return " ".join(
        f'[fake:call={name} on={word} args={{"contact": "{{{{ contact.name }}}}", "turn": {k}}}]'
        for k, (name, word) in enumerate(zip(TOOLS, TOOL_WORDS, strict=True), start=1)
    )


def make_tools(client: httpx.Client, headers: dict[str, str], origin: str) -> list[str]:
    ids = []
    for name in TOOLS:
        response = client.post(
            f"{BASE}/tools",
            headers=headers,
            json={
                "name": name,
                "type": "http",
                "description": "Look the contact up.",
                "parameters": {
                    "type": "object",
                    "properties": {"contact": {"type": "string"}, "turn": {"type": "integer"}},
                    "required": ["contact", "turn"],
                },
                "config": {"url": origin + TOOL_PATH},
            },
        )
        assert response.status_code == 201, (response.status_code, response.text)
        ids.append(str(response.json()["tool"]["id"]))
    return ids


def provision(
    env: dict[str, str], api: str, contacts: int, pause_ms: int, tools_origin: str = ""
) -> Setup:
    """With `tools_origin`, the agent gets the three http tools on it (tool_prompt)."""
    created = subprocess.run(
        [sys.executable, "-m", "cli", "create-organisation", "--name", "Bench voice"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    organisation = json.loads(created.stdout.strip().splitlines()[-1])
    agency = {"x-api-key": organisation["agency_api_key"]}
    with httpx.Client(base_url=api, timeout=30) as client:

        def ok(response: httpx.Response, status: int = 200) -> dict[str, Any]:
            assert response.status_code == status, (response.status_code, response.text)
            return response.json()  # type: ignore[no-any-return]

        sub = ok(
            client.post(
                "/functions/v1/create-subaccount-webhook",
                headers=agency,
                json={"email": "owner@bench.example", "name": "Bench voice"},
            ),
            201,
        )
        sub_account_id = uuid.UUID(sub["sub_account_id"])
        key = ok(
            client.post(
                f"/functions/v1/agency/sub-accounts/{sub_account_id}/api-keys", headers=agency
            ),
            201,
        )["api_key"]
        headers = {"x-api-key": key}
        ok(
            client.put(
                f"{BASE}/integrations/openai", headers=headers, json={"api_key": "sk-bench-voice"}
            )
        )
        tool_ids = make_tools(client, headers, tools_origin) if tools_origin else []
        prompt = "You are a friendly sales agent." + (f" {tool_prompt()}" if tool_ids else "")
        agent = ok(
            client.post(
                "/functions/v1/crm-api/create-agent",
                headers=headers,
                json={
                    "name": "Bench agent",
                    "voice_id": "alloy",
                    "max_duration": 10,
                    "temperature": 0.7,
                    "silence_timeout": 10,
                    "voice_activity_timeout": pause_ms,
                    "llm_model": "gpt-4o",
                    "language": "en-US",
                    "background_noise": False,
                    "voicemail_detection": False,
                    "backcchanneling": False,
                    "organization_id": organisation["organisation_id"],
                    "sub_account_id": str(sub_account_id),
                    "webhook": False,
                    "recording": True,
                    "prompt": prompt,
                    "tool_ids": tool_ids,
                    "transcriber": "openai",
                },
            ),
            201,
        )
        agent_id = str(agent["id"])
        # Number import and assignment are provider jobs: a worker runs for them only (with
        # one running later, the calls would be placed by the sandbox carrier, not the bench).
        with worker_process(env):
            number = ok(
                client.post(
                    f"{BASE}/phone-numbers/import",
                    headers=headers,
                    json={"phone_number": "+14155550142"},
                ),
                201,
            )
            ok(
                client.post(
                    f"{BASE}/phone-numbers/{number['phone_number']['id']}/agent",
                    headers=headers,
                    json={"agent_id": agent_id},
                )
            )
        rng = random.Random(7)
        contact_ids = []
        for n in range(contacts):
            contact_ids.append(
                str(
                    ok(
                        client.post(
                            f"{BASE}/contacts",
                            headers=headers,
                            json={
                                "name": f"Bench contact {n}",
                                "phone": phone(rng),
                                "email": f"contact{n}@bench.example",
                            },
                        ),
                        201,
                    )["contact_id"]
                )
            )
    return Setup(sub_account_id, key, agent_id, contact_ids)


def place_calls(api: str, setup: Setup, count: int) -> list[str]:
    headers = {"x-api-key": setup.key}
    call_ids = []
    with httpx.Client(base_url=api, timeout=30, headers=headers) as client:
        for contact_id in setup.contacts[:count]:
            response = client.post(
                f"{BASE}/contacts/{contact_id}/call", json={"agent_id": setup.agent_id}
            )
            assert response.status_code == 200, response.text
            call_ids.append(str(response.json()["call_id"]))
    return call_ids


def read_calls(api: str, setup: Setup, call_ids: list[str]) -> list[dict[str, Any]]:
    with httpx.Client(base_url=api, timeout=30, headers={"x-api-key": setup.key}) as client:
        return [
            client.get(f"{BASE}/calls/{call_id}").json().get("call", {}) for call_id in call_ids
        ]


# --- sampling -----------------------------------------------------------------------------------


def machine_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot."""
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


@dataclass
class Sampler:
    """The runtime's CPU seconds and RSS, and the machine's CPU, every `every` seconds."""

    pid: int
    every: float = 0.2
    samples: list[tuple[float, float, int, int, int]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def sample(self) -> tuple[float, float, int, int, int]:
        """The runtime's processes together (with --processes, its children)."""
        parent = psutil.Process(self.pid)
        cpu, rss = 0.0, 0
        for process in [parent, *parent.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                times = process.cpu_times()
                cpu += times.user + times.system
                rss += process.memory_info().rss
        busy, total = machine_jiffies()
        row = (time.monotonic(), cpu, rss, busy, total)
        self.samples.append(row)
        return row

    def start(self) -> None:
        def loop() -> None:
            while not self._stop.wait(self.every):
                self.sample()

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()

    def at(self, moment: float) -> tuple[float, float, int, int, int]:
        """The sample nearest to `moment`."""
        return min(self.samples, key=lambda row: abs(row[0] - moment))

    def cpu_between(self, start: float, end: float) -> tuple[float, float, float]:
        """(runtime CPU seconds, wall seconds, machine busy fraction) between the samples
        nearest to start and end."""
        first, last = self.at(start), self.at(end)
        wall = last[0] - first[0]
        busy = (last[3] - first[3]) / max(1, last[4] - first[4])
        return last[1] - first[1], wall, busy


# --- a round ------------------------------------------------------------------------------------


def clip_speech_end(name: str) -> float:
    """Seconds from the start of a sandbox recording to the end of its last loud 20 ms frame."""
    samples = np.frombuffer(load_clip(name), dtype="<i2").astype(np.float64)
    frames = samples[: samples.size // 160 * 160].reshape(-1, 160)
    loud = np.flatnonzero(np.sqrt(np.mean(frames * frames, axis=1)) > SPEECH_RMS)
    return float((int(loud[-1]) + 1) * 160 / SAMPLE_RATE) if loud.size else 0.0


def vad_decision_ms(pause_ms: int) -> dict[str, float]:
    """Per recording, how long after its end of speech (beyond the pause) Silero alone, as the
    runtime configures it (voice/silero.py SharedSileroVAD, VADParams stop_secs=pause,
    min_volume 0) and fed as the runtime feeds it (20 ms μ-law frames at 8 kHz), reports the
    end: the VAD model's own decision time, with no pipeline, network or load around it."""
    from pipecat.audio.vad.vad_analyzer import VADParams, VADState

    from integrations.telephony import mulaw
    from voice.silero import SharedSileroVAD

    async def one(name: str) -> float:
        analyzer = SharedSileroVAD(params=VADParams(stop_secs=pause_ms / 1000, min_volume=0.0))
        analyzer.set_sample_rate(SAMPLE_RATE)
        lead = 0.5
        pcm = bytes(int(lead * SAMPLE_RATE) * 2) + load_clip(name) + bytes(SAMPLE_RATE * 2 * 2)
        pcm = mulaw.decode(mulaw.encode(pcm[: len(pcm) // 320 * 320]))
        previous = None
        for at in range(0, len(pcm), 320):
            state = await analyzer.analyze_audio(pcm[at : at + 320])
            fed = (at + 320) / 2 / SAMPLE_RATE
            if previous == VADState.STOPPING and state == VADState.QUIET:
                return (fed - lead - clip_speech_end(name)) * 1000 - pause_ms
            previous = state
        return math.nan

    async def every() -> dict[str, float]:
        return {name: await one(name) for name in ("hello", "minute", "sounds_good", "goodbye")}

    return asyncio.run(every())


@dataclass
class Round:
    calls: int
    call_results: list[dict[str, Any]]
    records: list[dict[str, Any]]
    responses_ms: list[float]
    added_ms: list[float]
    added_by_turn: dict[str, list[float]]
    beyond_vad_ms: list[float]
    chunks: int
    late: int
    max_lateness_ms: float
    anomalies: list[str]
    cores_per_call: float
    full_window: tuple[float, float, float] | None  # (seconds, cores per call, machine busy)
    round_busy: float
    rss_before: int
    rss_peak: int
    rss_after: int
    contacts_cpu: float
    contacts_lag: dict[str, float]
    vendor_overheads: dict[str, list[float]]
    vendor_lag: dict[str, float]
    log_bytes: int
    stages: dict[str, list[float]]
    # The runtime's own stamps (its log): turn end as the VAD decided it to the first audio
    # frame sent, minus the fake vendors' latencies.
    runtime_added_ms: list[float]
    # With --tool-ms, per tool call: streamed, received, answered, arrived (processes.py).
    tool_stamps: list[dict[str, float]] = field(default_factory=list)

    def tool_ms(self, start: str, end: str) -> list[float]:
        """Per fully stamped tool call, `end` - `start` in ms."""
        return [
            (stamps[end] - stamps[start]) * 1000
            for stamps in self.tool_stamps
            if {"streamed", "received", "answered", "arrived"} <= set(stamps)
        ]

    @property
    def tool_added_ms(self) -> list[float]:
        """The runtime's own time per tool call: (F - S) - (A - R)."""
        whole = self.tool_ms("streamed", "arrived")
        target = self.tool_ms("received", "answered")
        return [w - t for w, t in zip(whole, target, strict=True)]


STAGES = (
    "VAD decision beyond the pause",
    "fake STT own time",
    "runtime: transcript to LLM request",
    "fake LLM own time",
    "runtime: LLM reply to TTS request",
    "fake TTS own time",
    "runtime: TTS audio to the contact",
)


def decompose(
    result: dict[str, Any], spans: list[list[Any]], ends: dict[str, float], args: argparse.Namespace
) -> dict[str, list[float]]:
    """One call alone: each turn split at the vendor requests the fakes saw (ms per stage)."""
    stages: dict[str, list[float]] = {name: [] for name in STAGES}
    lines, chunks, t0 = result["lines"], result["chunks"], result["t0"]
    ordered = sorted(spans, key=lambda span: span[1])

    def after(kind: str, moment: float) -> list[Any] | None:
        return next((span for span in ordered if span[0] == kind and span[1] >= moment), None)

    for index, (name, start, end, finished) in enumerate(lines[:-1]):
        speech_end = t0 + min(start + ends[name], end)
        following = t0 + lines[index + 1][1]
        first = next((t0 + c[0] for c in chunks if t0 + start < t0 + c[0] < following), None)
        stt = after("stt", speech_end)
        llm = after("llm", stt[2]) if stt else None
        tts = after("tts", llm[2]) if llm else None
        if not (finished and first and stt and llm and tts) or tts[1] > first:
            continue
        values = (
            stt[1] - speech_end - args.pause_ms / 1000,
            stt[2] - stt[1] - args.stt_ms / 1000,
            llm[1] - stt[2],
            llm[2] - llm[1] - args.llm_ms / 1000,
            tts[1] - llm[2],
            tts[2] - tts[1] - args.tts_ms / 1000,
            first - tts[2],
        )
        for stage, value in zip(STAGES, values, strict=True):
            stages[stage].append(value * 1000)
    return stages


def analyse(
    result: dict[str, Any], fixed_ms: float, ends: dict[str, float]
) -> tuple[list[tuple[str, float]], int, int, float, list[str]]:
    """(turn, response ms) per answered turn, messages, late messages, max lateness, anomalies."""
    lines = result["lines"]
    chunks = result["chunks"]
    turns: list[tuple[str, float]] = []
    total = late = 0
    max_late = 0.0
    anomalies: list[str] = []
    for index, (name, start, end, finished) in enumerate(lines):
        following = lines[index + 1][1] if index + 1 < len(lines) else math.inf
        reply = [c for c in chunks if start < c[0] < following]
        if not reply:
            if index + 1 < len(lines):
                anomalies.append(f"no agent audio after {name!r}")
            continue
        speech_end = min(start + ends[name], end)
        if reply[0][0] < speech_end:
            anomalies.append(f"agent audio while the contact said {name!r}")
            continue
        if finished:
            turns.append((name, (reply[0][0] - speech_end) * 1000))
        if not reply[0][2]:
            anomalies.append(f"first agent message after {name!r} is silent")
        anchor, played = reply[0][0], 0.0
        for arrived, seconds, _speech in reply:
            lateness = arrived - (anchor + played)
            total += 1
            if lateness > LATE_SECONDS:
                late += 1
            max_late = max(max_late, lateness * 1000)
            played += seconds
    return turns, total, late, max_late, anomalies


def run_round(
    count: int,
    args: argparse.Namespace,
    api: str,
    voice_url: str,
    origin: str,
    setup: Setup,
    voice_pid: int,
    voice_log: Path,
    folder: Path,
    vad: dict[str, float],
) -> Round:
    settings = get_settings()
    call_ids = place_calls(api, setup, count)
    plan = {
        "url": voice_url + STREAM_PATH,
        "ramp_seconds": args.ramp if count > 1 else 0.0,
        "max_seconds": 120,
        "calls": [
            {
                "call_id": call_id,
                "parameters": stream_parameters(settings, setup.sub_account_id, uuid.UUID(call_id)),
            }
            for call_id in call_ids
        ],
    }
    sessions, out = folder / f"sessions-{count}.json", folder / f"contacts-{count}.json"
    sessions.write_text(json.dumps(plan))
    httpx.post(f"{origin}/_bench/reset", timeout=10)
    log_before = voice_log.stat().st_size
    sampler = Sampler(voice_pid)
    before = sampler.sample()
    sampler.start()
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.voice",
            "contacts",
            "--sessions",
            str(sessions),
            "--out",
            str(out),
        ],
        check=True,
    )
    children_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    deadline = time.monotonic() + 120
    # Every call's record written (with --processes, /health answers for one process only).
    while any(
        record.get("status") not in ("completed", "failed")
        for record in read_calls(api, setup, call_ids)
    ):
        assert time.monotonic() < deadline, "calls still running in the runtime"
        time.sleep(0.5)
    time.sleep(1.0)
    after = sampler.sample()
    sampler.stop()
    vendor_stats = httpx.get(f"{origin}/_bench/stats", timeout=10).json()
    contacts = json.loads(out.read_text())
    results = contacts["calls"]
    records = read_calls(api, setup, call_ids)

    # With tools, each turn also waits for the tool's target and a second LLM first token.
    tool_extra = args.tool_ms + args.llm_ms if args.tool_ms else 0
    fixed_ms = args.pause_ms + args.stt_ms + args.llm_ms + args.tts_ms + tool_extra
    ends = {name: clip_speech_end(name) for name in ("hello", "minute", "sounds_good", "goodbye")}
    responses: list[float] = []
    beyond_vad: list[float] = []
    by_turn: dict[str, list[float]] = {}
    chunks = late = 0
    max_late = 0.0
    anomalies: list[str] = []
    for result in results:
        if "error" in result:
            anomalies.append(f"call {result['call_id']}: {result['error']}")
            continue
        turns, total, late_here, worst, odd = analyse(result, fixed_ms, ends)
        for name, ms in turns:
            responses.append(ms)
            by_turn.setdefault(name, []).append(ms - fixed_ms)
            beyond_vad.append(ms - fixed_ms - vad[name])
        chunks += total
        late += late_here
        max_late = max(max_late, worst)
        anomalies += [f"call {result['call_id'][:8]}: {text}" for text in odd]
    ok = [r for r in results if "error" not in r]
    start = min(r["t0"] for r in ok)
    end = max(r["t0"] + r["duration"] for r in ok)
    call_seconds = sum(r["duration"] for r in ok)
    cpu, _wall, busy = sampler.cpu_between(start, end)
    full_start = max(r["t0"] for r in ok)
    full_end = min(r["t0"] + r["duration"] for r in ok)
    full = None
    if full_end - full_start >= 2.0:
        full_cpu, full_wall, full_busy = sampler.cpu_between(full_start, full_end)
        full = (full_wall, full_cpu / full_wall / len(ok), full_busy)
    peak = max(row[2] for row in sampler.samples)
    alone = count == 1 and not args.tool_ms
    stages = decompose(ok[0], vendor_stats["spans"], ends, args) if alone else {}
    return Round(
        calls=count,
        call_results=results,
        records=records,
        responses_ms=responses,
        added_ms=[ms - fixed_ms for ms in responses],
        added_by_turn=by_turn,
        beyond_vad_ms=beyond_vad,
        chunks=chunks,
        late=late,
        max_lateness_ms=max_late,
        anomalies=anomalies,
        cores_per_call=cpu / call_seconds,
        full_window=full,
        round_busy=busy,
        rss_before=before[2],
        rss_peak=peak,
        rss_after=after[2],
        contacts_cpu=(
            children_after.ru_utime
            + children_after.ru_stime
            - children_before.ru_utime
            - children_before.ru_stime
        ),
        contacts_lag=contacts["loop_lag"],
        vendor_overheads=vendor_stats["overheads_ms"],
        vendor_lag=vendor_stats["loop_lag"],
        log_bytes=voice_log.stat().st_size - log_before,
        stages=stages,
        runtime_added_ms=[
            ms - args.stt_ms - args.llm_ms - args.tts_ms - tool_extra
            for ms in runtime_responses(voice_log, log_before)
        ],
        tool_stamps=list(vendor_stats["tools"].values()),
    )


RESPONDED = re.compile(rb"agent responded ([0-9.]+) ms after the turn ended")


def runtime_responses(voice_log: Path, offset: int) -> list[float]:
    """The response times the runtime logged since `offset` of its log (voice/metrics.py)."""
    with voice_log.open("rb") as log:
        log.seek(offset)
        return [float(m.group(1)) for m in RESPONDED.finditer(log.read())]


# --- report -------------------------------------------------------------------------------------


def p(values: list[float], q: float) -> str:
    return f"{percentile(values, q):.0f}" if values else "-"


def report(
    rounds: list[Round],
    args: argparse.Namespace,
    load: tuple[float, float, float],
    started: str,
    vad: dict[str, float],
) -> str:
    fixed = args.pause_ms + args.stt_ms + args.llm_ms + args.tts_ms
    mib = 2**20
    lines = [
        f"Command: `python -m bench.voice --calls {args.calls} --processes {args.processes} "
        f"--max-calls {args.max_calls}` (ramp {args.ramp:g} s, "
        f"voice_activity_timeout {args.pause_ms} ms, fake vendors: STT {args.stt_ms} ms, LLM "
        f"first token {args.llm_ms} ms, TTS first byte {args.tts_ms} ms; subtracted per turn: "
        f"{fixed} ms). Run {started}. Machine: {os.cpu_count()} cores, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB RAM, load average "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the start. `switchboard voice "
        f"--processes {args.processes}`, SWITCHBOARD_VOICE_MAX_CALLS={args.max_calls} (a call "
        "beyond it is refused with 503 and dialled again, every 0.5 s, until a place is free); "
        "runtime CPU and RSS are its processes together; the contacts, the fake vendors, "
        "`switchboard serve`, PostgreSQL and Redis run on the same 2 cores.",
        "",
        "| calls | turns | response p50 / p99 ms | **added p50 / p99 ms** | added max ms | "
        "added beyond Silero's own decision p50 / p99 ms | **runtime's own: turn end decided to "
        "first audio sent, minus vendors, p50 / p99 ms** | late messages / all | max lateness ms | "
        "runtime CPU per call (cores) | all-up window: CPU per call / machine busy | RSS before / "
        "peak / after MiB | **MiB per call** |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rounds:
        window = (
            f"{r.full_window[1]:.3f} / {r.full_window[2] * 100:.0f}% ({r.full_window[0]:.0f} s)"
            if r.full_window
            else "-"
        )
        lines.append(
            f"| {r.calls} | {len(r.responses_ms)} | {p(r.responses_ms, 50)} / "
            f"{p(r.responses_ms, 99)} | **{p(r.added_ms, 50)} / {p(r.added_ms, 99)}** | "
            f"{max(r.added_ms):.0f} | {p(r.beyond_vad_ms, 50)} / {p(r.beyond_vad_ms, 99)} | "
            f"**{p(r.runtime_added_ms, 50)} / {p(r.runtime_added_ms, 99)}** | "
            f"{r.late} / {r.chunks} | {r.max_lateness_ms:.0f} | "
            f"{r.cores_per_call:.3f} | {window} | {r.rss_before / mib:.0f} / "
            f"{r.rss_peak / mib:.0f} / {r.rss_after / mib:.0f} | "
            f"**{(r.rss_peak - r.rss_before) / mib / r.calls:.1f}** |"
        )
    lines += [
        "",
        "Per turn, added latency p50 / p99 ms (turn 1 is the call's first LLM and TTS "
        "request, on new connections):",
        "",
        '| calls | after "Hello?" | after "Yes, I have a minute." | after "That sounds good." |',
        "|---|---|---|---|",
    ]
    for r in rounds:
        cells = [
            f"{p(r.added_by_turn.get(n, []), 50)} / {p(r.added_by_turn.get(n, []), 99)}"
            for n in ("hello", "minute", "sounds_good")
        ]
        lines.append(f"| {r.calls} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Around the runtime, per round: the fake vendors' own handler time beyond their "
        "configured latency (p50 / p99 ms; part of the added latency above, not subtracted), "
        "their event loop's lag, the contacts' process (CPU cores and event loop lag: a late "
        "contact loop would stamp arrivals late), and the calls' records (GET /calls/{id}).",
        "",
        "| calls | fake STT / LLM / TTS own time p50 / p99 ms | fakes' loop lag p99 / "
        "max ms | contacts CPU (cores) | contacts' loop lag p99 / max ms | calls completed "
        "/ transcript lines per call | runtime log KiB per call | calls that waited for "
        "a place / longest wait s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rounds:
        own = " / ".join(
            f"{p(r.vendor_overheads[k], 50)}-{p(r.vendor_overheads[k], 99)}"
            for k in ("stt", "llm", "tts")
        )
        ok = [c for c in r.call_results if "error" not in c]
        span = max(c["t0"] + c["duration"] for c in ok) - min(c["t0"] for c in ok)
        completed = sum(1 for rec in r.records if rec.get("status") == "completed")
        messages = [len((rec.get("transcript") or "").splitlines()) for rec in r.records]
        lines.append(
            f"| {r.calls} | {own} | {r.vendor_lag['p99_ms']:.0f} / {r.vendor_lag['max_ms']:.0f} | "
            f"{r.contacts_cpu / span:.2f} | {r.contacts_lag['p99_ms']:.0f} / "
            f"{r.contacts_lag['max_ms']:.0f} | {completed}/{r.calls} / "
            f"{min(messages)}-{max(messages)} | {r.log_bytes / 1024 / r.calls:.0f} | "
            f"{sum(1 for c in ok if c['waited'] > 0.25)} / "
            f"{max(c['waited'] for c in ok):.1f} |"
        )
    alone = next((r for r in rounds if r.stages and any(r.stages.values())), None)
    if alone is not None:
        lines += [
            "",
            "Where the added latency of one call alone goes (its turns split at the "
            "vendor requests the fakes received; mean ms per turn; the last stage runs from "
            "the end of the TTS response, which the fake writes at once after its first "
            "byte, to the first agent message at the contact):",
            "",
            "| stage | ms |",
            "|---|---|",
        ]
        for stage, values in alone.stages.items():
            if values:
                lines.append(f"| {stage} | {float(np.mean(values)):.0f} |")
    odd = [(r.calls, a) for r in rounds for a in r.anomalies]
    if odd:
        lines += [
            "",
            "Anomalies: "
            + "; ".join(f"N={n}: {a}" for n, a in odd[:20])
            + (f" (and {len(odd) - 20} more)" if len(odd) > 20 else ""),
        ]
    target = next((r for r in rounds if r.calls == TARGET_CALLS), None)
    if target is not None:
        p50, p99 = percentile(target.added_ms, 50), percentile(target.added_ms, 99)
        met = p50 < TARGET_P50_MS and p99 < TARGET_P99_MS and target.late == 0
        own50 = percentile(target.runtime_added_ms, 50) if target.runtime_added_ms else math.inf
        own99 = percentile(target.runtime_added_ms, 99) if target.runtime_added_ms else math.inf
        own_met = own50 < TARGET_P50_MS and own99 < TARGET_P99_MS and target.late == 0
        lines += [
            "",
            f"Target at {TARGET_CALLS} calls (added p50 under {TARGET_P50_MS:.0f} ms, "
            f"p99 under {TARGET_P99_MS:.0f} ms, no late messages): measured at the "
            f"contact from the end of its speech, {'met' if met else 'NOT met'} (p50 "
            f"{p50:.0f}, p99 {p99:.0f}, late {target.late}); by the runtime's own stamps "
            f"from the turn end it decided, {'met' if own_met else 'NOT met'} (p50 "
            f"{own50:.0f}, p99 {own99:.0f}).",
        ]
    return "\n".join(lines)


TOOL_TARGET_CALLS = 10
TOOL_TARGET_P50_MS = 20.0
TOOL_TARGET_P99_MS = 60.0


def setting_line(args: argparse.Namespace, load: tuple[float, float, float], started: str) -> str:
    """The command, the fakes' latencies, when and where it ran."""
    flags = f"--calls {args.calls} --ramp {args.ramp:g} --processes {args.processes} " + (
        f"--max-calls {args.max_calls}"
    )
    if args.tool_ms:
        flags += f" --tool-ms {args.tool_ms}"
    if args.baseline_tree:
        flags += f" --baseline-tree {args.baseline_tree}"
    return (
        f"Command: `python -m bench.voice {flags}` (voice_activity_timeout {args.pause_ms} ms; "
        f"fake vendors: STT {args.stt_ms} ms, LLM first token {args.llm_ms} ms, TTS first byte "
        f"{args.tts_ms} ms). Run {started}. Machine: {os.cpu_count()} cores, load average "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the start; the contacts, the fake "
        "vendors, `switchboard serve`, PostgreSQL and Redis run on the same cores."
    )


def tool_report(
    runtimes: list[Runtime],
    args: argparse.Namespace,
    load: tuple[float, float, float],
    started: str,
) -> str:
    fixed = args.pause_ms + args.stt_ms + 2 * args.llm_ms + args.tts_ms + args.tool_ms
    lines = [
        setting_line(args, load, started),
        "",
        f"Each call: three http tools, one called on each of the contact's first three lines; "
        f"the tools' target answers after {args.tool_ms} ms. Per tool call on the shared "
        "monotonic clock: S the fake LLM's end of streaming the call, R and A the target's "
        "receipt of the signed POST and its answer, F the arrival of the first LLM request "
        "carrying the result. The runtime's own time = (F - S) - (A - R). Turn added = the "
        f"contact's end of speech to the first agent audio, minus {fixed} ms (the pause, STT, "
        "two LLM first tokens, the target, TTS).",
        "",
        "| runtime | calls | tool calls stamped / streamed | **runtime's own per tool call p50 / "
        "p99 / max ms** | S to R p50 / p99 ms | A to F p50 / p99 ms | target's own (A - R) p50 "
        "/ max ms | turn added p50 / p99 ms | late messages / all | max lateness ms | fakes' "
        "loop lag p99 / max ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for runtime in runtimes:
        lines += [tool_row(runtime.name, r) for r in runtime.rounds]
    for runtime in runtimes:
        lines += ["", tool_verdict(runtime)]
    anomalies = [a for runtime in runtimes for r in runtime.rounds for a in r.anomalies]
    if anomalies:
        lines += ["", "Anomalies: " + "; ".join(anomalies[:10])]
    return "\n".join(lines)


def tool_row(name: str, r: Round) -> str:
    own = r.tool_added_ms
    streamed = sum(1 for stamps in r.tool_stamps if "streamed" in stamps)
    before, after = r.tool_ms("streamed", "received"), r.tool_ms("answered", "arrived")
    target = r.tool_ms("received", "answered")
    return (
        f"| {name} | {r.calls} | {len(own)} / {streamed} | **{p(own, 50)} / {p(own, 99)} / "
        f"{max(own, default=math.nan):.0f}** | {p(before, 50)} / {p(before, 99)} | "
        f"{p(after, 50)} / {p(after, 99)} | {p(target, 50)} / "
        f"{max(target, default=math.nan):.0f} | {p(r.added_ms, 50)} / {p(r.added_ms, 99)} | "
        f"{r.late} / {r.chunks} | {r.max_lateness_ms:.0f} | {r.vendor_lag['p99_ms']:.0f} / "
        f"{r.vendor_lag['max_ms']:.0f} |"
    )


def tool_verdict(runtime: Runtime) -> str:
    at_target = [r for r in runtime.rounds if r.calls == TOOL_TARGET_CALLS]
    own = [ms for r in at_target for ms in r.tool_added_ms]
    if not own:
        return f"{runtime.name}: no round of {TOOL_TARGET_CALLS} calls with stamped tool calls."
    late = sum(r.late for r in at_target)
    p50, p99 = percentile(own, 50), percentile(own, 99)
    met = p50 < TOOL_TARGET_P50_MS and p99 < TOOL_TARGET_P99_MS and late == 0
    return (
        f"{runtime.name}: target at {TOOL_TARGET_CALLS} calls (the runtime's own time per tool "
        f"call p50 under {TOOL_TARGET_P50_MS:.0f} ms, p99 under {TOOL_TARGET_P99_MS:.0f} ms, no "
        f"late messages), over its {len(at_target)} round(s) of {TOOL_TARGET_CALLS} calls, "
        f"{len(own)} tool calls: {'met' if met else 'NOT met'} (p50 {p50:.1f}, p99 {p99:.1f} "
        f"ms, late messages {late})."
    )


def first_turn_report(
    runtimes: list[Runtime],
    args: argparse.Namespace,
    load: tuple[float, float, float],
    started: str,
) -> str:
    lines = [
        setting_line(args, load, started),
        "",
        "Added latency per turn (the contact's end of speech to the first agent audio, minus "
        f"{args.pause_ms + args.stt_ms + args.llm_ms + args.tts_ms} ms of pause and vendors). "
        "Each round ran against both runtimes, in alternating order; the first turn is each "
        "call's first transcription, LLM and TTS requests.",
        "",
        '| runtime | round | calls | first turn ("Hello?") p50 / p99 ms | later turns p50 / '
        "p99 ms | all turns p50 / p99 ms | late messages / all |",
        "|---|---|---|---|---|---|---|",
    ]
    for runtime in runtimes:
        rows = [*enumerate(runtime.rounds, start=1), ("all", None)]
        for label, r in rows:
            chosen = runtime.rounds if r is None else [r]
            first = [ms for c in chosen for ms in c.added_by_turn.get("hello", [])]
            later = [
                ms
                for c in chosen
                for turn in ("minute", "sounds_good")
                for ms in c.added_by_turn.get(turn, [])
            ]
            every = [ms for c in chosen for ms in c.added_ms]
            calls = "-" if r is None else str(r.calls)
            bold = "**" if r is None else ""
            lines.append(
                f"| {runtime.name} | {bold}{label}{bold} | {calls} | {bold}{p(first, 50)} / "
                f"{p(first, 99)}{bold} | {p(later, 50)} / {p(later, 99)} | {p(every, 50)} / "
                f"{p(every, 99)} | {sum(c.late for c in chosen)} / "
                f"{sum(c.chunks for c in chosen)} |"
            )
    return "\n".join(lines)


@dataclass
class Runtime:
    """One `switchboard voice` under test: this tree's, or --baseline-tree's."""

    name: str
    url: str
    pid: int
    log: Path
    rounds: list[Round] = field(default_factory=list)


def run_rounds(
    args: argparse.Namespace,
    counts: list[int],
    api: str,
    origin: str,
    setup: Setup,
    runtimes: list[Runtime],
    folder: Path,
    vad: dict[str, float],
) -> None:
    """A warm-up call per runtime, then each round once per runtime, their order alternating."""
    for runtime in runtimes:
        # A warm-up call (imports, first model load, first connections): not reported.
        warm = run_round(
            1, args, api, runtime.url, origin, setup, runtime.pid, runtime.log, folder, vad
        )
        print(f"{runtime.name} warm-up: added {[round(v) for v in warm.added_ms]} ms", flush=True)
    for index, count in enumerate(counts):
        for runtime in runtimes if index % 2 == 0 else runtimes[::-1]:
            done = run_round(
                count, args, api, runtime.url, origin, setup, runtime.pid, runtime.log, folder, vad
            )
            runtime.rounds.append(done)
            print(
                f"{runtime.name} N={count}: added p50 {p(done.added_ms, 50)} p99 "
                f"{p(done.added_ms, 99)} ms, first turn p99 "
                f"{p(done.added_by_turn.get('hello', []), 99)} ms, late "
                f"{done.late}/{done.chunks}, cores/call {done.cores_per_call:.3f}, MiB/call "
                f"{(done.rss_peak - done.rss_before) / 2**20 / count:.1f}, tool calls "
                f"{len(done.tool_added_ms)} (own p50 {p(done.tool_added_ms, 50)} p99 "
                f"{p(done.tool_added_ms, 99)} ms), anomalies {len(done.anomalies)}",
                flush=True,
            )


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    counts = [int(n) for n in args.calls.split(",")]
    load = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    folder = Path(tempfile.mkdtemp(prefix="switchboard-bench-voice-"))
    vad = vad_decision_ms(args.pause_ms)
    print("Silero alone, ms beyond the pause:", {k: round(v) for k, v in vad.items()}, flush=True)
    with bench_servers() as (url, redis_url, _):
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "REDIS_URL": redis_url,
            "SWITCHBOARD_TELEPHONY": "sandbox",
            "SWITCHBOARD_RATE_LIMIT_REQUESTS": "1000000",
            # The tools' target is on loopback, as every process of the bench.
            "SWITCHBOARD_ALLOW_PRIVATE_WEBHOOKS": "true" if args.tool_ms else "false",
        }
        get_settings.cache_clear()
        subprocess.run(
            [sys.executable, "-m", "cli", "migrate"], env=env, check=True, capture_output=True
        )
        with vendors_process(args, env) as (origin, _vendors), contextlib.ExitStack() as stack:
            from voice.fake_vendors import env_for

            voice_port, api_port = free_port(), free_port()
            env = {
                **env,
                **env_for(origin),
                "SWITCHBOARD_VOICE_URL": f"ws://127.0.0.1:{voice_port}",
                "SWITCHBOARD_VOICE_MAX_CALLS": str(args.max_calls),
            }
            api = f"http://127.0.0.1:{api_port}"
            stack.enter_context(serve(env, api_port))
            sides = [("this tree", voice_port, "")]
            if args.baseline_tree:
                sides.append((f"baseline ({args.baseline_tree})", free_port(), args.baseline_tree))
            runtimes = []
            for n, (name, port, tree) in enumerate(sides):
                log = folder / f"voice-{n}.log"
                voice = stack.enter_context(voice_process(env, port, log, args.processes, tree))
                runtimes.append(Runtime(name, f"ws://127.0.0.1:{port}", voice.pid, log))
            setup = provision(
                env, api, max(counts) + 1, args.pause_ms, origin if args.tool_ms else ""
            )
            run_rounds(args, counts, api, origin, setup, runtimes, folder, vad)
    if args.tool_ms:
        title, body = (
            "Voice runtime: tool calls",
            tool_report(runtimes, args, load, started),
        )
    elif args.baseline_tree:
        title, body = "Voice runtime: first turn", first_turn_report(runtimes, args, load, started)
    else:
        title, body = "Voice runtime", report(runtimes[0].rounds, args, load, started, vad)
    print(body)
    print(f"(work files in {folder})")
    if not args.no_write:
        write_section(title, body)


if __name__ == "__main__":
    main(sys.argv[1:])
