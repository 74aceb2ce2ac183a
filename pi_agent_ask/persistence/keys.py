"""Key ids: the strings people write in ``keymaps`` (``ctrl+c``, ``shift+tab``, ``?``).

A key id is zero or more modifiers and one base key joined with ``+``. The canonical form is
what :func:`normalize_key` returns and what the settings file stores:

- modifiers in the order ``ctrl``, ``shift``, ``alt``, each at most once, lower case;
- a named base key in its canonical spelling (``esc``, ``enter``, ``tab``, ``space``,
  ``backspace``, ``delete``, ``insert``, ``home``, ``end``, ``pageUp``, ``pageDown``, ``up``,
  ``down``, ``left``, ``right``, ``f1`` .. ``f12``), or one printable character; letters after a
  modifier are lower case (``Shift+N`` is ``shift+n``), and a bare upper-case ASCII letter means
  that letter with shift (``N`` is ``shift+n``).

The known set is exactly the set of keys a terminal can deliver distinguishably and
prompt_toolkit can bind; :func:`to_prompt_toolkit` maps every one of them. Combinations a
terminal cannot tell apart from another key are folded into that key (``ctrl+m`` is ``enter``,
``ctrl+i`` is ``tab``, ``ctrl+h`` is ``backspace``, ``ctrl+[`` is ``esc``, ``ctrl+@`` is
``ctrl+space``) so duplicate detection sees them; combinations it cannot deliver at all
(``shift+enter``, ``ctrl+shift+a``) are rejected rather than silently never firing.

Reserved keys are fixed by the contract and cannot be bound to a configurable action: digits
``1``..``9`` (option shortcuts), ``@`` (file references in editors), ``ctrl+alt+d`` (remove the
last image), ``alt+q`` (panel focus), all in every context; ``shift+d`` (skip the question) in
``main`` and in ``global`` (whose keys also act in question navigation).

prompt_toolkit itself is not imported here: the mapping is data for the UI layer.
"""

from __future__ import annotations

import attrs

__all__ = [
    "RESERVED_EVERYWHERE",
    "RESERVED_IN_NAVIGATION",
    "KeyId",
    "KeyIdError",
    "format_key",
    "from_prompt_toolkit",
    "is_valid_key",
    "normalize_key",
    "parse_key",
    "reserved_reason",
    "to_prompt_toolkit",
]


class KeyIdError(ValueError):
    """A string is not a key id this project can bind; the message says why."""


MODIFIERS: tuple[str, ...] = ("ctrl", "shift", "alt")

_MODIFIER_ALIASES: dict[str, str] = {
    "ctrl": "ctrl",
    "control": "ctrl",
    "shift": "shift",
    "alt": "alt",
}

# Canonical named keys, looked up case-insensitively, plus aliases people commonly write.
_NAMED_KEYS: tuple[str, ...] = (
    "esc",
    "enter",
    "tab",
    "space",
    "backspace",
    "delete",
    "insert",
    "home",
    "end",
    "pageUp",
    "pageDown",
    "up",
    "down",
    "left",
    "right",
    *(f"f{n}" for n in range(1, 13)),
)
_NAMED_LOOKUP: dict[str, str] = {name.lower(): name for name in _NAMED_KEYS} | {
    "escape": "esc",
    "return": "enter",
}

# prompt_toolkit names of the named keys without modifiers. Enter, Tab and Backspace are
# Ctrl+M, Ctrl+I and Ctrl+H on a terminal; prompt_toolkit's canonical names say so.
_PT_NAMED: dict[str, str] = {
    "esc": "escape",
    "enter": "c-m",
    "tab": "c-i",
    "space": " ",
    "backspace": "c-h",
    "delete": "delete",
    "insert": "insert",
    "home": "home",
    "end": "end",
    "pageUp": "pageup",
    "pageDown": "pagedown",
    "up": "up",
    "down": "down",
    "left": "left",
    "right": "right",
    **{f"f{n}": f"f{n}" for n in range(1, 13)},
}
_NAVIGATION = (
    "up",
    "down",
    "left",
    "right",
    "home",
    "end",
    "insert",
    "delete",
    "pageUp",
    "pageDown",
)
_FUNCTION_KEYS = tuple(f"f{n}" for n in range(1, 13))

# Ctrl with a character: prompt_toolkit has c-a..c-z, c-0..c-9 and a few punctuation keys.
_CTRL_PUNCTUATION: dict[str, str] = {"\\": "c-\\", "]": "c-]", "^": "c-^", "_": "c-_"}

