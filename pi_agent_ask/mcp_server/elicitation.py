"""Forms shown through the MCP client's form elicitation.

The mapping (a pure core, no I/O):

- a single-select question is a string property whose ``oneOf`` lists each option as
  ``{"const": value, "title": label}`` (recommended options say so in their title);
- a multi-select question is an array property whose ``items.anyOf`` lists the options the
  same way (no ``uniqueItems``: the protocol's schema has none; a value chosen twice counts
  once);
- every question also gets ``<id>.custom`` (a string: "type your own answer") and
  ``<id>.note`` (a string: a note on the answer); nothing is required, so a question can be
  left unanswered.

Titled choices and arrays came to elicitation schemas with protocol 2025-11-25. A client that
negotiated an earlier version (2025-06-18 brought elicitation, with string, number, boolean
and string-enum fields only) gets the **plain** mapping instead (``plain=True``): a
single-select question is a string with ``enum`` (the values) and ``enumNames`` (the titles),
and each option of a multi-select question is a boolean ``<id>.<n>`` (its 1-based position)
titled with the question's label and the option's title (the first one also carries the
question's description).

What elicitation cannot carry (``docs/mcp.md``): per-option notes, images and pasted
attachments, the ``skipped`` mark, option descriptions as separate text (they go into the
property description), the form's tabs and review screen, and drafts (an elicitation is
answered whole or not at all). A single-select question answered with both an option and
custom text is refused by the form's validation; the person is asked again with the reason,
at most ``MAX_ATTEMPTS`` times in all.

``ElicitationSurface`` is a runtime ``Surface``: each shown form becomes one elicitation
request; the answer goes into the form's inbox as a remote response. ``accept`` answers,
``decline`` and ``cancel`` dismiss the form (a cancellation, never an invented answer). A
client that answers the elicitation with an error is a client failure, not a person's
decision: the form stays pending and ``on_failure`` is told why (the server then keeps its
forms for a desk); so is an answer the form refused ``MAX_ATTEMPTS`` times (a client that keeps
sending what the form cannot take is no better at showing it, and nobody cancelled anything).
With ``--desk off`` (``end_unusable``) nothing else would ever show that form: it ends with an
error outcome saying it was not asked (:func:`not_asked`), the agent asks the questions itself;
so does every form shown after it (the questions queued behind it), at once, so none waits for
ever (``router.py`` hands their outcomes to the agent before it turns to text).
A connection that closed leaves the form pending too (the next start shows it).
``finish`` stops showing forms and waits for the elicitations open then, and for the runtime to
record what the person decided there (``recorded``): a server moving to a desk never drops the
person's answer in the client.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import mcp.types as types
import trio
from mcp.shared.exceptions import MCPError

from pi_agent_ask.actors.form import Ended, FormInput, RemoteResponse, SurfaceFailed
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.types import AskParams

CUSTOM_SUFFIX = ".custom"
NOTE_SUFFIX = ".note"
MAX_ATTEMPTS = 3
"""Elicitations per form before an answer the form keeps refusing counts as the client's
failure (the form stays pending, ``on_failure`` says why)."""

TITLED_CHOICES_SINCE = "2025-11-25"
"""The protocol version that brought titled choices and multi-select arrays to elicitation."""

Elicit = Callable[[str, dict[str, Any]], Awaitable[types.ElicitResult]]


def plain_for(protocol_version: str) -> bool:
    """Whether a client on ``protocol_version`` gets the plain mapping (module docstring);
    versions are dates, so they compare as text."""
    return protocol_version < TITLED_CHOICES_SINCE


def log_failure(why: str) -> None:
    print(f"pi-agent-ask: the client's form could not be used: {why}", file=sys.stderr)


def request_failed(message: str) -> str:
    """Why a form stays pending when the client answered its elicitation with an error."""
    return f"its elicitation request failed: {message}"


def refused_too_often(problem: str) -> str:
    """Why a form stays pending when the form refused the client's answer every time."""
    return (
        f"the answer given in it was refused {MAX_ATTEMPTS} times, the last time because: "
        f"{problem.rstrip('.')}"
    )


def _option_title(option: Any) -> str:
    return f"{option.label} (recommended)" if option.recommended else option.label


def _describe(question: Any) -> str:
    parts = [question.prompt]
    described = [f"{o.label}: {o.description}" for o in question.options if o.description]
    if described:
        parts.append("; ".join(described))
    if question.context:
        parts.append(question.context)
    return "\n".join(parts)


