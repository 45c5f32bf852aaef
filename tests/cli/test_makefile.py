"""The README's set-up commands: a first `make run` or `make test` says it is installing, and how
long that takes, before the minutes of pip (the install itself is what `.ci/run` exercises)."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_first_install_says_what_it_is_doing_before_it_starts(tmp_path: Path) -> None:
    # given no virtual environment yet, when make plans `make test`, then its first words say so
    result = subprocess.run(
        ["make", "-n", f"VENV={tmp_path / 'venv'}", "test"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = result.stdout.splitlines()
    first_pip = next(i for i, line in enumerate(lines) if "pip install" in line)
    announced = " ".join(lines[:first_pip])
    assert "Installing Switchboard's dependencies" in announced
    assert "about 3 minutes" in announced
