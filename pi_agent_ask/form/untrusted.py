"""The one gate every untrusted value passes before anything else sees it.

Tool arguments (``Runtime.call_tool``), ``pi-agent-ask:submit`` payloads, external UI provider
responses and command-line payloads come from other processes, other machines, or a model. The
rest of the program may assume what this module checks, so a value that fails is refused here,
as data (a :class:`Refusal`), and never reaches validation, the form or the journal:

- **JSON-like only**: ``None``, booleans, integers, floats, strings, lists (or tuples) and
  mappings with string keys. Anything else (bytes, sets, objects) is refused.
- **Valid Unicode**: every string and key must be encodable as UTF-8. A lone UTF-16 surrogate
  (``"\\ud800"``, which ``json.loads('"\\\\ud800"')`` returns) is not text and cannot be stored;
  NUL and other control characters *are* valid text and pass (they are neutralised where text is
  shown: ``form/sanitize.py``).
- **Bounded**: at most :data:`MAX_DEPTH` levels of nesting, :data:`MAX_TEXT_CHARS` characters of
  text (strings and keys together) and :data:`MAX_VALUES` values in all.

The walk is iterative (an explicit stack), so no input can exhaust the interpreter's recursion
limit, and it stops at the first problem. What each caller turns a refusal into is documented in
``docs/errors.md``: a tool error, a ``validate`` issue, an ``invalid_answer`` / ``invalid_request``
submit result, or an external UI tool error.

:func:`scrub_text` is the other half, for text typed on the terminal: prompt_toolkit decodes
bytes that are not UTF-8 as lone surrogates (``surrogateescape``); they become ``U+FFFD``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

import attrs

__all__ = [
    "MAX_DEPTH",
    "MAX_TEXT_CHARS",
    "MAX_VALUES",
    "Refusal",
    "check",
    "has_surrogate",
    "passes_flat",
    "scrub_text",
]

MAX_DEPTH: Final = 64
"""Deepest nesting accepted (a scalar at the top is depth 0). The deepest valid ``ask_user``
call is 5 levels deep; 64 leaves room for any honest client and stays far from recursion."""

MAX_TEXT_CHARS: Final = 8 * 1024 * 1024
"""Most characters of text (every string and key together) one value may hold. A form nobody
can read in a day holds less; the journal writes several copies of a call's arguments."""

MAX_VALUES: Final = 1_000_000
"""Most values (scalars and containers) one value may hold."""

_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_PLAIN_KEY: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SHOWN_KEY_CHARS: Final = 40


