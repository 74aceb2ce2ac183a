"""Migrations of the settings file: pure functions on parsed JSON, each taking schema
version N to N + 1, applied in memory only (loading never rewrites a file)."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable

from pi_agent_ask.persistence.keys import KeyIdError, normalize_key
from pi_agent_ask.persistence.settings_keymaps import JSON, KEYMAP_CONTEXTS, is_object

# Flat keymaps of versions 1..3 and where each went in the context-shaped keymaps of version 4.
_FLAT_KEYMAP_TARGETS: dict[str, tuple[tuple[str, str], ...]] = {
    "dismiss": (("global", "dismiss"),),
    "cancel": (("main", "cancel"), ("editor", "close"), ("noteEditor", "close")),
    "confirm": (("main", "confirm"), ("editor", "submit"), ("noteEditor", "save")),
    "toggle": (("main", "toggle"),),
    "optionNote": (("main", "optionNote"),),
    "questionNote": (("main", "questionNote"),),
}

_V4_DEFAULT_KEYMAPS: dict[str, dict[str, list[str]]] = {
    "global": {"dismiss": ["ctrl+c"], "settings": ["?"]},
    "main": {
        "confirm": ["enter"],
        "cancel": ["esc"],
        "toggle": ["space"],
        "nextTab": ["tab", "right"],
        "previousTab": ["shift+tab", "left"],
        "nextOption": ["down"],
        "previousOption": ["up"],
        "optionNote": ["n"],
        "questionNote": ["shift+n"],
    },
    "editor": {
        "submit": ["enter"],
        "close": ["esc"],
        "nextTabWhenEmpty": ["tab", "right"],
        "previousTabWhenEmpty": ["shift+tab", "left"],
        "nextOptionWhenEmpty": ["down"],
        "previousOptionWhenEmpty": ["up"],
    },
    "noteEditor": {
        "save": ["enter"],
        "close": ["esc"],
        "nextTabWhenEmpty": ["tab", "right"],
        "previousTabWhenEmpty": ["shift+tab", "left"],
        "nextOptionWhenEmpty": ["down"],
        "previousOptionWhenEmpty": ["up"],
    },
    "settingsModal": {
        "close": ["esc", "ctrl+c", "?"],
        "nextOption": ["down"],
        "previousOption": ["up"],
        "toggle": ["enter", "space"],
    },
}


def _flat_to_contexts(keymaps: JSON) -> JSON:
    """Versions 1..3 keymaps (flat) → version 4 keymaps (per context).

    A value that is already context-shaped (some hand-edited old files are) is kept as it is;
    anything that is not an object is passed on for the keymap validation to report.
    """
    if not is_object(keymaps) or any(is_object(keymaps.get(c)) for c in KEYMAP_CONTEXTS):
        return keymaps
    contexts = copy.deepcopy(_V4_DEFAULT_KEYMAPS)
    for flat, targets in _FLAT_KEYMAP_TARGETS.items():
        if flat in keymaps:
            for context, action in targets:
                contexts[context][action] = keymaps[flat]
    return contexts


def _migrate_to_v2(data: dict[str, JSON]) -> dict[str, JSON]:
    # Version 2 only changed how the file was written, not its content.
    return data | {"schemaVersion": 2}


def _migrate_to_v3(data: dict[str, JSON]) -> dict[str, JSON]:
    # Version 3 added notifications; an absent section means the defaults either way.
    return data | {"schemaVersion": 3}


def _migrate_to_v4(data: dict[str, JSON]) -> dict[str, JSON]:
    out = data | {"schemaVersion": 4}
    if "keymaps" in data:
        out["keymaps"] = _flat_to_contexts(data["keymaps"])
    return out


def _migrate_to_v5(data: dict[str, JSON]) -> dict[str, JSON]:
    out = data | {"schemaVersion": 5}
    behaviour = data.get("behaviour")
    if is_object(behaviour):
        out["behaviour"] = {"presentSingleAsMulti": False} | behaviour
    keymaps = data.get("keymaps")
    if is_object(keymaps) and is_object(keymaps.get("main")):
        out["keymaps"] = keymaps | {"main": {"changeQuestionType": ["t"]} | keymaps["main"]}
    return out


def _uses_key(keymaps: dict[str, JSON], contexts: tuple[str, ...], key: str) -> bool:
    for name in contexts:
        section = keymaps.get(name)
        if not is_object(section):
            continue
        for value in section.values():
            items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
            for item in items:
                with contextlib.suppress(KeyIdError, TypeError):
                    if normalize_key(item) == key:
                        return True
    return False


def _migrate_to_v6(data: dict[str, JSON]) -> dict[str, JSON]:
    out = data | {"schemaVersion": 6}
    behaviour = data.get("behaviour")
    if is_object(behaviour):
        out["behaviour"] = {"historyTools": False, "questionMode": "standard"} | behaviour
    keymaps = data.get("keymaps")
    if is_object(keymaps):
        # Version 6 moved image paste from Pi's own keymap into the editors. Where the old file
        # already uses ctrl+v in that editor (or globally), paste starts unbound instead of
        # turning a valid old file into a duplicate-key error.
        updated = dict(keymaps)
        for editor in ("editor", "noteEditor"):
            section = keymaps.get(editor)
            if is_object(section) and "pasteImage" not in section:
                taken = _uses_key(keymaps, (editor, "global"), "ctrl+v")
                updated[editor] = section | {"pasteImage": [] if taken else ["ctrl+v"]}
        out["keymaps"] = updated
    return out


Migration = Callable[[dict[str, JSON]], dict[str, JSON]]

MIGRATIONS: tuple[Migration, ...] = (
    _migrate_to_v2,
    _migrate_to_v3,
    _migrate_to_v4,
    _migrate_to_v5,
    _migrate_to_v6,
)
"""``MIGRATIONS[n - 1]`` turns a version ``n`` file into version ``n + 1``."""


def schema_version(data: dict[str, JSON]) -> int | None:
    value = data.get("schemaVersion")
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    # JSON has one number type: 6.0 is the same number as 6.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None
