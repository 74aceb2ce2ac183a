"""Run every benchmark (``just bench``) or the ones named: ``python -m benchmarks form state``;
``--big`` adds the 1M-entry sizes where a benchmark has them. ``tables`` (run last) prints every
row of issue 12's two tables with the figures before, the targets and the peer's figures.

Benchmarks print figures and assert nothing; machines here are shared and noisy.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    big = "--big" in argv  # the 1M-entry sizes, for the benchmarks that have them (slow)
    names = [name for name in argv if name != "--big"]
    here = Path(__file__).parent
    available = sorted(
        info.name.removeprefix("bench_")
        for info in pkgutil.iter_modules([str(here)])
        if info.name.startswith("bench_")
    )
    # The summary of issue 12's tables comes last, after the benchmarks it draws on.
    chosen = names or sorted(available, key=lambda name: name == "tables")
    for name in chosen:
        if name not in available:
            print(f"unknown benchmark {name!r}; available: {', '.join(available)}")
            return 2
        print(f"== {name} ==", flush=True)
        run = importlib.import_module(f"benchmarks.bench_{name}").main
        if "big" in inspect.signature(run).parameters:
            run(big=big)
        else:
            run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
