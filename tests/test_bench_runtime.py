"""The runtime benchmark's median of runs (``bench_runtime.median_rate``): every run is a real
``throughput`` run, and one with a session file starts a new file each time. Nothing is timed
against a bound."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from benchmarks import bench_runtime


def test_the_median_rate_runs_each_round_and_removes_each_session_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs: list[Path | None] = []
    real = bench_runtime.throughput

    async def counted(count: int, settings: Path, **options: object) -> tuple[float, float]:
        session = options.get("session")
        # A new file every run (checked before the run opens it).
        assert session is None or not await trio.Path(str(session)).exists()
        runs.append(None if session is None else Path(str(session)))
        return await real(count, settings, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(bench_runtime, "throughput", counted)
    settings = tmp_path / "settings.json"
    session = tmp_path / "s.pias"
    rate = bench_runtime.median_rate(5, settings, rounds=3, session=session)
    assert rate > 0
    assert runs == [session, session, session]
    assert not session.exists()
    assert bench_runtime.median_rate(5, settings, rounds=1) > 0
    assert runs[-1] is None and len(runs) == 4
