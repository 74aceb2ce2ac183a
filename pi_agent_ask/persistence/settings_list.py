"""The ask settings overlay as a pure model: state, commands, a reducer, effects and a view.

The overlay (``?`` in a form, ``/ask-settings``) lists six binary settings and a guarded reset
action. Rules, stated once:

- Toggling a setting shows the new value at once and asks the shell to save the whole config
  (effect :class:`SaveConfig`). The shell reports :class:`SaveSucceeded` or :class:`SaveFailed`;
  a failure reverts to the last config known to be saved and shows the error text.
- The reset action needs two presses of the toggle binding within
  :data:`RESET_CONFIRMATION_SECONDS`: the first arms it (its value reads ``confirm reset``),
  the second resets. Moving the focus disarms it. The time is an argument of the reducer
  (``now``, any monotonic seconds); nothing here reads a clock.
- Reset restores the defaults of behaviour toggles, keymaps and notifications. It keeps
  ``behaviour.questionMode`` and ``behaviour.historyTools`` (they change the tools the agent
  sees and have their own paths: ``/ask-mode``, editing the file and reloading) and
  ``trustedProjects`` (trust is edited by hand only).
- The model edits the *global* config (``LoadedSettings.global_config``), never the effective
  one, so a project's question mode is never written into the global file.

No I/O here except :func:`save_command`, a convenience for the shell that performs one
:class:`SaveConfig` effect.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import attrs

from pi_agent_ask.form.fieldless import Fieldless
from pi_agent_ask.persistence.keys import format_key
from pi_agent_ask.persistence.settings import (
    Behaviour,
    Config,
    Keymaps,
    Notifications,
    SettingsSaveError,
    save_settings,
)

__all__ = [
    "LIVE_SETTINGS",
    "RESET_CONFIRMATION_SECONDS",
    "SETTING_ITEMS",
    "TITLE",
    "Activate",
    "Close",
    "CloseSettings",
    "ConfigChanged",
    "MoveFocus",
    "SaveConfig",
    "SaveFailed",
    "SaveSucceeded",
    "SettingItem",
    "SettingsListState",
    "SettingsRow",
    "SettingsView",
    "command_for_key",
    "open_settings_list",
    "reduce",
    "reset_config",
    "save_command",
    "setting_value",
    "settings_view",
    "with_setting",
]

RESET_CONFIRMATION_SECONDS = 2.0
"""How long an armed reset waits for its second press."""

TITLE = "pi-agent-ask"
PATH_HINT = "Edit this config file to customize keymaps and notifications:"

LIVE_SETTINGS = "Live settings"
FUTURE_SETTINGS = "Defaults for future asks"
ACTIONS = "Actions"

SettingKey = Literal[
    "autoSubmitWhenAnsweredWithoutNotes",
    "confirmDismissWhenDirty",
    "doublePressReviewShortcuts",
    "notifications.enabled",
    "showFooterHints",
    "presentSingleAsMulti",
    "resetConfig",
]


@attrs.frozen(repr=False)
class SettingItem:
    """One row of the list: what it is, where it is grouped, what it says."""

    key: SettingKey
    label: str
    section: str
    description: str
    kind: Literal["toggle", "action"] = "toggle"


SETTING_ITEMS: tuple[SettingItem, ...] = (
    SettingItem(
        "autoSubmitWhenAnsweredWithoutNotes",
        "Auto-submit when answered without notes",
        LIVE_SETTINGS,
        "Auto-submit completed ask flows when no question or option notes were added.",
    ),
    SettingItem(
        "confirmDismissWhenDirty",
        "Confirm dismiss when dirty",
        LIVE_SETTINGS,
        "Require a second cancel or dismiss action before discarding answered or drafted ask "
        "content.",
    ),
    SettingItem(
        "doublePressReviewShortcuts",
        "Double-press review shortcuts",
        LIVE_SETTINGS,
        "Require pressing 1 or 2 twice on the review tab before triggering Submit or Cancel.",
    ),
    SettingItem(
        "notifications.enabled",
        "Notifications",
        LIVE_SETTINGS,
        "Emit one external notification when the ask flow opens and waits for input.",
    ),
    SettingItem(
        "showFooterHints",
        "Show footer hints",
        LIVE_SETTINGS,
        "Show footer keymap hints at the bottom of the ask flow.",
    ),
    SettingItem(
        "presentSingleAsMulti",
        "Present single-select as multi-select",
        FUTURE_SETTINGS,
        "Default new and recovered ask flows to render single-select questions as "
        "multi-select. This is not hot-applied to the current flow; use the type hotkey there.",
    ),
    SettingItem(
        "resetConfig",
        "Reset config to defaults",
        ACTIONS,
        "Reset behaviour, keymaps, and notifications to defaults; question mode, history tools "
        "and trusted projects are kept. Press twice quickly to confirm.",
        kind="action",
    ),
)

_BEHAVIOUR_FIELDS: dict[str, str] = {
    "autoSubmitWhenAnsweredWithoutNotes": "auto_submit_when_answered_without_notes",
    "confirmDismissWhenDirty": "confirm_dismiss_when_dirty",
    "doublePressReviewShortcuts": "double_press_review_shortcuts",
    "showFooterHints": "show_footer_hints",
    "presentSingleAsMulti": "present_single_as_multi",
}


def setting_value(config: Config, key: SettingKey) -> bool:
    """The current value of a toggle."""
    if key == "notifications.enabled":
        return config.notifications.enabled
    return bool(getattr(config.behaviour, _BEHAVIOUR_FIELDS[key]))


def with_setting(config: Config, key: SettingKey, value: bool) -> Config:
    """``config`` with one toggle set."""
    if key == "notifications.enabled":
        return attrs.evolve(config, notifications=attrs.evolve(config.notifications, enabled=value))
    field = _BEHAVIOUR_FIELDS[key]
    # The field name is looked up at run time, so evolve cannot check this keyword statically.
    changes: dict[str, Any] = {field: value}
    return attrs.evolve(config, behaviour=attrs.evolve(config.behaviour, **changes))


def reset_config(config: Config) -> Config:
    """The defaults, keeping question mode, history tools and trusted projects."""
    return Config(
        behaviour=Behaviour(
            history_tools=config.behaviour.history_tools,
            question_mode=config.behaviour.question_mode,
        ),
        keymaps=Keymaps(),
        notifications=Notifications(),
        trusted_projects=config.trusted_projects,
    )


# --------------------------------------------------------------------------------------------
# Commands and effects
# --------------------------------------------------------------------------------------------


@attrs.frozen(repr=False)
class MoveFocus:
    """Move the highlight by ``delta`` rows, wrapping around."""

    delta: int


class Activate(Fieldless):
    """The toggle binding on the highlighted row."""


class Close(Fieldless):
    """The close binding."""


@attrs.frozen(repr=False)
class SaveSucceeded:
    """The shell saved ``config``."""

    config: Config


@attrs.frozen(repr=False)
class SaveFailed:
    """The shell could not save ``config``; ``message`` is the text to show."""

    config: Config
    message: str


@attrs.frozen(repr=False)
class ConfigChanged:
    """The config changed outside the overlay (reload, another surface saved it)."""

    config: Config


SettingsCommand = MoveFocus | Activate | Close | SaveSucceeded | SaveFailed | ConfigChanged


@attrs.frozen(repr=False)
class SaveConfig:
    """Effect: write ``config`` to the settings file, then report the outcome."""

    config: Config


class CloseSettings(Fieldless):
    """Effect: close the overlay (and give focus back to where it was)."""


SettingsEffect = SaveConfig | CloseSettings


# --------------------------------------------------------------------------------------------
# State and reducer
# --------------------------------------------------------------------------------------------


@attrs.frozen(repr=False)
class SettingsListState:
    """The overlay's state.

    Invariant: ``config`` is ``saved_config`` with the changes of the saves still in flight
    (``saves_in_flight`` of them); when none is in flight the two are equal.
    """

    config: Config
    saved_config: Config
    config_path: str
    focus: int = 0
    reset_armed_until: float | None = None
    saves_in_flight: int = 0
    error: str | None = None
    notices: tuple[str, ...] = ()
    closed: bool = False

    def reset_armed(self, now: float) -> bool:
        """Whether a press of the reset action at ``now`` resets (the first press armed it)."""
        return self.reset_armed_until is not None and now <= self.reset_armed_until


def open_settings_list(
    config: Config, config_path: str | os.PathLike[str], *, notices: tuple[str, ...] = ()
) -> SettingsListState:
    """A fresh overlay on the global ``config``; ``notices`` are the load notices to show."""
    return SettingsListState(
        config=config,
        saved_config=config,
        config_path=str(Path(config_path).absolute()),
        notices=notices,
    )


Transition = tuple[SettingsListState, tuple[SettingsEffect, ...]]


def _save(state: SettingsListState, config: Config) -> Transition:
    next_state = attrs.evolve(
        state,
        config=config,
        saves_in_flight=state.saves_in_flight + 1,
        error=None,
        reset_armed_until=None,
    )
    return next_state, (SaveConfig(config),)


def reduce(state: SettingsListState, command: SettingsCommand, now: float) -> Transition:
    """Apply one command at time ``now`` (seconds, monotonic); return the state and effects."""
    match command:
        case SaveSucceeded(config=config):
            in_flight = max(0, state.saves_in_flight - 1)
            shown = config if in_flight == 0 else state.config
            return attrs.evolve(
                state, config=shown, saved_config=config, saves_in_flight=in_flight, notices=()
            ), ()
        case SaveFailed(message=message):
            in_flight = max(0, state.saves_in_flight - 1)
            return attrs.evolve(
                state, config=state.saved_config, saves_in_flight=in_flight, error=message
            ), ()
        case ConfigChanged(config=config):
            shown = config if state.saves_in_flight == 0 else state.config
            return attrs.evolve(state, config=shown, saved_config=config), ()
        case _ if state.closed:
            return state, ()
        case Close():
            return attrs.evolve(state, closed=True, reset_armed_until=None), (CloseSettings(),)
        case MoveFocus(delta=delta):
            focus = (state.focus + delta) % len(SETTING_ITEMS)
            return attrs.evolve(state, focus=focus, reset_armed_until=None), ()
        case Activate():
            item = SETTING_ITEMS[state.focus]
            if item.kind == "action":
                if state.reset_armed(now):
                    return _save(state, reset_config(state.config))
                armed = now + RESET_CONFIRMATION_SECONDS
                return attrs.evolve(state, reset_armed_until=armed), ()
            toggled = with_setting(
                state.config, item.key, not setting_value(state.config, item.key)
            )
            return _save(state, toggled)
    # A command outside SettingsCommand (only possible untyped) changes nothing.
    return state, ()  # type: ignore[unreachable]


def command_for_key(keymaps: Keymaps, key: str) -> SettingsCommand | None:
    """The command a canonical key id means in the overlay, by ``keymaps.settingsModal``.

    Close wins over movement, movement over toggle, when a key is in several lists.
    """
    bindings = keymaps.settings_modal
    if key in bindings.close:
        return Close()
    if key in bindings.previous_option:
        return MoveFocus(-1)
    if key in bindings.next_option:
        return MoveFocus(1)
    if key in bindings.toggle:
        return Activate()
    return None


def save_command(path: str | os.PathLike[str], effect: SaveConfig) -> SaveSucceeded | SaveFailed:
    """Perform a :class:`SaveConfig` effect (blocking file I/O) and say how it went."""
    try:
        save_settings(path, effect.config)
    except SettingsSaveError as error:
        return SaveFailed(effect.config, str(error))
    return SaveSucceeded(effect.config)


# --------------------------------------------------------------------------------------------
# View
# --------------------------------------------------------------------------------------------


@attrs.frozen(repr=False)
class SettingsRow:
    """One rendered row: a toggle shows ``on``/``off``; the reset action ``reset all`` or
    ``confirm reset`` while armed."""

    key: SettingKey
    label: str
    section: str
    kind: Literal["toggle", "action"]
    value: str
    selected: bool

    @property
    def bracketed(self) -> str:
        return f"[{self.value}]"


@attrs.frozen(repr=False)
class SettingsView:
    """Everything the overlay shows, in order."""

    title: str
    path_hint: str
    config_path: str
    rows: tuple[SettingsRow, ...]
    description: str
    notices: tuple[str, ...]
    error: str | None
    footer: str

    def sections(self) -> tuple[tuple[str, tuple[SettingsRow, ...]], ...]:
        """Rows grouped by section, in order."""
        groups: list[tuple[str, list[SettingsRow]]] = []
        for row in self.rows:
            if not groups or groups[-1][0] != row.section:
                groups.append((row.section, []))
            groups[-1][1].append(row)
        return tuple((name, tuple(rows)) for name, rows in groups)


def settings_view(state: SettingsListState, now: float) -> SettingsView:
    """The view of ``state`` at time ``now`` (the armed reset expires with time)."""
    rows = []
    for index, item in enumerate(SETTING_ITEMS):
        if item.kind == "action":
            value = "confirm reset" if state.reset_armed(now) else "reset all"
        else:
            value = "on" if setting_value(state.config, item.key) else "off"
        rows.append(
            SettingsRow(item.key, item.label, item.section, item.kind, value, index == state.focus)
        )
    close_keys = " / ".join(format_key(key) for key in state.config.keymaps.settings_modal.close)
    return SettingsView(
        title=TITLE,
        path_hint=PATH_HINT,
        config_path=state.config_path,
        rows=tuple(rows),
        description=SETTING_ITEMS[state.focus].description,
        notices=state.notices,
        error=state.error,
        footer=f"{close_keys} to close" if close_keys else "",
    )
