"""The import-linter contracts (pyproject.toml) catch what they promise, for features that do not
exist yet: each case copies the packages to a scratch tree, adds one offending module, and runs
`lint-imports` there. A contract that names today's features one by one would keep these cases."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("api", "cli", "integrations", "jobs", "migrations", "tenancy", "voice")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


@pytest.fixture(scope="module")
def clean_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = tmp_path_factory.mktemp("tree")
    for package in PACKAGES:
        shutil.copytree(
            REPO / package,
            tree / package,
            ignore=shutil.ignore_patterns("__pycache__", "*.wav", "*.raw", "*.ulaw"),
        )
    shutil.copy(REPO / "pyproject.toml", tree / "pyproject.toml")
    return tree


def lint(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=tree,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )


def with_module(clean_tree: Path, scratch: Path, module: str, source: str) -> Path:
    tree = scratch / "tree"
    shutil.copytree(clean_tree, tree)
    path = tree / (module.replace(".", "/") + ".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.parent / "__init__.py").touch()
    path.write_text(source)
    return tree


def test_todays_tree_keeps_every_contract(clean_tree: Path) -> None:
    result = lint(clean_tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "source", "contract"),
    [
        (
            "api.newfeature.service",
            "import quart\n",
            "Feature services, queries and tasks know nothing of HTTP",
        ),
        (
            "api.newfeature.tasks",
            "from api import validation\n",
            "Feature services, queries and tasks know nothing of HTTP",
        ),
        (
            "api.newfeature.routes",
            "from api import app\n",
            "Features never reach up into the app shell",
        ),
        (
            "api.newfeature.queries",
            "import jobs.due\n",
            "Features never reach up into the app shell",
        ),
        (
            "voice.newpart",
            "from api import auth\n",
            "The voice runtime does not import the HTTP shell",
        ),
        (
            "voice.newpart",
            "import voice.fake_vendors\n",
            "The development stand-in vendors are imported only by the dev command",
        ),
        (
            "cli.newcommand",
            "from voice.fake_vendors import FakeVendors\n",
            "The development stand-in vendors are imported only by the dev command",
        ),
        (
            "api.newfeature.service",
            "import pipecat.frames.frames\n",
            "Pipecat is imported only under voice/",
        ),
        ("integrations.newvendor", "import pipecat\n", "Pipecat is imported only under voice/"),
        ("tenancy.newpart", "import migrations\n", "Packages point one way"),
    ],
)
def test_a_new_module_that_breaks_a_contract_is_caught(
    clean_tree: Path, tmp_path: Path, module: str, source: str, contract: str
) -> None:
    # given a tree with one new module, when lint-imports runs, then the named contract is broken
    tree = with_module(clean_tree, tmp_path, module, source)
    assert_broken(lint(tree), contract)


def test_the_route_toolkit_importing_a_new_feature_is_caught(
    clean_tree: Path, tmp_path: Path
) -> None:
    tree = with_module(clean_tree, tmp_path, "api.newfeature.service", "X = 1\n")
    auth = tree / "api" / "auth.py"
    auth.write_text(auth.read_text() + "\nimport api.newfeature.service  # noqa\n")
    assert_broken(lint(tree), "The route toolkit")


def assert_broken(result: subprocess.CompletedProcess[str], contract: str) -> None:
    assert result.returncode != 0, result.stdout + result.stderr
    broken = result.stdout.split("Broken contracts", 1)[-1]
    assert contract in " ".join(broken.split()), result.stdout
