"""``Fieldless`` records compare, hash, match and refuse changes as the attrs records they
replace did (``form/fieldless.py``)."""

from __future__ import annotations

import pytest

from pi_agent_ask.actors import notifications as nt
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.fieldless import Fieldless


def test_a_fieldless_record_equals_every_instance_of_its_class_and_nothing_else() -> None:
    assert fs.NextTab() == fs.NextTab()
    assert fs.NextTab() != fs.PreviousTab()
    assert fs.NextTab() != object()
    assert fs.DeferRequested() in (fs.DraftChanged(), fs.DeferRequested())
    assert fs.DeferRequested() not in (fs.DraftChanged(), fs.Completed(fs.Outcome("submitted")))
    assert len({fs.Confirm(), fs.Confirm(), fs.Cancel()}) == 2
    assert nt.channels_from_json(["bell", "osc9"]) == (nt.Bell(), nt.Osc9())


def test_a_subclass_is_another_kind() -> None:
    class Louder(nt.Bell):
        """A bell of another kind."""

    assert Louder() != nt.Bell()
    assert nt.Bell() != Louder()
    assert isinstance(Louder(), Fieldless)


def test_a_fieldless_record_takes_no_attribute() -> None:
    with pytest.raises(AttributeError):
        fs.Toggle().x = 1  # type: ignore[attr-defined]


@pytest.mark.parametrize("command", [fs.NextTab(), fs.Skip(), fs.Number(3)])
def test_match_dispatches_by_class(command: fs.Command) -> None:
    match command:
        case fs.NextTab():
            kind = "next"
        case fs.Skip():
            kind = "skip"
        case fs.Number(row=row):
            kind = f"number {row}"
        case _:
            kind = "other"
    assert kind == {fs.NextTab: "next", fs.Skip: "skip", fs.Number: "number 3"}[type(command)]


def test_a_fieldless_record_reads_as_its_class() -> None:
    assert repr(fs.NextTab()) == "NextTab()"
