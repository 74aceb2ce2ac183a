"""The event bus: subscribers in subscription order, each emit to the subscribers of its
moment, broken listeners reported and skipped."""

from __future__ import annotations

from typing import Any

from pi_agent_ask import events as ev


def test_subscribers_are_called_in_order_and_unsubscribe_one_at_a_time() -> None:
    bus = ev.EventBus()
    calls: list[tuple[str, Any]] = []

    def first(payload: Any) -> None:
        calls.append(("first", payload))

    def second(payload: Any) -> None:
        calls.append(("second", payload))

    assert not bus.has_subscribers("c")
    bus.emit("c", 0)  # nobody listens
    off_first = bus.on("c", first)
    bus.on("c", second)
    off_again = bus.on("c", first)  # the same callable twice: called twice
    bus.on("other", second)
    bus.emit("c", 1)
    assert calls == [("first", 1), ("second", 1), ("first", 1)]
    calls.clear()
    off_again()  # removes one subscription of ``first`` (its first), not both
    bus.emit("c", 2)
    assert calls == [("second", 2), ("first", 2)]
    calls.clear()
    off_first()
    off_first()  # nothing left to remove: nothing happens
    bus.emit("c", 3)
    assert calls == [("second", 3)]
    assert bus.has_subscribers("c") and bus.has_subscribers("other")


def test_an_emit_reaches_the_subscribers_of_its_moment() -> None:
    bus = ev.EventBus()
    calls: list[str] = []
    offs: dict[str, Any] = {}

    def late(_payload: Any) -> None:
        calls.append("late")

    def changer(_payload: Any) -> None:
        calls.append("changer")
        offs["next"]()  # unsubscribes the one after it, during this emit
        bus.on("c", late)  # subscribes one more, during this emit

    def after(_payload: Any) -> None:
        calls.append("after")

    bus.on("c", changer)
    offs["next"] = bus.on("c", after)
    bus.emit("c", None)
    assert calls == ["changer", "after"]  # this emit: the subscribers when it began
    calls.clear()
    bus.emit("c", None)
    assert calls == ["changer", "late"]  # ("changer" unsubscribed nothing more this time)


def test_a_broken_listener_is_reported_and_the_others_still_run() -> None:
    errors: list[tuple[str, str]] = []
    bus = ev.EventBus(on_error=lambda channel, error: errors.append((channel, str(error))))
    calls: list[Any] = []

    def broken(_payload: Any) -> None:
        raise ValueError("broken")

    bus.on("c", broken)
    bus.on("c", calls.append)
    bus.emit("c", 1)
    assert calls == [1] and errors == [("c", "broken")]
    quiet = ev.EventBus()  # no hook: the error goes nowhere
    quiet.on("c", broken)
    quiet.on("c", calls.append)
    quiet.emit("c", 2)
    assert calls == [1, 2]
