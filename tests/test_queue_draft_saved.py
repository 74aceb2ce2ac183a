"""A draft whose sender waits to hear it is on disk (``DraftChanged.saved``: the desk's page),
through the queue's reducer as the shell drives it: written at once (not after the draft
delay) and answered after the write; a write that failed is answered with the reason (the
draft stays dirty and is written again); a draft no longer taken is answered by closing."""

from __future__ import annotations

import errno

from pi_agent_ask.actors import queue_state as qs

from .runtime_support import Box
from .test_mutants_queue import _FORM, _enqueue, _reduce


def test_a_waited_for_draft_is_written_at_once_and_answered_after_the_write() -> None:
    box = Box()
    state = _enqueue(qs.initial_state(surface_ready=False), "r1")
    message = qs.DraftChanged("r1", state.epoch, _FORM, box)
    candidate, effects = qs.reduce(state, message)
    # The write follows at once (no draft delay), and the sender waits for it.
    assert effects == [qs.Continue(qs.SaveDrafts())]
    assert candidate.draft_waiters == (box,)
    state, done = _reduce(state, message)
    write = next(effect for effect in done if isinstance(effect, qs.Append))
    assert [entry_type for entry_type, _data in write.entries] == ["ask:draft"]
    # Answered after the write: the shell performs a transition's effects after its write.
    assert done[done.index(write) + 1 :] == [qs.Reply(box, None), qs.CloseReply(box)]
    assert box.values == [None] and box.closed
    assert state.draft_waiters == () and state.dirty == frozenset()


def test_a_waited_for_draft_whose_write_failed_hears_why_and_stays_dirty() -> None:
    box = Box()
    state = _enqueue(qs.initial_state(surface_ready=False), "r1")
    state, _ = qs.reduce(state, qs.DraftChanged("r1", state.epoch, _FORM, box))
    state = state.commit()  # the shell commits the change; its SaveDrafts write fails
    error = OSError(errno.ENOSPC, "disk full")
    state, effects = _reduce(state, qs.Unrecorded(qs.SaveDrafts(), error))
    text = qs.DRAFT_NOT_SAVED_TEXT.format(error=error)
    assert effects[:2] == [qs.Reply(box, text), qs.CloseReply(box)]
    assert qs.ScheduleDraftRetry(qs.DRAFT_RETRY_FIRST) in effects
    assert box.values == [text] and box.closed
    assert state.draft_waiters == () and state.dirty == frozenset({"r1"})


def test_a_draft_of_a_form_no_longer_pending_is_answered_by_closing() -> None:
    box = Box()
    state = _enqueue(qs.initial_state(surface_ready=False), "r1")
    state, effects = _reduce(state, qs.DraftChanged("r1", state.epoch - 1, _FORM, box))
    assert effects == [qs.CloseReply(box)] and box.closed and box.values == []
    assert state.draft_waiters == ()
