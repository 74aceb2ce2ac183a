"""The settings file's ``keymaps`` section: the five keymap contexts, their bindings, and the
checks a section must pass (``InvalidKeymapsError`` names the first problem, in file order)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, TypeGuard, cast

import attrs

from pi_agent_ask.persistence.keys import KeyIdError, normalize_key, reserved_reason

JSON = Any
"""A value made of dict, list, str, int, float, bool and None."""

_KEYMAPS_NOTICE_SUFFIX = (
    "Using default ask keymaps for this session. Fix the config; pi-agent-ask reads it again "
    "at its next start."
)


class InvalidConfigError(ValueError):
    """The JSON does not have the shape of a config file (the file as a whole is rejected)."""


class InvalidKeymapsError(InvalidConfigError):
    """The ``keymaps`` section is unusable; ``reason`` is one sentence ending with a period."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def camel(name: str) -> str:
    """snake_case attribute name → the file's camelCase name (``global_`` → ``global``)."""
    head, *rest = name.rstrip("_").split("_")
    return head + "".join(word.capitalize() for word in rest)


def is_object(value: object) -> TypeGuard[dict[str, JSON]]:
    return isinstance(value, dict)


Binding = tuple[str, ...]


class KeymapContext:
    """What the five keymap context records (attrs classes below) have in common."""

    CONTEXT: ClassVar[str]

    def actions(self) -> tuple[tuple[str, Binding], ...]:
        """``(action JSON name, keys)`` pairs in file order."""
        return tuple(
            (camel(field.name), getattr(self, field.name))
            for field in attrs.fields(cast(Any, type(self)))
        )

    def bindings(self, action: str) -> Binding:
        """The keys of ``action`` (its JSON name, e.g. ``nextTab``); KeyError when unknown."""
        for name, keys in self.actions():
            if name == action:
                return keys
        raise KeyError(f"{self.CONTEXT}.{action}")

    def action_for_key(self, key: str) -> str | None:
        """The action (JSON name) a canonical key id triggers in this context, if any."""
        for name, keys in self.actions():
            if key in keys:
                return name
        return None

    def to_json(self) -> dict[str, JSON]:
        return {name: list(keys) for name, keys in self.actions()}


@attrs.frozen(repr=False)
class GlobalKeymap(KeymapContext):
    """``keymaps.global``: active in the main flow and in both editors."""

    CONTEXT: ClassVar[str] = "global"
    dismiss: Binding = ("ctrl+c",)
    settings: Binding = ("?",)


@attrs.frozen(repr=False)
class MainKeymap(KeymapContext):
    """``keymaps.main``: question navigation and Review."""

    CONTEXT: ClassVar[str] = "main"
    confirm: Binding = ("enter",)
    cancel: Binding = ("esc",)
    toggle: Binding = ("space",)
    change_question_type: Binding = ("t",)
    next_tab: Binding = ("tab", "right")
    previous_tab: Binding = ("shift+tab", "left")
    next_option: Binding = ("down",)
    previous_option: Binding = ("up",)
    option_note: Binding = ("n",)
    question_note: Binding = ("shift+n",)


@attrs.frozen(repr=False)
class EditorKeymap(KeymapContext):
    """``keymaps.editor``: the custom-answer editor."""

    CONTEXT: ClassVar[str] = "editor"
    submit: Binding = ("enter",)
    close: Binding = ("esc",)
    next_tab_when_empty: Binding = ("tab", "right")
    previous_tab_when_empty: Binding = ("shift+tab", "left")
    next_option_when_empty: Binding = ("down",)
    previous_option_when_empty: Binding = ("up",)
    paste_image: Binding = ("ctrl+v",)


@attrs.frozen(repr=False)
class NoteEditorKeymap(KeymapContext):
    """``keymaps.noteEditor``: question and option note editors."""

    CONTEXT: ClassVar[str] = "noteEditor"
    save: Binding = ("enter",)
    close: Binding = ("esc",)
    next_tab_when_empty: Binding = ("tab", "right")
    previous_tab_when_empty: Binding = ("shift+tab", "left")
    next_option_when_empty: Binding = ("down",)
    previous_option_when_empty: Binding = ("up",)
    paste_image: Binding = ("ctrl+v",)


@attrs.frozen(repr=False)
class SettingsModalKeymap(KeymapContext):
    """``keymaps.settingsModal``: the settings overlay."""

    CONTEXT: ClassVar[str] = "settingsModal"
    close: Binding = ("esc", "ctrl+c", "?")
    next_option: Binding = ("down",)
    previous_option: Binding = ("up",)
    toggle: Binding = ("enter", "space")


