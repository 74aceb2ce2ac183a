"""Key id behaviour the other key suites left unpinned, found by mutation testing
(``docs/mutation-persistence.md``): the letters and digits at the ends of their ranges, the
punctuation next to them, ``+`` as the base after modifiers, and the text for a key id that is
not a string.
"""

from __future__ import annotations

import pytest

from pi_agent_ask.persistence.keys import KeyIdError, normalize_key, to_prompt_toolkit


@pytest.mark.parametrize(("raw", "canonical"), [("A", "shift+a"), ("Z", "shift+z")])
def test_capital_letters_at_both_ends_are_shifted_letters(raw: str, canonical: str) -> None:
    assert normalize_key(raw) == canonical


@pytest.mark.parametrize(
    ("key", "names"),
    [
        ("ctrl+a", ("c-a",)),
        ("ctrl+z", ("c-z",)),
        ("ctrl+0", ("c-0",)),
        ("ctrl+9", ("c-9",)),
        ("shift+a", ("A",)),
        ("shift+z", ("Z",)),
    ],
)
def test_ctrl_and_shift_reach_both_ends_of_letters_and_digits(
    key: str, names: tuple[str, ...]
) -> None:
    assert to_prompt_toolkit(key) == names


def test_plus_is_a_base_after_any_modifiers() -> None:
    assert normalize_key("++") == "+"
    assert normalize_key("alt++") == "alt++"
    with pytest.raises(KeyIdError) as raised:
        normalize_key("ctrl+shift++")
    assert str(raised.value) == "ctrl+shift++ cannot be told apart on a terminal"


def test_a_key_id_that_is_not_a_string_says_so() -> None:
    with pytest.raises(KeyIdError) as raised:
        normalize_key(7)  # type: ignore[arg-type]
    assert str(raised.value) == "a key id must be a string"


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("ctrl+`", "ctrl+` cannot be typed on a terminal"),
        ("ctrl+;", "ctrl+; cannot be typed on a terminal"),
        ("ctrl+=", "ctrl+= cannot be typed on a terminal"),
        ("ctrl+?", "ctrl+? cannot be typed on a terminal"),
        ("shift+`", "shift+` cannot be told apart on a terminal"),
        ("shift+[", "shift+[ cannot be told apart on a terminal"),
        ("shift+_", "shift+_ cannot be told apart on a terminal"),
    ],
)
def test_punctuation_next_to_letters_and_digits_is_refused(key: str, message: str) -> None:
    with pytest.raises(KeyIdError) as raised:
        to_prompt_toolkit(key)
    assert str(raised.value) == message
