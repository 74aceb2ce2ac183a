"""The dependencies: each bounded below and at its next major version, and uv.lock in line with
pyproject.toml, so every fresh machine installs the same versions (``scripts/install``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _requirements() -> list[str]:
    project = PYPROJECT["project"]
    found = [*PYPROJECT["build-system"]["requires"], *project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        found.extend(extra)
    return found


def unbounded(requirements: list[str]) -> list[str]:
    """The requirements of other projects without both a lower and an upper bound."""
    return [
        text
        for text in requirements
        if canonicalize_name((req := Requirement(text)).name) != "pi-agent-ask"
        and not (
            any(spec.operator in (">=", ">", "==", "~=") for spec in req.specifier)
            and any(spec.operator in ("<", "==", "~=") for spec in req.specifier)
        )
    ]


def test_every_dependency_is_bounded() -> None:
    assert unbounded(_requirements()) == []


def test_the_bound_check_sees_a_missing_bound() -> None:
    assert unbounded(["trio>=0.27", "attrs<27", "mcp>=2.3,<3", "pi-agent-ask[test]"]) == [
        "trio>=0.27",
        "attrs<27",
    ]


def _uv() -> str:
    beside = Path(sys.executable).parent / "uv"
    found = str(beside) if beside.exists() else shutil.which("uv")
    if found is None:
        pytest.skip("uv is not installed (scripts/install puts it into .venv)")
    return found


def test_the_lock_agrees_with_pyproject() -> None:
    # uv's own check, offline: a lock that no longer matches pyproject.toml fails here rather
    # than installing something else on a fresh machine.
    done = subprocess.run(
        [_uv(), "lock", "--check", "--offline", "--quiet"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
