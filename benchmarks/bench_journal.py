"""The journal at size: bytes per entry, open + queue rebuild, history pages and reads.

Rows of issue 12's first table that concern the journal and the history, at 1k / 10k / 100k
journal entries (and 1M with ``--big``: ``python -m benchmarks journal --big``), each with its
growth factor against the size before it (x10 in size: a factor near 10 is linear, near 1 is
bounded). Prints figures, asserts nothing.

The session is what the runtime writes for background forms asked and answered through the
real entry builders (``persistence.journal``): per form a ``tool-call``, the request batch
(``ask:payload``, ``ask:history-request``, ``ask:queued``), the receipt ``tool-result``, the
completion batch (``ask:history-completed``, ``ask:queue-completed``) and the delivered
``ask:background-answer``: eight entries in five frames. The last ten forms stay pending.

Rows:

- bytes per entry: file size / entries;
- open + queue rebuild: ``open_runtime(session=FILE)`` entered and left (the real startup:
  open, rebuild, recovery), and the peak RSS of a child process doing only that;
- ``list_ask_history`` first page / ``read_ask_history`` of the middle record, as
  ``pi-agent-ask history list|read --session FILE`` runs them (open included);
- on a 1,200-request session, a ``read_ask_history`` and a ``list_ask_history`` call through a
  running runtime (the open not included).

Run: ``.venv/bin/python -m benchmarks journal`` (add ``--big`` for 1M entries; slow).
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pi_agent_ask.actors.records import AskRequest, Outcome
from pi_agent_ask.form import text as texts
from pi_agent_ask.form.result import build_result
from pi_agent_ask.form.types import AskParams, Draft, Option, Question
from pi_agent_ask.persistence import journal as jr

SIZES = (1_000, 10_000, 100_000)
BIG = 1_000_000
ENTRIES_PER_FORM = 8
PENDING = 10

ISSUE_NOW = {
    "bytes per entry": "835",
    "open + queue rebuild 100k": "49 s",
    "open + queue rebuild 1M": "270 s, peak RSS 9.2 GB",
    "list first page 100k": "17 s",
    "1,200-request read/list": "about 0.5 s each",
}


def _params(n: int) -> AskParams:
    options = (
        Option("small", "Small", "Keep the change small"),
        Option("large", "Large", "Rework the module"),
        Option("none", "Neither"),
    )
    return AskParams(
        title=f"Form {n}",
        background=True,
        questions=(
            Question("scope", "Scope", f"Which scope for change {n}?", "single", options),
            Question("tone", "Tone", "Which tone for the summary?", "multi", options),
        ),
    )


def _arguments(params: AskParams) -> dict[str, Any]:
    return {**params.to_json(), "background": True}


def _form_entries(n: int, *, answered: bool) -> list[list[tuple[str, dict[str, Any]]]]:
    """The frames (each a list of entries appended together) the runtime writes for form n."""
    params = _params(n)
    call_id = f"call-{n}"
    request = AskRequest(
        str(uuid.uuid4()), params, True, "2026-01-01T00:00:00.000Z", call_id, None, "background"
    )
    receipt = texts.receipt_tool_result(request.request_id, ["scope", "tone"], 1)
    frames: list[list[tuple[str, dict[str, Any]]]] = [
        [
            (
                jr.TOOL_CALL,
                {"toolCallId": call_id, "name": "ask_user", "arguments": _arguments(params)},
            )
        ],
        [
            (jr.PAYLOAD, jr.payload_entry(params, call_id, request.created_at)),
            (jr.HISTORY_REQUEST, jr.history_request_entry(request)),
            (jr.QUEUED, jr.queued_entry(request)),
        ],
        [(jr.TOOL_RESULT, {"toolCallId": call_id, "name": "ask_user", "result": receipt})],
    ]
    if not answered:
        return frames
    note = "Needle note" if n == 0 else f"note {n}"
    result = build_result(
        params,
        [Draft(selected=(n % 2,), note=note), Draft(selected=(0, 1))],
        request_id=request.request_id,
    )
    outcome = Outcome(request.request_id, result=result)
    frames.append(jr.completion_entries(outcome, background=True))
    frames.append([(jr.BACKGROUND_ANSWER, texts.background_answer_message(outcome, params=params))])
    return frames


def write_session(path: Path, entries: int) -> int:
    """A session of about ``entries`` entries written as the runtime writes them; returns the
    number of forms."""
    from pi_agent_ask.actors.session import open_session_file

    forms = max(entries // ENTRIES_PER_FORM, PENDING + 1)
    with open_session_file(path) as session:  # as the runtime opens it (checkpoints and all)
        for n in range(forms):
            for frame in _form_entries(n, answered=n < forms - PENDING):
                session.append_many(frame)
    return forms


def _settings(directory: Path) -> Path:
    path = directory / "settings.json"
    path.write_text(json.dumps({"schemaVersion": 6, "behaviour": {"historyTools": True}}))
    return path


def _open_runtime_seconds(path: Path, settings: Path) -> float:
    import trio

    from pi_agent_ask.actors.form import NullSurface
    from pi_agent_ask.actors.runtime import open_runtime

    async def run() -> float:
        start = time.perf_counter()
        async with open_runtime(session=path, settings=settings, surface=NullSurface()) as rt:
            await trio.lowlevel.checkpoint()
            await rt.statistics()
        return time.perf_counter() - start

    return trio.run(run)


def _child_peak_rss(path: Path, settings: Path) -> int:
    """Peak RSS in bytes of a fresh process that only opens the runtime on ``path`` (Linux)."""
    # VmHWM, not ru_maxrss: a forked child's ru_maxrss starts at its parent's (which holds the
    # session just written), VmHWM starts afresh with the new program.
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from benchmarks.bench_journal import _open_runtime_seconds\n"
        "_open_runtime_seconds(Path(sys.argv[1]), Path(sys.argv[2]))\n"
        "status = Path('/proc/self/status').read_text().split('VmHWM:')[1]\n"
        "print(int(status.split()[0]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path), str(settings)],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    return int(done.stdout.strip().splitlines()[-1]) * 1024


def _cli_seconds(argv: list[str]) -> float:
    from pi_agent_ask.cli import main

    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    seconds = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"history command failed: {argv}: {err.getvalue()}")
    return seconds


def _middle_key(path: Path) -> tuple[str, str]:
    from pi_agent_ask.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["history", "list", "--session", str(path), "--limit", "1", "--offset", "0"])
    total = json.loads(out.getvalue())["total"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(
            ["history", "list", "--session", str(path), "--limit", "1", "--offset", str(total // 2)]
        )
    record = json.loads(out.getvalue())["records"][0]
    return record["requestId"], record["questionId"]


def _median(call: Callable[[], float], rounds: int) -> float:
    return statistics.median(call() for _ in range(rounds))


def _fmt(seconds: float) -> str:
    if seconds < 1.0:
        return f"{seconds * 1e3:8.1f} ms"
    return f"{seconds:8.2f} s "


def _growth(values: list[float]) -> str:
    factors = [f"x{b / a:.1f}" for a, b in itertools.pairwise(values) if a > 0]
    return "growth per x10 entries: " + (" ".join(factors) if factors else "-")


def _runtime_history_calls(path: Path, settings: Path, rounds: int) -> tuple[float, float]:
    """Median seconds of one read and one list call through a running runtime."""
    import trio

    from pi_agent_ask.actors.form import NullSurface
    from pi_agent_ask.actors.runtime import open_runtime

    request_id, question_id = _middle_key(path)

    async def run() -> tuple[float, float]:
        async with open_runtime(session=path, settings=settings, surface=NullSurface()) as rt:
            reads, lists = [], []
            for n in range(rounds):
                start = time.perf_counter()
                got = await rt.call_tool(
                    "read_ask_history", {"requestId": request_id, "questionId": question_id}
                )
                reads.append(time.perf_counter() - start)
                if got.get("isError"):
                    raise SystemExit(f"read failed: {got}")
                start = time.perf_counter()
                got = await rt.call_tool("list_ask_history", {"offset": n, "limit": 20})
                lists.append(time.perf_counter() - start)
                if got.get("isError"):
                    raise SystemExit(f"list failed: {got}")
            return statistics.median(reads), statistics.median(lists)

    return trio.run(run)


def main(big: bool = False) -> None:
    """Print the journal and history rows at every size."""
    sizes = (*SIZES, BIG) if big else SIZES
    print("journal at size (issue 12 figures for 'now' quoted in brackets)")
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        settings = _settings(root)
        rows: dict[str, list[float]] = {
            "bytes": [],
            "open": [],
            "rss": [],
            "list": [],
            "read": [],
        }
        for size in sizes:
            path = root / f"s{size}.pias"
            start = time.perf_counter()
            forms = write_session(path, size)
            written = time.perf_counter() - start
            entries = forms * ENTRIES_PER_FORM - PENDING * 3
            file_bytes = path.stat().st_size
            rounds = 3 if size <= 100_000 else 1
            open_s = _median(lambda path=path: _open_runtime_seconds(path, settings), rounds)
            rss = _child_peak_rss(path, settings)
            list_s = _median(
                lambda path=path: _cli_seconds(["history", "list", "--session", str(path)]), rounds
            )
            request_id, question_id = _middle_key(path)
            argv = ["history", "read", "--session", str(path), request_id, question_id]
            read_s = _median(lambda argv=argv: _cli_seconds(argv), rounds)
            rows["bytes"].append(file_bytes / entries)
            rows["open"].append(open_s)
            rows["rss"].append(rss)
            rows["list"].append(list_s)
            rows["read"].append(read_s)
            print(
                f"  {entries:>9,} entries, {forms:,} forms ({file_bytes / 1e6:7.1f} MB, "
                f"written in {written:.1f} s): {file_bytes / entries:6.0f} bytes/entry; "
                f"open + queue rebuild {_fmt(open_s)} (peak RSS {rss / 1e6:7.1f} MB); "
                f"history list first page {_fmt(list_s)}; read {_fmt(read_s)}"
            )
            if size != sizes[-1]:
                path.unlink()
        print(f"  bytes per entry [now {ISSUE_NOW['bytes per entry']}; target <= 200]")
        print(
            f"  open + queue rebuild: {_growth(rows['open'])} "
            f"[now {ISSUE_NOW['open + queue rebuild 100k']} at 100k, "
            f"{ISSUE_NOW['open + queue rebuild 1M']} at 1M; target < 0.2 s / < 2 s]"
        )
        print(f"  peak RSS: {_growth(rows['rss'])} [target: bounded by what is pending]")
        print(
            f"  history list first page: {_growth(rows['list'])} "
            f"[now {ISSUE_NOW['list first page 100k']} at 100k; target < 50 ms]"
        )
        print(f"  history read: {_growth(rows['read'])}")
        path = root / "history1200.pias"
        write_session(path, 1_200 * ENTRIES_PER_FORM)
        read_s, list_s = _runtime_history_calls(path, settings, rounds=5)
        print(
            f"  1,200-request session, through a running runtime: read_ask_history "
            f"{_fmt(read_s)}, list_ask_history {_fmt(list_s)} "
            f"[now {ISSUE_NOW['1,200-request read/list']}; target < 10 ms]"
        )


if __name__ == "__main__":
    main(big="--big" in sys.argv[1:])
