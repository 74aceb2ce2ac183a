"""Run every benchmark (``just bench``) or the ones named: ``python -m benchmarks form state``.

Benchmarks print figures and assert nothing; machines here are shared and noisy.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main(names: list[str]) -> int:
    here = Path(__file__).parent
    available = sorted(
        info.name.removeprefix("bench_")
        for info in pkgutil.iter_modules([str(here)])
        if info.name.startswith("bench_")
    )
    chosen = names or available
    for name in chosen:
        if name not in available:
            print(f"unknown benchmark {name!r}; available: {', '.join(available)}")
            return 2
        print(f"== {name} ==", flush=True)
        importlib.import_module(f"benchmarks.bench_{name}").main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