@attrs.frozen(repr=False)
class Refusal:
    """Why an untrusted value was refused: where (``path``, e.g. ``questions[0].note``; empty
    for the value itself) and what (``message``). Both are plain ASCII-safe text."""

    path: str
    message: str

    def describe(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message

    def within(self, prefix: str) -> Refusal:
        """The same refusal with its path relative to an enclosing value's ``prefix``."""
        if not prefix:
            return self
        if not self.path:
            return Refusal(prefix, self.message)
        joiner = "" if self.path.startswith("[") else "."
        return Refusal(prefix + joiner + self.path, self.message)


def check(
    value: object,
    *,
    max_depth: int = MAX_DEPTH,
    max_text_chars: int = MAX_TEXT_CHARS,
    max_values: int = MAX_VALUES,
) -> Refusal | None:
    """The first reason ``value`` may not go on, or ``None`` when it is a bounded JSON value.

    Never raises and never recurses, whatever ``value`` is."""
    outcome = _scan(value, 0, max_depth, max_text_chars, max_values)
    return outcome if isinstance(outcome, Refusal) else None


def has_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (the one way a ``str`` is not valid text)."""
    return not text.isascii() and _SURROGATE.search(text) is not None


def passes_flat(values: tuple[object, ...], key_chars: int) -> bool:
    """Whether ``check`` passes a map of ``values`` whose keys hold ``key_chars`` characters,
    told without the walk, for the few plain fields of a call or an event (its name and ids):
    ``True`` when each value is ``None`` or a ``str`` without a lone surrogate and all the text
    is within :data:`MAX_TEXT_CHARS`. ``False`` only says that ``check`` must decide (and name
    the refusal)."""
    chars = key_chars
    for value in values:
        if value is None:
            continue
        if type(value) is not str:
            return False
        if not value.isascii() and _SURROGATE.search(value) is not None:  # has_surrogate
            return False
        chars += len(value)
    return chars <= MAX_TEXT_CHARS


def _scan(
    value: object, depth: int, max_depth: int, max_text_chars: int, max_values: int
) -> Refusal | tuple[int, int]:
    """The first refusal within ``value`` (at ``depth``), or the text and values it holds."""
    # Each entry links to its parent's (``_Where``): the path is spelled out only for a value
    # that is refused, never built for the values that pass.
    stack: list[tuple[Any, _Where, int]] = [(value, None, depth)]
    chars = 0
    values = 0
    while stack:
        item, where, depth = stack.pop()
        values += 1
        if values > max_values:
            return Refusal(_path_of(where), f"holds more than {max_values} values")
        kind = type(item)
        # The exact JSON types first; subclasses and other mappings take the tests below.
        if kind is str:
            chars += len(item)
            if chars > max_text_chars:
                return Refusal(
                    _path_of(where), f"holds more than {max_text_chars} characters of text"
                )
            if not item.isascii():
                problem = _text_problem(item)
                if problem is not None:
                    return Refusal(_path_of(where), problem)
            continue
        if kind is dict:
            if depth >= max_depth:
                return Refusal(_path_of(where), f"is nested deeper than {max_depth} levels")
            for key in item:
                if type(key) is not str:
                    return Refusal(_path_of(where), "has a key that is not a string")
                chars += len(key)
                if chars > max_text_chars:
                    return Refusal(
                        _path_of(where), f"holds more than {max_text_chars} characters of text"
                    )
                if not key.isascii():
                    problem = _text_problem(key)
                    if problem is not None:
                        return Refusal(_path_of(where), f"has a key that {problem}")
            # Reversed: the stack pops the first child first, so problems come in document order.
            depth += 1
            for key, child in reversed(item.items()):
                stack.append((child, (where, key), depth))
            continue
        if item is None or kind is bool or kind is int or kind is float:
            continue
        if kind is list or kind is tuple or isinstance(item, list | tuple):
            if depth >= max_depth:
                return Refusal(_path_of(where), f"is nested deeper than {max_depth} levels")
            index = len(item)
            depth += 1
            while index:
                index -= 1
                stack.append((item[index], (where, index), depth))
            continue
        if isinstance(item, str):
            chars += len(item)
            if chars > max_text_chars:
                return Refusal(
                    _path_of(where), f"holds more than {max_text_chars} characters of text"
                )
            problem = _text_problem(item)
            if problem is not None:
                return Refusal(_path_of(where), problem)
            continue
        if isinstance(item, Mapping):
            if depth >= max_depth:
                return Refusal(_path_of(where), f"is nested deeper than {max_depth} levels")
            children: list[tuple[Any, _Where, int]] = []
            for key, child in item.items():
                if type(key) is not str:
                    return Refusal(_path_of(where), "has a key that is not a string")
                chars += len(key)
                if chars > max_text_chars:
                    return Refusal(
                        _path_of(where), f"holds more than {max_text_chars} characters of text"
                    )
                problem = _text_problem(key)
                if problem is not None:
                    return Refusal(_path_of(where), f"has a key that {problem}")
                children.append((child, (where, key), depth + 1))
            stack.extend(reversed(children))
            continue
        if isinstance(item, int | float):  # subclasses of the JSON scalars (IntEnum, ...)
            continue
        return Refusal(_path_of(where), f"is not a JSON value ({kind.__name__})")
    return chars, values


_Where = tuple[Any, str | int] | None
"""Where a value sits: ``(parent's _Where, key or index)``, ``None`` for the root."""


def _path_of(where: _Where) -> str:
    parts: list[str | int] = []
    while where is not None:
        where, part = where
        parts.append(part)
    return _path(tuple(reversed(parts)))


def _text_problem(text: str) -> str | None:
    if text.isascii():
        return None
    match = _SURROGATE.search(text)
    if match is None:
        return None
    return (
        f"is not valid Unicode: a lone surrogate U+{ord(match.group()):04X} at character "
        f"{match.start()}"
    )


def _path(parts: tuple[str | int, ...]) -> str:
    """``questions[0].options[1].label``, the path style of validation issues; a key that is
    not a plain name is shown JSON-quoted (ASCII, shortened), so the path is always safe text."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.match(part):
            out += f".{part}" if out else part
        else:
            shown = part if len(part) <= _SHOWN_KEY_CHARS else part[:_SHOWN_KEY_CHARS] + "…"
            out += f"[{json.dumps(shown)}]"
    return out


def scrub_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by ``U+FFFD`` (what a terminal decoder
    makes of bytes that are not UTF-8), so typed text can always be stored."""
    if text.isascii():
        return text
    return _SURROGATE.sub("\ufffd", text)
