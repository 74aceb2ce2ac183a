"""``just bench tables`` at tiny sizes: it runs through every measuring path and prints every
row of issue 12's two tables, each with a figure, the figure before and the target (the second
table with the peer's figure and the ratio). No timing is asserted."""

from __future__ import annotations

import re

import pytest

from benchmarks import bench_tables

TINY = bench_tables.Sizes(
    journal=(60, 200),
    forms=(5, 20),
    waits=(5, 20),
    core=((1, 3), (10, 10)),
    history_requests=12,
    rounds=1,
    budget=0.001,
    cold_rounds=1,
)


def test_every_row_of_both_tables_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    bench_tables.main(sizes=TINY)
    out = capsys.readouterr().out
    lines = out.splitlines()
    names = [*bench_tables.ISSUE_NOW, *bench_tables.PEER]
    assert len(names) == 21
    for name in names:
        assert f"  {name}" in lines, name
    # The first table: each row its figure, then the issue's figure before and the target.
    for name in bench_tables.ISSUE_NOW:
        block = re.split(r"\n  (?=\S)", out.split(f"\n  {name}\n", 1)[1], maxsplit=1)[0]
        assert re.search(r"now:\s+\S", block), name
        assert f"before: {bench_tables.ISSUE_NOW[name]}" in block, name
        assert f"target: {bench_tables.TARGET[name]}" in block, name
    # The sized rows show their growth from one size to the next.
    assert out.count("size x") >= 6
    assert "60: " in out and "200: " in out
    # The second table: one line per case and form size, each with the peer's figure.
    sized = [line for line in lines if re.match(r"\s+\d+q/\d+o  now ", line)]
    assert len(sized) == 8 * len(TINY.core)
    assert all(" ratio " in line and " peer " in line for line in sized)
    assert "1q/3o" in out and "10q/10o" in out and "100q/20o" not in out