# Terminal-identical spellings folded into one canonical id (after modifier parsing).
_FOLDED: dict[tuple[frozenset[str], str], tuple[frozenset[str], str]] = {
    (frozenset({"ctrl"}), "m"): (frozenset(), "enter"),
    (frozenset({"ctrl"}), "i"): (frozenset(), "tab"),
    (frozenset({"ctrl"}), "h"): (frozenset(), "backspace"),
    (frozenset({"ctrl"}), "["): (frozenset(), "esc"),
    (frozenset({"ctrl"}), "@"): (frozenset({"ctrl"}), "space"),
}

RESERVED_EVERYWHERE: tuple[str, ...] = (
    *(str(digit) for digit in range(1, 10)),
    "@",
    "ctrl+alt+d",
    "alt+q",
)
"""Keys no configurable action may use, in any keymap context."""

RESERVED_IN_NAVIGATION: tuple[str, ...] = ("shift+d",)
"""Keys reserved in the ``main`` and ``global`` contexts (question navigation)."""

_RESERVED_WHY: dict[str, str] = {
    **{str(digit): "digits 1..9 select options" for digit in range(1, 10)},
    "@": "@ starts a file reference in editors",
    "ctrl+alt+d": "ctrl+alt+d removes the last image in an editor",
    "alt+q": "alt+q moves focus between the question panel and the editor",
    "shift+d": "shift+d skips the current question",
}


@attrs.frozen(repr=False)
class KeyId:
    """A parsed, canonical key id."""

    base: str
    ctrl: bool = False
    shift: bool = False
    alt: bool = False

    def __str__(self) -> str:
        mods = [
            name
            for name, on in zip(MODIFIERS, (self.ctrl, self.shift, self.alt), strict=True)
            if on
        ]
        return "+".join([*mods, self.base])

    @property
    def modifiers(self) -> frozenset[str]:
        return frozenset(
            name
            for name, on in zip(MODIFIERS, (self.ctrl, self.shift, self.alt), strict=True)
            if on
        )


def _split(raw: str) -> tuple[list[str], str]:
    """Split ``raw`` into modifier words and the base word; ``+`` may itself be the base."""
    text = raw.strip()
    if raw == " ":
        return [], " "
    if not text:
        raise KeyIdError("a key id must not be empty")
    if text == "+":
        return [], "+"
    if text.endswith("++"):
        head = text[:-2]
        parts = [part.strip() for part in head.split("+")] if head else []
        return parts, "+"
    parts = [part.strip() for part in text.split("+")]
    return parts[:-1], parts[-1]


def parse_key(raw: str) -> KeyId:
    """Parse and canonicalise a key id; raise :class:`KeyIdError` when it cannot be bound."""
    if not isinstance(raw, str):
        raise KeyIdError("a key id must be a string")
    words, base_word = _split(raw)
    mods: set[str] = set()
    for word in words:
        modifier = _MODIFIER_ALIASES.get(word.lower())
        if modifier is None:
            raise KeyIdError(f'"{word}" is not a modifier (use ctrl, shift or alt)')
        if modifier in mods:
            raise KeyIdError(f'modifier "{modifier}" appears twice')
        mods.add(modifier)
    if not base_word:
        raise KeyIdError("a key id needs a key after its modifiers")

    named = _NAMED_LOOKUP.get(base_word.lower())
    if named is not None:
        base = named
    elif base_word == " ":
        base = "space"
    elif len(base_word) == 1 and base_word.isprintable() and not base_word.isspace():
        base = base_word
        if "A" <= base <= "Z":
            # A bare capital is what Shift+letter types; with modifiers, case carries no meaning.
            if not mods:
                mods.add("shift")
            base = base.lower()
    else:
        raise KeyIdError(f'"{base_word}" is not a known key')

    frozen_mods = frozenset(mods)
    frozen_mods, base = _FOLDED.get((frozen_mods, base), (frozen_mods, base))
    key = KeyId(
        base, ctrl="ctrl" in frozen_mods, shift="shift" in frozen_mods, alt="alt" in frozen_mods
    )
    _without_alt(key)  # raises when a terminal cannot deliver the combination
    return key


def normalize_key(raw: str) -> str:
    """The canonical spelling of a key id (``Control+C`` → ``ctrl+c``); raises KeyIdError."""
    return str(parse_key(raw))


def is_valid_key(raw: object) -> bool:
    """Whether ``raw`` is a key id this project can bind."""
    if not isinstance(raw, str):
        return False
    try:
        parse_key(raw)
    except KeyIdError:
        return False
    return True


