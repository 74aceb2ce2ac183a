"""``call_tool``: the boundary check of a call, its journaling, and the dispatch to a tool.

Every call ends as a result or a tool error (``isError: true``): arguments that are not
bounded, valid JSON text (``form/untrusted.py``) are refused before anything is journaled; a
refused write, a disk failure or a bad path is a tool error. Only cancellation and bugs
propagate (``docs/errors.md``). A journaled call always gets a journaled result (or, for
``wait_for_answers``, writes its own first: that entry is its delivery mark).
"""

from __future__ import annotations

import json
from contextlib import suppress
from typing import Any

import trio

from pi_agent_ask.actors.ask import ask_user
from pi_agent_ask.actors.config import tool_names
from pi_agent_ask.actors.core import TEARDOWN_TIMEOUT, PendingCall, RuntimeCore, tool_error
from pi_agent_ask.actors.errors import ToolError
from pi_agent_ask.actors.outcomes import FORM_INTERRUPTED_TEXT
from pi_agent_ask.actors.persistence import PersistenceClosedError, WriteRefused
from pi_agent_ask.actors.records import StaleBranch
from pi_agent_ask.form import untrusted
from pi_agent_ask.form.text import WAIT_INTERRUPTED_TEXT
from pi_agent_ask.form.types import Validation
from pi_agent_ask.form.validate import validate_checked_params
from pi_agent_ask.persistence import journal as jr

CALL_INTERRUPTED_TEXT = "Tool call interrupted: the session changed."
INTERRUPTED_TEXTS = {"ask_user": FORM_INTERRUPTED_TEXT, "wait_for_answers": WAIT_INTERRUPTED_TEXT}

CALL_FAILURES: tuple[type[Exception], ...] = (
    WriteRefused,
    PersistenceClosedError,
    OSError,
    ValueError,
    RecursionError,
)
"""What a tool call turns into a tool error besides ``ToolError``: a write the journal refused
(an entry too large or not storable), the runtime closing, the disk or a path failing (``OSError``;
``ValueError`` for a NUL byte in a path), and deep recursion in a library. Everything else
(``trio.Cancelled``, ``KeyboardInterrupt``, and exceptions that mean a bug here, such as
``TypeError``, ``AttributeError``, ``KeyError``, ``AssertionError``) propagates."""


def _refusal_text(name: object, refusal: untrusted.Refusal | None) -> str:
    shown = name if isinstance(name, str) and untrusted.check(name) is None else "?"
    if refusal is None:
        refusal = untrusted.Refusal("name", "must be a string")
    path = refusal.path
    if path.startswith("arguments"):
        path = path.removeprefix("arguments").removeprefix(".") or "root"
    return f"Validation failed for tool {json.dumps(shown)}:\n  - {path}: {refusal.message}"


def _failure_text(name: str, error: Exception) -> str:
    match error:
        case WriteRefused():
            text = f"{name} failed: the session file refused the entry: {error}"
        case PersistenceClosedError():
            text = f"{name} failed: the runtime is closing ({error})"
        case _:
            text = f"{name} failed: {str(error) or type(error).__name__}"
    return untrusted.scrub_text(text)  # the text is journaled: it must be storable itself


async def call_tool(
    rt: RuntimeCore,
    name: str,
    arguments: Any,
    tool_call_id: str | None = None,
    parent_tool_call_id: str | None = None,
) -> dict[str, Any]:
    """Run one tool call and return its result dict (``Runtime.call_tool``)."""
    return await _call(rt, name, arguments, tool_call_id, parent_tool_call_id)


async def _call(
    rt: RuntimeCore,
    name: str,
    arguments: Any,
    tool_call_id: str | None,
    parent_tool_call_id: str | None,
) -> dict[str, Any]:
    refusal = _fields_refusal(name, tool_call_id, parent_tool_call_id)
    validation: Validation | None = None
    if refusal is None:
        if name == "ask_user":
            # Arguments of the current shape are validated in the walk that checks the
            # boundary (one walk, not two); the rest are checked below, then validated.
            validation = validate_checked_params(
                arguments,
                present_single_as_multi=rt.config.present_single_as_multi,
                background_only=rt.config.background_only,
            )
        if validation is None:
            # The arguments on their own: the bounds are the same as for ``validate``.
            inner = untrusted.check(arguments)
            refusal = inner.within("arguments") if inner is not None else None
    if refusal is not None or not isinstance(name, str):
        # Nothing of the call can be stored: refused whole, and not journaled. Still a
        # schedule point, as every other call is (each writes to the journal): an agent
        # calling in a loop must not starve the UI and the actors of its loop.
        await trio.sleep(0)  # noqa: ASYNC115 (a pass through the scheduler)
        return tool_error(_refusal_text(name, refusal))
    try:
        return await _call_tool(rt, name, arguments, tool_call_id, parent_tool_call_id, validation)
    except CALL_FAILURES as error:
        return tool_error(_failure_text(name, error))


