"""`python -m voice.fake_vendors`: run the fake vendors until interrupted."""

from __future__ import annotations

import argparse
import asyncio
import json

from .server import DEFAULT_PHRASES, FakeVendors


async def serve(host: str, port: int, phrases: str) -> None:
    fake = FakeVendors(phrases)
    origin = await fake.start(host, port)
    print(origin, flush=True)
    print(json.dumps(fake.env, indent=2), flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await fake.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description="Fake LLM and speech vendors on one origin.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument(
        "--phrases",
        default=str(DEFAULT_PHRASES),
        help="directory with manifest.json and the known recordings",
    )
    args = parser.parse_args()
    try:
        asyncio.run(serve(args.host, args.port, args.phrases))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
