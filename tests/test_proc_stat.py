"""``/proc/PID/stat`` read once (``pi_agent_ask/proc_stat.py``) for the hook's parent chain and
the test clusters' owner check, on real processes, one of them with a command name that holds
spaces and parentheses (the fields are counted from the name's last ``)``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pi_agent_ask.mcp_server.hook_socket import ancestors
from pi_agent_ask.store.testing import process_start

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


@pytest.fixture
def odd_child(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A child whose command name is ``x) 1 2 (y``: a naive split would read its state as ``1``
    and its parent as ``2``."""
    sleep = shutil.which("sleep")
    assert sleep is not None
    odd = tmp_path / "x) 1 2 (y"
    shutil.copy(sleep, odd)
    child = subprocess.Popen([str(odd), "30"])
    try:
        yield child
    finally:
        child.kill()
        child.wait()


def test_the_parent_chain_starts_at_the_parent() -> None:
    chain = ancestors()
    assert chain[0] == os.getppid()
    assert 1 not in chain and os.getpid() not in chain


def test_an_odd_command_name_is_read_past(odd_child: subprocess.Popen[bytes]) -> None:
    assert Path(f"/proc/{odd_child.pid}/stat").read_text().count(")") == 2
    assert ancestors(odd_child.pid)[:2] == [os.getpid(), os.getppid()]
    start = process_start(odd_child.pid)
    assert start.isdigit() and int(start) >= int(process_start(os.getpid()))


def test_a_process_that_exited_has_no_start(odd_child: subprocess.Popen[bytes]) -> None:
    odd_child.kill()
    odd_child.wait()
    with pytest.raises(ProcessLookupError):
        process_start(odd_child.pid)


def test_a_zombie_has_no_start() -> None:
    """Exited but not yet reaped by its parent (us): gone for the owner check."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, left unreaped
    try:
        with pytest.raises(ProcessLookupError):
            process_start(child.pid)
    finally:
        child.wait()