def _fields_refusal(
    name: object, tool_call_id: object, parent_tool_call_id: object
) -> untrusted.Refusal | None:
    """``untrusted.check`` of the call's own fields (name and ids), which are plain text (or
    ``None``) in every call an honest client makes: those pass without the walk."""
    if untrusted.passes_flat((name, tool_call_id, parent_tool_call_id), _FIELD_KEY_CHARS):
        return None
    return untrusted.check(
        {"name": name, "toolCallId": tool_call_id, "parentToolCallId": parent_tool_call_id}
    )


_FIELD_KEY_CHARS = len("name") + len("toolCallId") + len("parentToolCallId")


async def _call_tool(
    rt: RuntimeCore,
    name: str,
    arguments: Any,
    tool_call_id: str | None,
    parent_tool_call_id: str | None,
    validation: Validation | None = None,
) -> dict[str, Any]:
    call: dict[str, Any] = {"toolCallId": tool_call_id, "name": name, "arguments": arguments}
    if parent_tool_call_id is not None:
        call["parentToolCallId"] = parent_tool_call_id
    writer = rt._writer
    pending = PendingCall((jr.TOOL_CALL, call))
    result: dict[str, Any] | None = None
    recorded = False
    try:
        if name != "ask_user":
            try:
                await writer.append(jr.TOOL_CALL, call)
            except WriteRefused:
                recorded = True  # the call is not on the branch: no result goes after it
                raise
            pending.written = True
        # ``ask_user`` writes the call entry in one chain with its request's entries; when
        # it returns before that (an invalid call), the call goes with its result below.
        try:
            # ``ask_user`` is in every configuration's tools.
            if name != "ask_user" and name not in tool_names(rt.config):
                result = tool_error(f"Tool {name!r} is not available.")
            elif name == "ask_user":
                result = await ask_user(
                    rt, writer, arguments, tool_call_id, parent_tool_call_id, pending, validation
                )
                recorded = pending.result_written
            elif name == "wait_for_answers":
                from pi_agent_ask.actors.wait import wait_for_answers  # not needed before
                from pi_agent_ask.form.schema_check import schema_refusal

                refused = schema_refusal(name, arguments)
                if refused is not None:
                    raise ToolError(refused)
                # The wait writes its own result first: that entry is its delivery mark.
                result = await wait_for_answers(rt, writer, tool_call_id)
                recorded = True
            else:
                from pi_agent_ask.persistence import history

                try:
                    result = await history.call_history_tool(rt, writer, name, arguments)
                except history.HistoryError as error:
                    raise ToolError(str(error)) from None
        except ToolError as error:
            result = tool_error(str(error))
        except CALL_FAILURES as error:
            # After the call was journaled (or with it, below): its result is journaled too.
            result = tool_error(_failure_text(name, error))
    except StaleBranch:
        # The session changed under the call: its branch is gone for it, and it says so.
        result = tool_error(INTERRUPTED_TEXTS.get(name, CALL_INTERRUPTED_TEXT))
        recorded = True
    finally:
        # An aborted call is recorded as aborted, so recovery does not mistake it for an
        # interrupted one; a crash leaves no result, and recovery reopens the form. A call
        # entry not written yet goes first in the same chain.
        if not recorded:
            entry = result if result is not None else tool_error("Tool call aborted")
            with (
                trio.CancelScope(shield=True),
                trio.move_on_after(TEARDOWN_TIMEOUT),
                suppress(StaleBranch, PersistenceClosedError, WriteRefused, OSError),
            ):
                await writer.append_many(
                    [
                        *pending.unwritten(),
                        (jr.TOOL_RESULT, jr.tool_result_entry(tool_call_id, name, entry)),
                    ]
                )
    return result
