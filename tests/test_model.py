"""The Promela models of the queue's delivery protocol (``models/queue.pml``) and of the team
desk's (``models/team.pml``: two desks, leases, a forwarder failing over) hold, and their
properties are not vacuous: each planted protocol bug breaks one of them."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(
    shutil.which("spin") is None or shutil.which("gcc") is None,
    reason="spin and gcc are needed for the model check (Debian: apt-get install spin gcc; "
    ".ci/run installs them)",
)


def _model(*defines: str, models: str = "queue team") -> tuple[int, dict[str, str]]:
    done = subprocess.run(
        [str(ROOT / "scripts" / "model"), *defines],
        env={**os.environ, "MODELS": models},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    results = {}
    for line in done.stdout.splitlines():
        name, _, rest = line.partition(": ")
        results[name] = rest
    return done.returncode, results


def test_the_queue_model_holds_every_property() -> None:
    code, results = _model()
    assert code == 0, results
    assert set(results) == {
        "exactly_once",
        "recorded_before_delivered",
        "all_delivered",
        "team_one_outcome",
        "team_exactly_once",
        "team_recorded_before_delivered",
        "team_all_delivered",
    }
    for result in results.values():
        assert result.startswith("errors: 0, ")


@pytest.mark.parametrize(
    ("mutant", "broken"),
    [
        ("MUTANT_WAKE_BEFORE_MARK", "recorded_before_delivered"),
        ("MUTANT_RETURN_BEFORE_WRITE", "recorded_before_delivered"),
        ("MUTANT_ROUTE_TO_ANSWERED", "all_delivered"),
        ("MUTANT_NO_GIVE_BACK", "all_delivered"),
        ("MUTANT_MARK_AGAIN", "team_exactly_once"),
        ("MUTANT_SUBMIT_ANY", "team_one_outcome"),
        ("MUTANT_NEW_KEY_ON_RETRY", "team_all_delivered"),
    ],
)
def test_a_planted_bug_breaks_a_property(mutant: str, broken: str) -> None:
    code, results = _model(f"-D{mutant}", models="team" if broken.startswith("team_") else "queue")
    assert code == 1
    assert results[broken].startswith("errors: 1, "), results
