"""``Fieldless``: the base of a record that carries nothing but its kind (``NextTab``, ``Bell``).

Such a record is a value like every other record of a closed set: immutable, and equal to (and
hashing like) every other instance of its class and to nothing else, so ``NextTab() ==
NextTab()`` and ``fs.DeferRequested() in effects`` read as they do for an attrs record, and
``match`` dispatches it by class. It is a plain class rather than an ``@attrs.frozen`` one:
attrs writes and compiles an ``__init__``, ``__eq__`` and ``__hash__`` for every class as it is
made, a quarter of a millisecond each, which a record with no fields does not need (about
twenty of them are made before ``ask`` draws its first frame).
"""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = ["Fieldless"]


class Fieldless:
    """A record with no fields; subclass it and give the subclass a docstring, nothing else."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))

    def __repr__(self) -> str:
        # What an attrs record with no fields would print: read in test failures and logs.
        return f"{type(self).__name__}()"

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise AttributeError(f"{type(self).__name__} has no fields to set")
