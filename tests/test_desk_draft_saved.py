"""A draft the desk's page sends is answered "saved" (200) only once the desk has written it
to the agent's journal; a write that fails on the disk is answered 422 ``refused`` with the
reason, and the page keeps the text (the queue writes the draft again). Real desk, real
journal, the page's own requests over HTTP; the disk failure is injected at the journal
(``WriteGate``)."""

from __future__ import annotations

import errno
from pathlib import Path

import httpx2
import pytest
import trio

from pi_agent_ask.actors.queue_effects import DRAFT_NOT_SAVED_TEXT
from pi_agent_ask.desk.testing import SDK_CLIENT_WARNINGS, desk_client, open_desk
from pi_agent_ask.mcp_common.journals import journal_path

from .runtime_support import InjectedDiskError, WriteGate, branch_types, gated_journal
from .test_web import ask, signed_in

pytestmark = [pytest.mark.filterwarnings(warning) for warning in SDK_CLIENT_WARNINGS]


async def test_a_draft_is_saved_only_once_written_and_a_failed_write_says_so(
    tmp_path: Path,
) -> None:
    gate = WriteGate()
    with trio.fail_after(90), gated_journal(gate):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "alpha") as alpha:
            assert desk.web is not None
            await alpha.call_tool("ask_user", ask("Keep"))
            await desk.board.wait_for(lambda board: board.current is not None)
            shown = desk.board.current
            assert shown is not None
            journal = journal_path(tmp_path / "state", shown.key)
            base = desk.web.base_url
            async with httpx2.AsyncClient(timeout=30) as http:
                csrf = await signed_in(http, desk.web.login_url())
                headers = {"origin": base, "x-csrf-token": csrf}

                async def draft(note: str) -> httpx2.Response:
                    body = {
                        "form": f"alpha/{shown.flow_id}",
                        "drafts": [{"selected": [1], "note": note}],
                    }
                    return await http.post(base + "/api/draft", json=body, headers=headers)

                gate.fail_next("ask:draft", InjectedDiskError(errno.ENOSPC, "disk full"))
                failed = await draft("typed while the disk was full")
                assert failed.status_code == 422, failed.text
                assert failed.json() == {
                    "code": "unwritten",
                    "error": DRAFT_NOT_SAVED_TEXT.format(error="[Errno 28] disk full"),
                }
                assert gate.failed_types == ["ask:draft"]
                # Answered 200 only once the draft is on the file: it is there at once.
                written = branch_types(journal).count("ask:draft")
                saved = await draft("typed once the disk had room")
                assert saved.status_code == 200, saved.text
                assert branch_types(journal).count("ask:draft") == written + 1
