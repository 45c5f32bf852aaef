"""`switchboard tenants export --out FILE` writes a file only the owner can read, never through
a planted symlink or over an existing file, and refuses a bad path with one line."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tests.helpers import switchboard


def _one_line_refusal(done: object, *words: str) -> str:
    assert done.returncode != 0  # type: ignore[attr-defined]
    err = done.stderr.strip()  # type: ignore[attr-defined]
    assert "Traceback" not in err, err
    assert len(err.splitlines()) == 1, err
    for word in words:
        assert word in err, err
    return err


def test_export_does_not_follow_a_symlink_planted_at_the_partial_file(
    servers, tenant, tmp_path: Path
) -> None:
    # Given a symlink where the export writes its partial file, pointing at another file.
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    victim.chmod(0o644)
    out = tmp_path / "tenant.jsonl"
    Path(f"{out}.partial").symlink_to(victim)
    # When the export runs, then it refuses, and the other file is untouched.
    done = switchboard(servers, "tenants", "export", str(tenant.id), "--out", str(out))
    _one_line_refusal(done, f"{out}.partial")
    assert victim.read_text() == "precious\n"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644
    assert not out.exists()


def test_export_never_leaves_a_file_readable_by_others(servers, tenant, tmp_path: Path) -> None:
    # Given a world-readable file left where the partial file goes (an earlier run's).
    out = tmp_path / "tenant.jsonl"
    stale = Path(f"{out}.partial")
    stale.write_text("")
    stale.chmod(0o644)
    done = switchboard(servers, "tenants", "export", str(tenant.id), "--out", str(out))
    # Then no export lands in it: refused, or written to a new file of mode 0600.
    if done.returncode == 0:
        assert stat.S_IMODE(out.stat().st_mode) == 0o600
    else:
        _one_line_refusal(done, f"{out}.partial")
        assert not out.exists() and stale.read_text() == ""
    # And an ordinary export under a permissive umask is owner-only too.
    fresh = tmp_path / "fresh.jsonl"
    old = os.umask(0)
    try:
        done = switchboard(servers, "tenants", "export", str(tenant.id), "--out", str(fresh))
    finally:
        os.umask(old)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600
    assert not Path(f"{fresh}.partial").exists()


def test_export_to_a_directory_is_refused_with_one_line(servers, tenant, tmp_path: Path) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    for out in (f"{folder}/", str(folder)):
        done = switchboard(servers, "tenants", "export", str(tenant.id), "--out", out)
        _one_line_refusal(done, "--out")
    assert list(folder.iterdir()) == []


def test_export_to_an_empty_path_is_refused_with_one_line(servers, tenant, tmp_path: Path) -> None:
    done = switchboard(servers, "tenants", "export", str(tenant.id), "--out", "")
    _one_line_refusal(done, "--out")
    assert not Path(".partial").exists()


def test_export_over_an_existing_file_is_refused_and_leaves_it(
    servers, tenant, tmp_path: Path
) -> None:
    out = tmp_path / "tenant.jsonl"
    out.write_text("keep me\n")
    done = switchboard(servers, "tenants", "export", str(tenant.id), "--out", str(out))
    _one_line_refusal(done, str(out), "exists")
    assert out.read_text() == "keep me\n"
    assert not Path(f"{out}.partial").exists()


def test_export_into_a_missing_folder_is_refused_with_one_line(
    servers, tenant, tmp_path: Path
) -> None:
    out = tmp_path / "missing" / "tenant.jsonl"
    done = switchboard(servers, "tenants", "export", str(tenant.id), "--out", str(out))
    _one_line_refusal(done, str(out))
