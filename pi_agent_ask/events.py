"""The in-process event bus that stands for Pi's ``pi.events``.

Subscribers are plain synchronous callables, called in subscription order for each emit. A
subscriber that raises never reaches the emitter: the exception is reported to the bus's
``on_error`` hook (the runtime logs it) and the remaining subscribers still run.

Channels used by the runtime (payloads in ``API.md``): ``pi-agent-ask:started``,
``pi-agent-ask:completed``, ``pi-agent-ask:submit``, ``pi-agent-ask:submit-result``,
``pi-agent-ask:external-ui`` and ``herdr:blocked``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

STARTED = "pi-agent-ask:started"
COMPLETED = "pi-agent-ask:completed"
SUBMIT = "pi-agent-ask:submit"
SUBMIT_RESULT = "pi-agent-ask:submit-result"
EXTERNAL_UI = "pi-agent-ask:external-ui"
HERDR_BLOCKED = "herdr:blocked"

Callback = Callable[[Any], object]


@attrs.define(eq=False, repr=False)
class EventBus:
    """Synchronous publish/subscribe by channel name."""

    on_error: Callable[[str, BaseException], None] | None = None
    _subscribers: dict[str, list[Callback]] = attrs.field(factory=dict, init=False)

    def on(self, channel: str, callback: Callback) -> Callable[[], None]:
        """Subscribe ``callback`` to ``channel``; returns a function that unsubscribes it."""
        entry = [callback]  # a fresh list cell, so the same callable can subscribe twice
        self._subscribers.setdefault(channel, []).append(entry[0])

        def unsubscribe() -> None:
            subscribers = self._subscribers.get(channel, [])
            for index, existing in enumerate(subscribers):
                if existing is entry[0]:
                    del subscribers[index]
                    break

        return unsubscribe

    def emit(self, channel: str, payload: Any) -> None:
        """Call every subscriber of ``channel`` with ``payload``, in subscription order."""
        subscribers = self._subscribers.get(channel)
        if not subscribers:
            return
        for callback in tuple(subscribers):
            try:
                callback(payload)
            except Exception as error:  # a broken listener never breaks the emitter
                if self.on_error is not None:
                    self.on_error(channel, error)

    def has_subscribers(self, channel: str) -> bool:
        """Whether an emit on ``channel`` would call anyone: an emitter whose payload costs
        something to build skips it when nobody listens."""
        return bool(self._subscribers.get(channel))