_CONTEXT_TYPES: tuple[type[KeymapContext], ...] = (
    GlobalKeymap,
    MainKeymap,
    EditorKeymap,
    NoteEditorKeymap,
    SettingsModalKeymap,
)
KEYMAP_CONTEXTS: tuple[str, ...] = tuple(kind.CONTEXT for kind in _CONTEXT_TYPES)
"""Context names in file order: global, main, editor, noteEditor, settingsModal."""

# Contexts whose keys must not overlap with ``global`` (global keys act in all of them).
_GLOBAL_SCOPED: tuple[str, ...] = ("main", "editor", "noteEditor")


def _keys_of(value: JSON, where: str) -> Binding:
    """Normalise one action's JSON value (a key id or a list of them) to canonical ids."""
    items: Sequence[JSON]
    if isinstance(value, str):
        items = [value]
    elif isinstance(value, list):
        items = value
    else:
        raise InvalidKeymapsError(f'Keymap "{where}" must be a key or a list of keys.')
    keys: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise InvalidKeymapsError(f'Keymap "{where}" must be a key or a list of keys.')
        try:
            keys.append(normalize_key(item))
        except KeyIdError as error:
            raise InvalidKeymapsError(f'Invalid key "{item}" in "{where}": {error}.') from None
    return tuple(keys)


@attrs.frozen(repr=False)
class Keymaps:
    """The ``keymaps`` section: one record per context, each action a tuple of key ids."""

    global_: GlobalKeymap = attrs.field(factory=GlobalKeymap)
    main: MainKeymap = attrs.field(factory=MainKeymap)
    editor: EditorKeymap = attrs.field(factory=EditorKeymap)
    note_editor: NoteEditorKeymap = attrs.field(factory=NoteEditorKeymap)
    settings_modal: SettingsModalKeymap = attrs.field(factory=SettingsModalKeymap)

    def contexts(self) -> tuple[KeymapContext, ...]:
        """The five contexts in file order."""
        return (self.global_, self.main, self.editor, self.note_editor, self.settings_modal)

    def context(self, name: str) -> KeymapContext:
        """A context by its JSON name (``noteEditor``); KeyError when unknown."""
        for context in self.contexts():
            if name == context.CONTEXT:
                return context
        raise KeyError(name)

    def bindings(self, context: str, action: str) -> Binding:
        """The keys of ``context.action`` (JSON names)."""
        return self.context(context).bindings(action)

    def to_json(self) -> dict[str, JSON]:
        return {context.CONTEXT: context.to_json() for context in self.contexts()}

    @classmethod
    def from_json(cls, data: JSON) -> Keymaps:
        """Read and validate a context-shaped ``keymaps`` object.

        Every context and action must be present (unknown ones are ignored); keys are
        normalised; a key may appear once per context; global keys may not appear in main,
        editor or noteEditor; reserved keys cannot be bound. Raises
        :class:`InvalidKeymapsError` with the first problem found, in file order.
        """
        if not is_object(data):
            raise InvalidKeymapsError("keymaps must be an object.")
        built: list[KeymapContext] = []
        for kind in _CONTEXT_TYPES:
            name = kind.CONTEXT
            section = data.get(name)
            if name not in data:
                raise InvalidKeymapsError(f'Missing keymap context "{name}".')
            if not is_object(section):
                raise InvalidKeymapsError(f'Keymap context "{name}" must be an object.')
            values: dict[str, Binding] = {}
            seen: dict[str, str] = {}
            for field in attrs.fields(cast(Any, kind)):
                action = camel(field.name)
                where = f"{name}.{action}"
                if action not in section:
                    raise InvalidKeymapsError(f'Missing keymap action "{where}".')
                keys = _keys_of(section[action], where)
                for key in keys:
                    why = reserved_reason(name, key)
                    if why is not None:
                        raise InvalidKeymapsError(f'Key "{key}" in "{where}" is reserved: {why}.')
                    if key in seen:
                        raise InvalidKeymapsError(
                            f'Duplicate key "{key}" in keymap context "{name}": '
                            f'"{seen[key]}" and "{where}".'
                        )
                    seen[key] = where
                values[field.name] = keys
            built.append(kind(**values))
        keymaps = cls(*cast(Any, built))
        for action, keys in keymaps.global_.actions():
            for key in keys:
                for scoped in _GLOBAL_SCOPED:
                    other = keymaps.context(scoped).action_for_key(key)
                    if other is not None:
                        raise InvalidKeymapsError(
                            f'Global key "{key}" of "global.{action}" overlaps "{scoped}.{other}".'
                        )
        return keymaps


def keymaps_fallback_notice(reason: str) -> str:
    """The notice shown when the keymaps section is replaced by the defaults."""
    return f"{reason} {_KEYMAPS_NOTICE_SUFFIX}"
