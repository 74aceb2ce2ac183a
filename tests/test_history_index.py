"""Paging through a filtered history reuses one index of the records, and a new entry refreshes
it; an unfiltered page reads only its own requests and builds none."""

from __future__ import annotations

import json
from pathlib import Path

from pi_agent_ask import open_runtime
from pi_agent_ask.actors.form import NullSurface

from .runtime_support import payload


async def test_pages_share_an_index_until_the_branch_changes(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"schemaVersion": 6, "behaviour": {"historyTools": True}}))
    async with open_runtime(settings=settings, surface=NullSurface()) as rt:
        for call in ("c1", "c2", "c3"):
            await rt.call_tool("ask_user", payload("a", background=True), call)
        unfiltered = await rt.call_tool("list_ask_history", {"limit": 2})
        assert unfiltered["details"]["total"] == 3 and unfiltered["details"]["nextOffset"] == 2
        assert rt.history_index is None
        first = await rt.call_tool("list_ask_history", {"query": "question", "limit": 2})
        index = rt.history_index
        assert first["details"]["total"] == 3 and first["details"]["nextOffset"] == 2
        # The next page reuses the index (the list calls in between changed no record).
        query = {"query": "question", "offset": 2, "limit": 2}
        second = await rt.call_tool("list_ask_history", query)
        assert second["details"]["total"] == 3 and "nextOffset" not in second["details"]
        assert rt.history_index is index
        await rt.call_tool("ask_user", payload("b", background=True), "c4")
        third = await rt.call_tool("list_ask_history", {"query": "question b"})
        assert third["details"]["total"] == 1
        assert third["details"]["records"][0]["questionId"] == "b"
        assert rt.history_index is not index
