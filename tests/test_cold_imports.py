"""What ``pi-agent-ask ask`` imports before its first form waits for a key (cold start).

The command runs on a pseudo-terminal of its own with ``-X importtime`` (its standard error
goes to a file, so the import log is not mixed with the frame). Once the question's prompt is on
the screen the form is drawn and waiting; the log then names every module imported so far (and
perhaps a few imported just after, which only makes the check stricter). Counting modules, not
timing them: ``just bench cold`` has the figures.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "Which region first?"
PAYLOAD = {
    "questions": [
        {
            "id": "region",
            "prompt": PROMPT,
            "options": [{"value": "eu", "label": "EU"}, {"value": "us", "label": "US"}],
        }
    ]
}

NOT_BEFORE_THE_FIRST_FRAME = (
    # Schema errors only: valid arguments pass fastjsonschema's check (form/schema_check.py).
    "jsonschema",
    "referencing",
    # Other commands: the MCP server, the desk, the demo host, asyncio hosts, frameworks.
    "mcp",
    "hypercorn",
    "pi_agent_ask.desk",  # the parser of `ask` alone is built (cli.build_parser)
    "pi_agent_ask.mcp_server",
    "pi_agent_ask.host.demo",
    "pi_agent_ask.aio",
    "pi_agent_ask.integrations",
    "pi_agent_ask.store",  # the team desk's store
    # Read by the history tools and the history command, not by a form; the Markdown export.
    "pi_agent_ask.persistence.history",
    "pi_agent_ask.persistence.history_records",
    "pi_agent_ask.persistence.history_markdown",
    # Imported on first use: a paste of a clipboard image, the settings overlay opening, a Tab
    # completing an ``@`` path in an editor.
    "pi_agent_ask.clipboard",
    "pi_agent_ask.ui.paths",
    "pi_agent_ask.persistence.settings_list",
    # The external UI bridge: only a foreground call outside TUI mode asks one.
    "pi_agent_ask.actors.external",
    # The waiter: only a wait_for_answers call needs it.
    "pi_agent_ask.actors.wait",
    "pi_agent_ask.actors.wait_state",
)
NEEDED = ("trio", "prompt_toolkit", "pi_agent_ask.ui.render", "pi_agent_ask.form.validate")


def imports_before_first_frame(tmp_path: Path) -> set[str]:
    payload = tmp_path / "payload.json"
    payload.write_text(json.dumps(PAYLOAD))
    log = tmp_path / "importtime.log"
    command = [
        sys.executable,
        "-X",
        "importtime",
        "-m",
        "pi_agent_ask",
        "ask",
        str(payload),
        "--settings",
        str(tmp_path / "settings.json"),
        "--session",
        str(tmp_path / "history.pias"),
    ]
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(tmp_path / "agent")}
    pid, fd = pty.fork()
    if pid == 0:  # the child: the pty is its controlling terminal, the log its stderr
        try:
            os.chdir(ROOT)
            err = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(err, 2)
            os.execve(sys.executable, command, env)
        finally:
            os._exit(127)
    seen = b""
    try:
        deadline = time.monotonic() + 60
        while PROMPT.encode() not in seen:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(left, 0))
            assert ready, f"no first frame within 60 s; screen so far: {seen[-500:]!r}"
            try:
                seen += os.read(fd, 65536)
            except OSError:  # the child closed the pty (it exited): say what it logged
                raise AssertionError(log.read_text()[-2000:]) from None
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)
    text = log.read_text()
    return set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", text, re.MULTILINE))


def test_ask_imports_only_what_the_form_needs_before_its_first_frame(tmp_path: Path) -> None:
    for name in NOT_BEFORE_THE_FIRST_FRAME:  # each one exists, so its absence means something
        assert importlib.util.find_spec(name) is not None, name
    imported = imports_before_first_frame(tmp_path)
    assert set(NEEDED) <= imported, sorted(set(NEEDED) - imported)
    early = sorted(
        module
        for module in imported
        for name in NOT_BEFORE_THE_FIRST_FRAME
        if module == name or module.startswith(name + ".")
    )
    assert early == []


HOOK_COMMAND_NEVER_IMPORTS = (
    # Claude Code runs ``pi-agent-ask hook claude-code`` on every prompt and after every tool
    # call, and the agent waits for it: one request on a blocking socket needs none of these.
    "trio",
    "attr",
    "attrs",
    "mcp",
    "pi_agent_ask.mcp_server.hook",  # the server's endpoint, on Trio
    "pi_agent_ask.actors",
    "pi_agent_ask.persistence.settings",  # the agent directory is persistence/paths.py
    "pi_agent_ask.persistence.session_file",
    # The servers' own needs (mcp_common's log silencing and progress sums, the mcp command's
    # internal-error report).
    "logging",
    "decimal",
    "traceback",
)


def run_importtime(
    args: list[str], env: dict[str, str], stdin: str = ""
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """``python -X importtime -m pi_agent_ask ARGS`` to its end, and the modules it imported
    (read from the import log on its standard error)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "pi_agent_ask", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    imported = set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", done.stderr, re.M))
    return done, imported


