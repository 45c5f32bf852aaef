"""N concurrent sandbox calls through the voice runtime against fake vendors with fixed latencies.

Run: `python -m bench.voice --calls 1,10,20,40,80` (or `make bench-voice`); writes the "Voice
runtime" section of bench/RESULTS.md. See bench/voice/__main__.py for how each number is
measured.
"""