def elicitation_schema(
    params: AskParams, presented: tuple[str, ...], *, plain: bool = False
) -> dict[str, Any]:
    """The ``requestedSchema`` of one form (``presented``: each question's presented type;
    ``plain``: the mapping for a client before titled choices, module docstring)."""
    properties: dict[str, Any] = {}
    for question, kind in zip(params.questions, presented, strict=True):
        choices = [{"const": o.value, "title": _option_title(o)} for o in question.options]
        if plain and kind == "multi":
            for number, option in enumerate(question.options, start=1):
                properties[f"{question.id}.{number}"] = {
                    "type": "boolean",
                    "title": f"{question.label}: {_option_title(option)}",
                }
            # The question itself, said once, on its first option.
            properties[f"{question.id}.1"]["description"] = _describe(question)
        elif plain:
            properties[question.id] = {
                "type": "string",
                "title": question.label,
                "description": _describe(question),
                "enum": [o.value for o in question.options],
                "enumNames": [_option_title(o) for o in question.options],
            }
        elif kind == "multi":
            properties[question.id] = {
                "type": "array",
                "title": question.label,
                "description": _describe(question),
                "items": {"anyOf": choices},
            }
        else:
            properties[question.id] = {
                "type": "string",
                "title": question.label,
                "description": _describe(question),
                "oneOf": choices,
            }
        properties[question.id + CUSTOM_SUFFIX] = {
            "type": "string",
            "title": f"{question.label}: type your own answer",
            "description": "Optional; instead of (or, for several answers, besides) a choice.",
        }
        properties[question.id + NOTE_SUFFIX] = {
            "type": "string",
            "title": f"{question.label}: note",
            "description": "Optional note on your answer.",
        }
    return {"type": "object", "properties": properties}


UNUSABLE_KEPT = (
    "the question stays unanswered here and waits for the pi-agent-ask desk "
    "(`pi-agent-ask desk` in a terminal)"
)
"""What becomes of a question the client's form could not be used for, in the person's words,
when the server keeps forms for a desk then (``--desk auto``)."""
UNUSABLE_TO_AGENT = (
    "the question stays unanswered here and the agent is told to ask it in the conversation instead"
)
"""The same with ``--desk off``, where nothing else shows forms (``router.py``)."""


def not_asked(why: str) -> str:
    """The error outcome of a form the client could not show with ``--desk off``
    (``ElicitationSurface.end_unusable``): recorded in the journal, and what the agent hears
    of that request (``Question form failed: ...``)."""
    return (
        f"The MCP client's question form could not be used ({why}), and with --desk off "
        "nothing else shows forms, so this question was not asked: ask the user yourself if "
        "it is still needed."
    )


def elicitation_message(
    params: AskParams, problem: str | None = None, last_try: str | None = None
) -> str:
    """The form's message: the questions, after why the last answer could not be used; on
    the last try (``last_try``: what becomes of the question if this answer cannot be used
    either) the person is told before it happens, since nothing is shown in the client
    after it."""
    lines = []
    if problem:
        lines.append(f"That answer could not be used: {problem} Please answer again.")
    if problem and last_try:
        lines.append(f"This is the last try: if this answer cannot be used either, {last_try}.")
    if params.title:
        lines.append(params.title)
    for number, question in enumerate(params.questions, start=1):
        lines.append(f"{number}. {question.label}: {question.prompt}")
    return "\n".join(lines)


def response_from_elicitation(
    params: AskParams,
    presented: tuple[str, ...],
    result: types.ElicitResult,
    *,
    plain: bool = False,
) -> dict[str, Any]:
    """The remote response (``submit`` event shape) of an elicitation result (``plain``: of
    the schema :func:`elicitation_schema` made with it).

    Values of the wrong type are passed on as they are: the form's own validation refuses them
    (``answers_from_remote``), exactly as for any remote answer."""
    if result.action != "accept":
        return {"kind": "cancel"}
    content: Mapping[str, Any] = result.content or {}
    answers: dict[str, Any] = {}
    for question, kind in zip(params.questions, presented, strict=True):
        entry: dict[str, Any] = {}
        chosen = content.get(question.id)
        if plain and kind == "multi":
            ticked = [
                content.get(f"{question.id}.{n}") for n in range(1, len(question.options) + 1)
            ]
            chosen = [
                o.value for o, tick in zip(question.options, ticked, strict=True) if tick is True
            ]
        if chosen not in (None, "", []):
            entry["values"] = _once(chosen) if kind == "multi" else [chosen]
        custom = content.get(question.id + CUSTOM_SUFFIX)
        if custom not in (None, ""):
            entry["customText"] = custom
        note = content.get(question.id + NOTE_SUFFIX)
        if note not in (None, ""):
            entry["note"] = note
        if entry:
            answers[question.id] = entry
    return {"kind": "answer", "answers": answers}


def _once(values: Any) -> Any:
    """A multi-select's values with repeats dropped, first one kept: the protocol's schema
    cannot say ``uniqueItems``, and a value picked twice is the same choice, never a reason
    to ask the person again. Anything but a list of strings goes on as it is, for the form's
    validation to refuse."""
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        return values
    return list(dict.fromkeys(values))