@pytest.mark.parametrize("runtime_dir", [True, False], ids=["runtime-dir", "agent-dir"])
def test_the_hook_command_imports_neither_trio_nor_attrs(tmp_path: Path, runtime_dir: bool) -> None:
    for name in HOOK_COMMAND_NEVER_IMPORTS:
        assert importlib.util.find_spec(name) is not None, name
    hook = {"hook_event_name": "PostToolUse", "cwd": str(tmp_path)}
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(tmp_path / "agent")}
    env.pop("XDG_RUNTIME_DIR", None)
    if runtime_dir:  # where servers put their sockets; else under the agent directory
        env["XDG_RUNTIME_DIR"] = str(tmp_path)
    done, imported = run_importtime(["hook", "claude-code"], env, json.dumps(hook))
    assert done.returncode == 0, done.stderr
    assert "pi_agent_ask.mcp_server.hook_command" in imported
    early = sorted(
        module
        for module in imported
        for name in HOOK_COMMAND_NEVER_IMPORTS
        if module == name or module.startswith(name + ".")
    )
    assert early == []
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("option", "said"),
    [
        (["--progress-interval", "0"], "--progress-interval must be a number of seconds"),
        (["--desk", "Off"], "a desk URL must start with http:// or https://"),
        (["--desk", "http://a/mcp,http://b/mcp"], "several desk URLs are the desks of a team"),
    ],
)
def test_mcp_refuses_an_option_before_it_imports_the_server(option: list[str], said: str) -> None:
    """A refused option is told at once: the MCP SDK's import (a second or more of CPU) comes
    after the options are checked."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PI_AGENT_ASK_")}
    done, imported = run_importtime(["mcp", *option], env)
    assert done.returncode == 2
    assert said in done.stderr
    assert "pi_agent_ask.commands.mcp" in imported
    assert sorted(m for m in imported if m == "mcp" or m.startswith(("mcp.", "trio"))) == []


@pytest.mark.parametrize(
    ("given", "address", "why"),
    [
        ("option", "team-db", 'missing "=" after "team-db" in connection info string'),
        (
            "environment",
            "postgresql://ann@db/te%zz",
            'invalid percent-encoded token: "te%zz"',
        ),
    ],
    ids=["keyword-value", "uri"],
)
def test_desk_refuses_a_store_address_that_does_not_parse_before_it_imports_the_desk(
    given: str, address: str, why: str
) -> None:
    """A mistyped ``--store`` (or ``$PI_AGENT_ASK_STORE``) is told at once, in the words the
    desk's start says it in (``tests/test_team_setup.py``), not after seconds of importing
    the desk and its server (psycopg and libpq, which read the address, are all it loads)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PI_AGENT_ASK_")}
    args = ["desk", "--headless"]
    if given == "option":
        args += ["--store", address]
    else:
        env["PI_AGENT_ASK_STORE"] = address
    done, imported = run_importtime(args, env)
    assert done.returncode == 2
    said = [line for line in done.stderr.splitlines() if not line.startswith("import time:")]
    assert said == [
        "pi-agent-ask: cannot start the desk: the store's address is not a connection string "
        f"(postgresql://USER@HOST/DB or host=... dbname=... user=...): {why}"
    ]
    heavy = ("mcp", "trio", "pi_agent_ask.desk", "pi_agent_ask.store.schema")
    assert sorted(m for m in imported if m.startswith(heavy)) == []


@pytest.mark.parametrize(
    "argv",
    [
        ["ask", "p.json", "--session", "s.pias", "--settings", "x.json", "--output", "o.json"],
        ["ask", "--no-session"],
        ["validate", "-"],
        ["demo", "--headless"],
        ["settings", "--settings", "x.json"],
        ["desk", "--listen", "127.0.0.1:0", "--headless"],
        ["mcp", "--desk", "off", "--key", "k"],
        ["hook", "claude-code", "--key", "k"],
        ["history", "list", "--json", "--limit", "3"],
        ["history", "export", "out.md", "a:b"],
    ],
)
def test_the_parser_of_one_command_parses_as_the_whole_parser(argv: list[str]) -> None:
    from pi_agent_ask import cli

    assert cli.build_parser(argv[0]).parse_args(argv) == cli.build_parser().parse_args(argv)


FORM_LAYERS = ("form", "persistence", "actors", "ui")


def _form_layer_modules() -> list[str]:
    package = ROOT / "pi_agent_ask"
    paths = [package / "events.py"]
    for layer in FORM_LAYERS:
        paths.extend(sorted((package / layer).rglob("*.py")))
    return [
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for path in paths
    ]


@pytest.mark.parametrize("module", _form_layer_modules())
def test_the_layers_a_form_loads_make_no_attrs_repr(module: str) -> None:
    # attrs compiles each generated method as its class is made; a ``__repr__`` nobody reads at
    # run time was about a tenth of ask's first frame (docs/architecture.md, "Start-up").
    import attrs

    loaded = importlib.import_module(module)
    with_repr = [
        name
        for name, value in vars(loaded).items()
        if isinstance(value, type)
        and value.__module__ == module
        and attrs.has(value)
        and "__repr__" in vars(value)
    ]
    assert with_repr == []
