"""Where keys go, seen on the screen: the panel's rule, the editor prompt and the status line.

The host shell with the real runtime and a LocalHost; keys through a pipe input, the screen
through pyte.
"""

from __future__ import annotations

from pathlib import Path

import trio

from pi_agent_ask.host.demo import REGION
from pi_agent_ask.host.local import LocalHost
from pi_agent_ask.ui.panel import PANEL_FOCUSED_LABEL, PANEL_UNFOCUSED_LABEL
from tests.test_shell import ALT_Q, REGION_PROMPT, demo, shell, status_row


def editor_prompt_style(term: object) -> tuple[str, bool]:
    rows = term.rows()  # type: ignore[attr-defined]
    row = max(i for i, text in enumerate(rows) if text.startswith("> "))
    char = term.style_at(row, 0)  # type: ignore[attr-defined]
    return char.fg, char.bold


async def test_focus_is_shown_by_the_rule_the_prompt_and_the_status_line(tmp_path: Path) -> None:
    async with demo(tmp_path) as sh:
        await sh.wait(REGION_PROMPT)
        await sh.wait(PANEL_FOCUSED_LABEL.strip())
        rule_row = sh.row_of(PANEL_FOCUSED_LABEL.strip())
        assert sh.term.rows()[rule_row].startswith("━━")
        assert "keys: questions" in status_row(sh.term)
        assert editor_prompt_style(sh.term) == ("brightblack", False)

        sh.send(ALT_Q)
        await sh.wait(PANEL_UNFOCUSED_LABEL.strip())
        assert sh.term.rows()[sh.row_of(PANEL_UNFOCUSED_LABEL.strip())].startswith("──")
        assert "keys: editor" in status_row(sh.term)
        assert editor_prompt_style(sh.term) == ("cyan", True)

        # Text typed now goes to the editor, not to the questions.
        sh.send("2")
        await sh.wait(lambda term: any(row.startswith("> 2") for row in term.rows()))
        assert "2. ( ) " in sh.term.text()  # nothing selected on the form

        sh.send(ALT_Q)
        await sh.wait(PANEL_FOCUSED_LABEL.strip())
        await sh.wait(lambda term: "keys: questions" in status_row(term))
        with trio.fail_after(5):
            await sh.wait(lambda term: editor_prompt_style(term) == ("brightblack", False))


async def test_an_80_column_status_line_still_says_where_the_keys_go(tmp_path: Path) -> None:
    """The agent's activity and the focus note do not both fit beside ``Questions pending``
    at 80 columns: the activity gives way, the focus note stays at the right end."""
    async with shell(tmp_path, columns=80) as sh, trio.open_nursery() as nursery:

        async def body(h: LocalHost) -> None:
            await h.call("ask_user", REGION)
            await h.call("wait_for_answers", {})

        nursery.start_soon(sh.local.turn, body)
        await sh.wait(REGION_PROMPT)
        await sh.wait(lambda term: "keys: questions · Alt+Q: editor ─" in status_row(term))
        assert status_row(sh.term).startswith("─ Questions pending: 1 ─")
        sh.send(ALT_Q)
        await sh.wait(lambda term: "keys: editor · Alt+Q: questions ─" in status_row(term))
        sh.host.view.set_notice("Questions deferred; /ask-queue shows them again.")
        await sh.wait(lambda term: "/ask-queue shows them again." in status_row(term))
        nursery.cancel_scope.cancel()


async def test_a_form_shown_while_the_person_writes_leaves_the_keys_in_the_editor(
    tmp_path: Path,
) -> None:
    """A question arrives while the person writes to the agent: the keys stay in the editor,
    so the rest of the message does not run form commands (``n`` opened a note and the words
    after it went there); the rule says ``Alt+Q to answer``, and ``Alt+Q`` gives the keys to
    the form. A form that arrives while the editor is empty takes them, as before."""
    async with shell(tmp_path) as sh, trio.open_nursery() as nursery:
        sh.send("please hold the rollout")
        await sh.wait("> please hold the rollout")

        async def body(h: LocalHost) -> None:
            await h.call("ask_user", REGION)

        nursery.start_soon(sh.local.turn, body)
        await sh.wait(REGION_PROMPT)
        await sh.wait(PANEL_UNFOCUSED_LABEL.strip())
        assert "keys: editor" in status_row(sh.term)
        sh.send(" now")
        await sh.wait("> please hold the rollout now")
        assert "Note:" not in sh.term.text()
        sh.send(ALT_Q)
        await sh.wait(PANEL_FOCUSED_LABEL.strip())
        sh.send("n")
        await sh.wait("Note:")
        assert "> please hold the rollout now" in sh.term.text()
        nursery.cancel_scope.cancel()


async def test_a_letter_for_no_form_key_says_alt_q_reaches_the_agent(tmp_path: Path) -> None:
    """With the keys in the panel, a letter that is no form key says where typed text goes:
    the form's editors, or, with ``Alt+Q``, a message to the agent."""
    async with demo(tmp_path) as sh:
        await sh.wait(REGION_PROMPT)
        await sh.wait(PANEL_FOCUSED_LABEL.strip())
        sh.send("h")
        await sh.wait("Alt+Q: a message to the agent.")
        assert "Typed text goes into an editor" in sh.term.text()