@attrs.define(eq=False)
class ElicitationSurface:
    """A runtime ``Surface`` that shows each form as one form elicitation on the client.

    ``serve(elicit)`` makes it live (the server starts it once the client's session is known;
    forms shown before that wait for it) and runs the elicitations until :meth:`finish`.
    """

    on_failure: Callable[[str], None] = log_failure
    """Called, with why in words (``request_failed``, ``refused_too_often``), when the client
    answers an elicitation with an error (its handler failed, it refused form mode) or the
    form refused its answer ``MAX_ATTEMPTS`` times: that is the client's failure, not a
    person's decision, so the form is neither cancelled nor answered: it stays pending, and
    the server decides where forms go now (``router.py``: kept for a desk)."""
    if_unusable: str = UNUSABLE_KEPT
    """What becomes of a question whose answer the form refused every time, said to the
    person on the last try (``elicitation_message``): only the agent and standard error hear
    of it after that."""
    end_unusable: bool = False
    """Nothing else will ever show a form this client could not (``--desk off``): that form
    ends with an error outcome (:func:`not_asked`) before ``on_failure`` is called, so the
    journal says the question went back to the agent, and no later server shows it again or
    keeps it waiting. Every form shown on this surface after it ends the same way at once,
    never sent to the client: the questions queued behind it go back to the agent too."""
    _elicit: Elicit | None = None
    _plain: bool = False
    """The client gets the plain mapping (``serve``)."""
    _nursery: trio.Nursery | None = None
    _open: set[str] = attrs.field(factory=set)
    """The forms whose elicitation is open now."""
    _decided: set[str] = attrs.field(factory=set)
    """Forms the person answered or dismissed in the client since :meth:`finish` began whose
    outcome the runtime has not recorded yet."""
    _recorded: set[str] = attrs.field(factory=set)
    """Forms whose outcome was recorded since :meth:`finish` began."""
    unrecorded: int = 0
    """Forms the person answered or dismissed in the client since :meth:`finish` began whose
    record failed (the journal's write): each is pending again, for whatever shows forms next,
    and the client must be told that the decision made there was not kept."""
    _stop: trio.Event = attrs.field(factory=trio.Event)
    _served: trio.Event | None = None
    """Set when :meth:`serve` has returned (``None``: it never started)."""
    _settled: trio.Event = attrs.field(factory=trio.Event)
    """Set once finishing, served, and no decided form awaits its record."""
    _scopes: dict[str, trio.CancelScope] = attrs.field(factory=dict)
    _early: list[tuple[str, fs.FormState, trio.MemorySendChannel[FormInput]]] = attrs.field(
        factory=list
    )
    _not_asked: str | None = None
    """The error outcome of every form shown from now on (``end_unusable``, once one failed)."""

    @property
    def showing(self) -> int:
        """How many forms the client shows now (their elicitations are open)."""
        return len(self._open)

    async def serve(
        self,
        elicit: Elicit,
        protocol_version: str = TITLED_CHOICES_SINCE,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Show the forms through ``elicit`` (to a client of ``protocol_version``) until
        :meth:`finish`; then wait for every form the client shows still to end (answered,
        dismissed, or the client gone), so an answer the person gives there is never
        dropped."""
        self._plain = plain_for(protocol_version)
        served = self._served = trio.Event()
        try:
            async with trio.open_nursery() as nursery:
                if not self._stop.is_set():
                    self._elicit = elicit
                    self._nursery = nursery
                    for flow_id, state, commands in self._early:
                        if flow_id in self._scopes:
                            nursery.start_soon(
                                self._run, flow_id, state, commands, self._scopes[flow_id]
                            )
                        else:
                            commands.close()
                    self._early = []
                task_status.started()
                await self._stop.wait()
                self._nursery = None  # no new elicitation; the block waits for the open ones
        finally:
            served.set()

    async def finish(self) -> None:
        """Show no more forms (they stay pending, for whatever shows forms next), and return
        once every elicitation open now has ended and each outcome the person gave there is
        recorded (:meth:`recorded`), or the form is pending again (its record failed)."""
        self._stop.set()
        for _flow_id, _state, commands in self._early:
            commands.close()
        self._early = []
        if self._served is not None:
            await self._served.wait()
        self._check_settled()
        await self._settled.wait()

    def recorded(self, flow_id: str) -> None:
        """The runtime recorded the outcome of form ``flow_id`` (its ``completed`` event)."""
        if self._stop.is_set():
            self._recorded.add(flow_id)
            self._decided.discard(flow_id)
            self._check_settled()

    def _check_settled(self) -> None:
        if (self._served is None or self._served.is_set()) and not self._decided:
            self._settled.set()

    def show(
        self, flow_id: str, state: fs.FormState, commands: trio.MemorySendChannel[FormInput]
    ) -> None:
        if self._not_asked is not None:
            # The form inbox has room (it buffers what synchronous senders give it); a form
            # that ended meanwhile needs nothing.
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                commands.send_nowait(SurfaceFailed(self._not_asked))
            return
        if self._stop.is_set():
            # This surface shows no more forms: the form stays pending. One decided here and
            # shown again was not recorded (its write failed): nothing more to wait for.
            if flow_id in self._decided:
                self._decided.discard(flow_id)
                self.unrecorded += 1
            self._check_settled()
            return
        scope = self._scopes[flow_id] = trio.CancelScope()
        if self._nursery is None:
            self._early.append((flow_id, state, commands.clone()))
            return
        self._nursery.start_soon(self._run, flow_id, state, commands.clone(), scope)

    def update(self, flow_id: str, state: fs.FormState) -> None:
        pass

    def hide(self, flow_id: str, ended: Ended | None = None) -> None:
        scope = self._scopes.pop(flow_id, None)
        if scope is not None:
            scope.cancel()

    async def _run(
        self,
        flow_id: str,
        state: fs.FormState,
        commands: trio.MemorySendChannel[FormInput],
        scope: trio.CancelScope,
    ) -> None:
        self._open.add(flow_id)
        failure: str | None = None
        try:
            with scope, commands:
                failure = await self._ask(flow_id, state, commands)
                if failure is not None and self.end_unusable:
                    self._stop.set()  # no other form goes to a client that failed one
                    self._not_asked = not_asked(failure)  # each one shown ends as this one
                    await commands.send(SurfaceFailed(self._not_asked))
                    # The form ends with that error outcome and hides itself, which cancels
                    # this scope: the outcome is the form's own, written under the form
                    # runner's shield, before the side that ``on_failure`` leaves closes.
                    await trio.sleep_forever()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the form ended meanwhile (answered elsewhere, or the runtime closing)
        finally:
            self._open.discard(flow_id)
        if failure is not None:
            self.on_failure(failure)

    def _took(self, flow_id: str) -> None:
        """The form took the person's final response from the client (its reply said so): the
        form ends with it, and hiding the form cancels the task that gave it, so this is
        called before that task checkpoints again."""
        if self._stop.is_set() and flow_id not in self._recorded:
            self._decided.add(flow_id)

    async def _ask(
        self, flow_id: str, state: fs.FormState, commands: trio.MemorySendChannel[FormInput]
    ) -> str | None:
        """One form's elicitations until it is answered, dismissed, or cannot be shown:
        then why in words (the client's failure, ``on_failure``'s reason), else ``None``."""
        assert self._elicit is not None
        presented = tuple(state.types)
        problem: str | None = None
        for attempt in range(1, MAX_ATTEMPTS + 1):
            schema = elicitation_schema(state.params, presented, plain=self._plain)
            last_try = self.if_unusable if attempt == MAX_ATTEMPTS else None
            message = elicitation_message(state.params, problem, last_try)
            try:
                result = await self._elicit(message, schema)
            except (trio.BrokenResourceError, trio.ClosedResourceError, EOFError):
                return None  # the client is gone: the form stays pending for the next start
            except MCPError as error:
                if error.error.code == types.CONNECTION_CLOSED:
                    return None  # gone too
                # No person decided anything: the form is neither answered nor cancelled.
                return request_failed(error.error.message or str(error))
            except Exception as error:  # a malformed reply: the client cannot ask here
                return request_failed(f"{type(error).__name__}: {error}")
            response = response_from_elicitation(state.params, presented, result, plain=self._plain)
            problem = await self._respond(flow_id, commands, response)
            if problem is None:
                return None
        # The answers kept failing the form's checks: never guess, and never call that the
        # person's cancellation, as for a failed elicitation.
        assert problem is not None
        return refused_too_often(problem)

    async def _respond(
        self,
        flow_id: str,
        commands: trio.MemorySendChannel[FormInput],
        response: dict[str, object],
    ) -> str | None:
        """Give the form a response from the client; the reason it refused it, else ``None``
        (taken, or the form ended meanwhile)."""
        replies, reply = trio.open_memory_channel[tuple[str, str] | None](1)
        try:
            await commands.send(RemoteResponse(response, replies))
            async with reply:
                try:
                    answer = await reply.receive()
                except trio.Cancelled:
                    # The form may have taken the response and ended before this task read
                    # its reply (hiding the form cancels this task): that reply still counts.
                    with contextlib.suppress(trio.WouldBlock, trio.EndOfChannel):
                        if reply.receive_nowait() is None:
                            self._took(flow_id)
                    raise
                if answer is None:
                    self._took(flow_id)
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.EndOfChannel):
            return None  # the form ended meanwhile
        return None if answer is None else answer[1]