def _without_alt(key: KeyId) -> str:
    """The prompt_toolkit key name of ``key`` ignoring alt; raises for undeliverable keys."""
    base = key.base
    if key.ctrl and key.shift:
        if base in _NAVIGATION:
            return f"c-s-{_PT_NAMED[base]}"
        if base.isdigit() and len(base) == 1:
            return f"c-s-{base}"
        raise KeyIdError(f"ctrl+shift+{base} cannot be told apart on a terminal")
    if key.ctrl:
        if base in _NAVIGATION or base in _FUNCTION_KEYS:
            return f"c-{_PT_NAMED[base]}"
        if base == "space":
            return "c-@"
        if len(base) == 1 and ("a" <= base <= "z" or "0" <= base <= "9"):
            return f"c-{base}"
        if base in _CTRL_PUNCTUATION:
            return _CTRL_PUNCTUATION[base]
        raise KeyIdError(f"ctrl+{base} cannot be typed on a terminal")
    if key.shift:
        if base in _NAVIGATION:
            return f"s-{_PT_NAMED[base]}"
        if base == "tab":
            return "s-tab"
        if base == "esc":
            return "s-escape"
        if len(base) == 1 and "a" <= base <= "z":
            return base.upper()
        raise KeyIdError(f"shift+{base} cannot be told apart on a terminal")
    if base in _PT_NAMED:
        return _PT_NAMED[base]
    return base


def to_prompt_toolkit(key: str) -> tuple[str, ...]:
    """The prompt_toolkit key sequence for a key id, for ``KeyBindings.add(*keys)``.

    Always a tuple: ``ctrl+c`` → ``("c-c",)``, ``shift+tab`` → ``("s-tab",)``, ``esc`` →
    ``("escape",)``, ``shift+n`` → ``("N",)``, ``space`` → ``(" ",)``, ``enter`` → ``("c-m",)``
    (prompt_toolkit's own name for Enter), and alt as an Escape prefix: ``alt+q`` →
    ``("escape", "q")``, ``ctrl+alt+d`` → ``("escape", "c-d")``.
    """
    parsed = parse_key(key)
    name = _without_alt(parsed)
    return ("escape", name) if parsed.alt else (name,)


_FROM_PT_NAMED: dict[str, str] = {name: key for key, name in _PT_NAMED.items()}
_PT_MODIFIER_PREFIXES = (("c-s-", "ctrl+shift+"), ("c-", "ctrl+"), ("s-", "shift+"))


def from_prompt_toolkit(name: str) -> str | None:
    """The key id of one prompt_toolkit key name (``to_prompt_toolkit`` read back, without
    alt): ``c-m`` → ``enter``, ``Q`` → ``shift+q``, ``c-s-left`` → ``ctrl+shift+left``; None for
    a name no key id spells (``<sigint>``, a bracketed paste)."""
    if name in _FROM_PT_NAMED:
        return _FROM_PT_NAMED[name]
    if len(name) == 1:
        candidate = f"shift+{name.lower()}" if "A" <= name <= "Z" else name
    else:
        candidate = next(
            (
                words + _FROM_PT_NAMED.get(name[len(prefix) :], name[len(prefix) :])
                for prefix, words in _PT_MODIFIER_PREFIXES
                if name.startswith(prefix) and len(name) > len(prefix)
            ),
            "",
        )
    return str(parse_key(candidate)) if is_valid_key(candidate) else None


_DISPLAY_NAMES: dict[str, str] = {
    "esc": "Esc",
    "enter": "Enter",
    "tab": "Tab",
    "space": "Space",
    "backspace": "Backspace",
    "delete": "Delete",
    "insert": "Insert",
    "home": "Home",
    "end": "End",
    "pageUp": "PageUp",
    "pageDown": "PageDown",
    "up": "Up",
    "down": "Down",
    "left": "Left",
    "right": "Right",
    **{f"f{n}": f"F{n}" for n in range(1, 13)},
}


def format_key(key: str) -> str:
    """How a key id is shown in hints: ``ctrl+c`` → ``Ctrl+C``, ``esc`` → ``Esc``, ``?`` → ``?``.

    A bare character stays as typed (``n``); after a modifier a letter is upper case
    (``shift+n`` → ``Shift+N``), as keyboards label it.
    """
    parsed = parse_key(key)
    parts = [name.capitalize() for name in MODIFIERS if name in parsed.modifiers]
    base = _DISPLAY_NAMES.get(parsed.base, parsed.base)
    if parts and len(base) == 1:
        base = base.upper()
    return "+".join([*parts, base])


def reserved_reason(context: str, key: str) -> str | None:
    """Why ``key`` (canonical) cannot be bound in keymap ``context``, or None when it can."""
    if key in RESERVED_EVERYWHERE or (
        context in ("main", "global") and key in RESERVED_IN_NAVIGATION
    ):
        return _RESERVED_WHY[key]
    return None
