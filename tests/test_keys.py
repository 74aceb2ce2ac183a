"""Key ids: parsing, aliases, canonical form, reserved keys, prompt_toolkit names."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prompt_toolkit.key_binding import KeyBindings

from pi_agent_ask.persistence.keys import (
    KeyId,
    KeyIdError,
    format_key,
    is_valid_key,
    normalize_key,
    parse_key,
    reserved_reason,
    to_prompt_toolkit,
)


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        # The catalog's aliases.
        ("escape", "esc"),
        ("return", "enter"),
        ("control+c", "ctrl+c"),
        ("Shift+N", "shift+n"),
        ("pageup", "pageUp"),
        # Canonical ids stay as they are.
        ("ctrl+c", "ctrl+c"),
        ("shift+tab", "shift+tab"),
        ("alt+q", "alt+q"),
        ("esc", "esc"),
        ("enter", "enter"),
        ("space", "space"),
        ("up", "up"),
        ("pageUp", "pageUp"),
        ("?", "?"),
        ("shift+n", "shift+n"),
        ("t", "t"),
        ("@", "@"),
        ("f5", "f5"),
        # Case, spacing, modifier order.
        ("ESC", "esc"),
        ("PageDown", "pageDown"),
        ("Ctrl+C", "ctrl+c"),
        ("ctrl + c", "ctrl+c"),
        ("alt+ctrl+d", "ctrl+alt+d"),
        ("alt+shift+n", "shift+alt+n"),
        ("ctrl+shift+left", "ctrl+shift+left"),
        # A bare capital is what shift+letter types.
        ("N", "shift+n"),
        ("D", "shift+d"),
        ("ctrl+N", "ctrl+n"),
        # Plus as a key.
        ("+", "+"),
        ("alt++", "alt++"),
        (" ", "space"),
        # Spellings a terminal cannot tell apart fold into one id.
        ("ctrl+m", "enter"),
        ("ctrl+i", "tab"),
        ("ctrl+h", "backspace"),
        ("ctrl+[", "esc"),
        ("ctrl+@", "ctrl+space"),
    ],
)
def test_normalize_key(raw: str, canonical: str) -> None:
    assert normalize_key(raw) == canonical
    assert is_valid_key(raw)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("", "a key id must not be empty"),
        ("   ", "a key id must not be empty"),
        ("foo", '"foo" is not a known key'),
        ("ctrl+foo", '"foo" is not a known key'),
        ("hyper+c", '"hyper" is not a modifier (use ctrl, shift or alt)'),
        ("ctrl+ctrl+c", 'modifier "ctrl" appears twice'),
        ("ctrl+", "a key id needs a key after its modifiers"),
        ("shift+enter", "shift+enter cannot be told apart on a terminal"),
        ("shift+?", "shift+? cannot be told apart on a terminal"),
        ("ctrl+shift+a", "ctrl+shift+a cannot be told apart on a terminal"),
        ("ctrl+enter", "ctrl+enter cannot be typed on a terminal"),
        ("ctrl++", "ctrl++ cannot be typed on a terminal"),
        ("f13", '"f13" is not a known key'),
        ("\t", "a key id must not be empty"),
    ],
)
def test_invalid_key_ids_say_why(raw: str, message: str) -> None:
    with pytest.raises(KeyIdError) as caught:
        normalize_key(raw)
    assert str(caught.value) == message
    assert not is_valid_key(raw)


def test_non_strings_are_not_keys() -> None:
    assert not is_valid_key(3)
    assert not is_valid_key(None)
    with pytest.raises(KeyIdError, match="a key id must be a string"):
        parse_key(3)  # type: ignore[arg-type]


def test_parse_key_gives_the_parts() -> None:
    assert parse_key("Alt+Ctrl+D") == KeyId("d", ctrl=True, alt=True)
    assert parse_key("N").modifiers == frozenset({"shift"})
    assert str(parse_key("shift+alt+x")) == "shift+alt+x"


@pytest.mark.parametrize(
    ("key", "names"),
    [
        ("ctrl+c", ("c-c",)),
        ("shift+tab", ("s-tab",)),
        ("esc", ("escape",)),
        ("alt+q", ("escape", "q")),
        ("shift+n", ("N",)),
        ("ctrl+alt+d", ("escape", "c-d")),
        ("enter", ("c-m",)),
        ("tab", ("c-i",)),
        ("space", (" ",)),
        ("backspace", ("c-h",)),
        ("up", ("up",)),
        ("pageUp", ("pageup",)),
        ("pageDown", ("pagedown",)),
        ("?", ("?",)),
        ("n", ("n",)),
        ("@", ("@",)),
        ("ctrl+space", ("c-@",)),
        ("ctrl+left", ("c-left",)),
        ("shift+up", ("s-up",)),
        ("ctrl+shift+home", ("c-s-home",)),
        ("ctrl+shift+1", ("c-s-1",)),
        ("ctrl+5", ("c-5",)),
        ("ctrl+\\", ("c-\\",)),
        ("f1", ("f1",)),
        ("ctrl+f2", ("c-f2",)),
        ("shift+esc", ("s-escape",)),
        ("alt+enter", ("escape", "c-m")),
        ("alt++", ("escape", "+")),
    ],
)
def test_prompt_toolkit_names(key: str, names: tuple[str, ...]) -> None:
    assert to_prompt_toolkit(key) == names


def test_prompt_toolkit_accepts_every_mapped_name() -> None:
    # The mapping is data; this checks it against prompt_toolkit's own key parser.
    keys = [
        "ctrl+c",
        "shift+tab",
        "esc",
        "alt+q",
        "shift+n",
        "ctrl+alt+d",
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
        "ctrl+space",
        "ctrl+shift+pageDown",
        "ctrl+shift+9",
        "ctrl+0",
        "ctrl+]",
        "ctrl+^",
        "ctrl+_",
        "shift+delete",
        "ctrl+f12",
        "f12",
        "shift+esc",
        "?",
        "~",
    ]
    bindings = KeyBindings()
    for key in keys:
        bindings.add(*to_prompt_toolkit(key))(lambda event: None)
    assert len(bindings.bindings) == len(keys)


@given(st.text(max_size=12))
def test_normalisation_is_idempotent_and_mappable(raw: str) -> None:
    try:
        canonical = normalize_key(raw)
    except KeyIdError:
        assert not is_valid_key(raw)
        return
    assert normalize_key(canonical) == canonical
    names = to_prompt_toolkit(canonical)
    assert 1 <= len(names) <= 2
    KeyBindings().add(*names)(lambda event: None)


@pytest.mark.parametrize(
    ("key", "shown"),
    [
        ("esc", "Esc"),
        ("ctrl+c", "Ctrl+C"),
        ("?", "?"),
        ("shift+tab", "Shift+Tab"),
        ("shift+n", "Shift+N"),
        ("n", "n"),
        ("pageUp", "PageUp"),
        ("ctrl+alt+d", "Ctrl+Alt+D"),
        ("space", "Space"),
        ("f3", "F3"),
    ],
)
def test_format_key(key: str, shown: str) -> None:
    assert format_key(key) == shown


@pytest.mark.parametrize("context", ["global", "main", "editor", "noteEditor", "settingsModal"])
def test_fixed_keys_are_reserved_everywhere(context: str) -> None:
    for digit in "123456789":
        assert reserved_reason(context, digit) == "digits 1..9 select options"
    assert reserved_reason(context, "@") == "@ starts a file reference in editors"
    assert reserved_reason(context, "ctrl+alt+d") == (
        "ctrl+alt+d removes the last image in an editor"
    )
    assert reserved_reason(context, "alt+q") == (
        "alt+q moves focus between the question panel and the editor"
    )
    assert reserved_reason(context, "0") is None
    assert reserved_reason(context, "n") is None


def test_skip_key_is_reserved_in_question_navigation_only() -> None:
    assert reserved_reason("main", "shift+d") == "shift+d skips the current question"
    assert reserved_reason("global", "shift+d") == "shift+d skips the current question"
    # In editors, D is ordinary text.
    assert reserved_reason("editor", "shift+d") is None
    assert reserved_reason("noteEditor", "shift+d") is None
    assert reserved_reason("settingsModal", "shift+d") is None
