"""The settings overlay model: rows, toggles with save and revert, the guarded reset, keys."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pi_agent_ask.persistence.settings import (
    Behaviour,
    CommandChannel,
    Config,
    Keymaps,
    Notifications,
    SettingsModalKeymap,
    load_settings,
)
from pi_agent_ask.persistence.settings_list import (
    RESET_CONFIRMATION_SECONDS,
    SETTING_ITEMS,
    Activate,
    Close,
    CloseSettings,
    ConfigChanged,
    MoveFocus,
    SaveConfig,
    SaveFailed,
    SaveSucceeded,
    SettingsCommand,
    SettingsListState,
    command_for_key,
    open_settings_list,
    reduce,
    reset_config,
    save_command,
    settings_view,
)

LABELS = (
    "Auto-submit when answered without notes",
    "Confirm dismiss when dirty",
    "Double-press review shortcuts",
    "Notifications",
    "Show footer hints",
    "Present single-select as multi-select",
    "Reset config to defaults",
)
RESET = len(SETTING_ITEMS) - 1


def fresh(tmp_path: Path, config: Config | None = None) -> SettingsListState:
    return open_settings_list(config or Config(), tmp_path / "pi-agent-ask.json")


def values(state: SettingsListState, now: float = 0.0) -> list[str]:
    return [row.value for row in settings_view(state, now).rows]


def focus_reset(state: SettingsListState) -> SettingsListState:
    # Up from the first row wraps to the last one, the reset action.
    state, effects = reduce(state, MoveFocus(-1), 0.0)
    assert effects == ()
    assert state.focus == RESET
    return state


# --------------------------------------------------------------------------------------------
# Rows and view
# --------------------------------------------------------------------------------------------


def test_rows_labels_and_groups(tmp_path: Path) -> None:
    view = settings_view(fresh(tmp_path), 0.0)

    assert tuple(row.label for row in view.rows) == LABELS
    assert [(name, [row.label for row in rows]) for name, rows in view.sections()] == [
        ("Live settings", list(LABELS[:5])),
        ("Defaults for future asks", ["Present single-select as multi-select"]),
        ("Actions", ["Reset config to defaults"]),
    ]
    assert [row.kind for row in view.rows] == ["toggle"] * 6 + ["action"]


def test_view_of_the_defaults(tmp_path: Path) -> None:
    state = open_settings_list(Config(), tmp_path / "ext" / "pi-agent-ask.json")
    view = settings_view(state, 0.0)

    assert view.title == "pi-agent-ask"
    assert view.path_hint == "Edit this config file to customize keymaps and notifications:"
    assert view.config_path == str(tmp_path / "ext" / "pi-agent-ask.json")
    assert [row.bracketed for row in view.rows] == [
        "[off]",
        "[on]",
        "[on]",
        "[on]",
        "[on]",
        "[off]",
        "[reset all]",
    ]
    assert [row.selected for row in view.rows] == [True] + [False] * 6
    assert view.description == (
        "Auto-submit completed ask flows when no question or option notes were added."
    )
    assert view.footer == "Esc / Ctrl+C / ? to close"
    assert view.error is None
    assert view.notices == ()


def test_relative_config_path_is_shown_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    state = open_settings_list(Config(), "pi-agent-ask.json")
    assert settings_view(state, 0.0).config_path == str(tmp_path / "pi-agent-ask.json")


def test_footer_follows_the_close_keymap(tmp_path: Path) -> None:
    keymaps = attrs.evolve(Keymaps(), settings_modal=SettingsModalKeymap(close=("q", "ctrl+g")))
    state = fresh(tmp_path, Config(keymaps=keymaps))
    assert settings_view(state, 0.0).footer == "q / Ctrl+G to close"


def test_focus_moves_and_wraps(tmp_path: Path) -> None:
    state = fresh(tmp_path)
    state, _ = reduce(state, MoveFocus(1), 0.0)
    state, _ = reduce(state, MoveFocus(1), 0.0)
    assert state.focus == 2
    assert settings_view(state, 0.0).description == (
        "Require pressing 1 or 2 twice on the review tab before triggering Submit or Cancel."
    )
    state, _ = reduce(state, MoveFocus(len(SETTING_ITEMS)), 0.0)
    assert state.focus == 2
    state, _ = reduce(state, MoveFocus(-3), 0.0)
    assert state.focus == RESET


# --------------------------------------------------------------------------------------------
# Toggles: save, success, failure
# --------------------------------------------------------------------------------------------


def test_each_toggle_flips_its_setting_and_asks_to_save(tmp_path: Path) -> None:
    expected = [
        Config(behaviour=Behaviour(auto_submit_when_answered_without_notes=True)),
        Config(behaviour=Behaviour(confirm_dismiss_when_dirty=False)),
        Config(behaviour=Behaviour(double_press_review_shortcuts=False)),
        Config(notifications=Notifications(enabled=False)),
        Config(behaviour=Behaviour(show_footer_hints=False)),
        Config(behaviour=Behaviour(present_single_as_multi=True)),
    ]
    for index, config in enumerate(expected):
        state = attrs.evolve(fresh(tmp_path), focus=index)

        state, effects = reduce(state, Activate(), 0.0)

        assert effects == (SaveConfig(config),)
        assert state.config == config
        assert state.saved_config == Config()
        before = values(fresh(tmp_path))[index]
        assert values(state)[index] == {"on": "off", "off": "on"}[before]

        state, effects = reduce(state, SaveSucceeded(config), 0.0)
        assert effects == ()
        assert state.config == state.saved_config == config
        assert state.saves_in_flight == 0


def test_toggle_saves_to_the_real_file(tmp_path: Path) -> None:
    path = tmp_path / "extensions" / "pi-agent-ask.json"
    loaded = load_settings(path)
    state = open_settings_list(loaded.global_config, path, notices=loaded.notices)
    state = attrs.evolve(state, focus=4)  # Show footer hints

    state, (effect,) = reduce(state, Activate(), 0.0)
    assert isinstance(effect, SaveConfig)
    outcome = save_command(path, effect)
    state, _ = reduce(state, outcome, 0.0)

    assert outcome == SaveSucceeded(Config(behaviour=Behaviour(show_footer_hints=False)))
    assert json.loads(path.read_text(encoding="utf-8"))["behaviour"]["showFooterHints"] is False
    assert load_settings(path).config.behaviour.show_footer_hints is False
    assert values(state)[4] == "off"


def test_failed_save_reverts_and_shows_the_error(tmp_path: Path) -> None:
    blocker = tmp_path / "agent"
    blocker.write_text("not a directory", encoding="utf-8")
    path = blocker / "extensions" / "pi-agent-ask.json"
    state = open_settings_list(Config(), path)

    state, (effect,) = reduce(state, Activate(), 0.0)
    assert isinstance(effect, SaveConfig)
    assert values(state)[0] == "on"
    outcome = save_command(path, effect)
    assert isinstance(outcome, SaveFailed)
    state, _ = reduce(state, outcome, 0.0)

    assert state.config == Config()
    assert values(state)[0] == "off"
    view = settings_view(state, 0.0)
    assert view.error == outcome.message
    assert view.error.startswith(
        f"Unable to save ask config at {path}. The file may be read-only or managed outside "
        "pi-agent-ask; edit it by hand (read again at the next start). "
    )
    # The next attempt clears the error.
    state, _ = reduce(state, Activate(), 0.0)
    assert state.error is None


def test_failure_reverts_to_the_last_saved_config_with_saves_in_flight(tmp_path: Path) -> None:
    state = fresh(tmp_path)
    state, (first,) = reduce(state, Activate(), 0.0)  # auto-submit on
    state, _ = reduce(state, MoveFocus(1), 0.0)
    state, (second,) = reduce(state, Activate(), 0.0)  # confirm dismiss off
    assert isinstance(first, SaveConfig)
    assert isinstance(second, SaveConfig)
    assert state.saves_in_flight == 2

    state, _ = reduce(state, SaveSucceeded(first.config), 0.0)
    assert state.config == second.config  # still showing the pending change
    state, _ = reduce(state, SaveFailed(second.config, "disk full"), 0.0)

    assert state.config == first.config
    assert state.error == "disk full"
    assert state.saves_in_flight == 0


def test_load_notices_show_until_a_save_succeeds(tmp_path: Path) -> None:
    state = open_settings_list(Config(), tmp_path / "x.json", notices=("Config was invalid.",))
    assert settings_view(state, 0.0).notices == ("Config was invalid.",)
    state, (effect,) = reduce(state, Activate(), 0.0)
    assert isinstance(effect, SaveConfig)
    state, _ = reduce(state, SaveSucceeded(effect.config), 0.0)
    assert settings_view(state, 0.0).notices == ()


def test_outside_change_is_shown(tmp_path: Path) -> None:
    state = fresh(tmp_path)
    changed = Config(behaviour=Behaviour(show_footer_hints=False))
    state, effects = reduce(state, ConfigChanged(changed), 0.0)
    assert effects == ()
    assert state.config == state.saved_config == changed


# --------------------------------------------------------------------------------------------
# Reset
# --------------------------------------------------------------------------------------------


def customised() -> Config:
    return Config(
        behaviour=Behaviour(
            auto_submit_when_answered_without_notes=True,
            show_footer_hints=False,
            present_single_as_multi=True,
            history_tools=True,
            question_mode="background-only",
        ),
        keymaps=attrs.evolve(Keymaps(), settings_modal=SettingsModalKeymap(close=("q",))),
        notifications=Notifications(enabled=False, channels=(CommandChannel("say hi"),)),
        trusted_projects=("/work/project",),
    )


def test_reset_needs_a_second_press_within_the_window(tmp_path: Path) -> None:
    state = focus_reset(fresh(tmp_path, customised()))

    state, effects = reduce(state, Activate(), 10.0)
    assert effects == ()
    assert state.config == customised()
    assert settings_view(state, 10.0).rows[RESET].bracketed == "[confirm reset]"
    assert settings_view(state, 11.0).rows[RESET].value == "confirm reset"

    state, effects = reduce(state, Activate(), 10.0 + RESET_CONFIRMATION_SECONDS)

    assert effects == (SaveConfig(reset_config(customised())),)
    assert settings_view(state, 12.0).rows[RESET].value == "reset all"
    assert values(state)[:6] == ["off", "on", "on", "on", "on", "off"]


def test_reset_keeps_mode_history_tools_and_trust() -> None:
    reset = reset_config(customised())
    assert reset == Config(
        behaviour=Behaviour(history_tools=True, question_mode="background-only"),
        trusted_projects=("/work/project",),
    )
    assert reset.keymaps == Keymaps()
    assert reset.notifications == Notifications()


def test_a_late_second_press_arms_again(tmp_path: Path) -> None:
    state = focus_reset(fresh(tmp_path, customised()))
    state, _ = reduce(state, Activate(), 10.0)
    late = 10.0 + RESET_CONFIRMATION_SECONDS + 0.5
    assert settings_view(state, late).rows[RESET].value == "reset all"

    state, effects = reduce(state, Activate(), late)
    assert effects == ()
    assert settings_view(state, late).rows[RESET].value == "confirm reset"

    state, effects = reduce(state, Activate(), late + 1.0)
    assert effects == (SaveConfig(reset_config(customised())),)


def test_moving_away_disarms_the_reset(tmp_path: Path) -> None:
    state = focus_reset(fresh(tmp_path, customised()))
    state, _ = reduce(state, Activate(), 10.0)
    state, _ = reduce(state, MoveFocus(1), 10.1)
    state, _ = reduce(state, MoveFocus(-1), 10.2)
    assert state.focus == RESET
    assert settings_view(state, 10.3).rows[RESET].value == "reset all"

    state, effects = reduce(state, Activate(), 10.3)
    assert effects == ()  # armed again, not reset


def test_failed_reset_reverts(tmp_path: Path) -> None:
    state = focus_reset(fresh(tmp_path, customised()))
    state, _ = reduce(state, Activate(), 0.0)
    state, (effect,) = reduce(state, Activate(), 1.0)
    assert isinstance(effect, SaveConfig)
    state, _ = reduce(state, SaveFailed(effect.config, "read-only"), 1.1)
    assert state.config == customised()
    assert state.error == "read-only"


# --------------------------------------------------------------------------------------------
# Keys and closing
# --------------------------------------------------------------------------------------------


def test_default_keys() -> None:
    keymaps = Keymaps()
    assert command_for_key(keymaps, "esc") == Close()
    assert command_for_key(keymaps, "ctrl+c") == Close()
    assert command_for_key(keymaps, "?") == Close()
    assert command_for_key(keymaps, "up") == MoveFocus(-1)
    assert command_for_key(keymaps, "down") == MoveFocus(1)
    assert command_for_key(keymaps, "enter") == Activate()
    assert command_for_key(keymaps, "space") == Activate()
    assert command_for_key(keymaps, "x") is None


def test_configured_keys() -> None:
    keymaps = attrs.evolve(
        Keymaps(),
        settings_modal=SettingsModalKeymap(
            close=("q",), next_option=("j",), previous_option=("k",), toggle=("t",)
        ),
    )
    assert command_for_key(keymaps, "q") == Close()
    assert command_for_key(keymaps, "j") == MoveFocus(1)
    assert command_for_key(keymaps, "k") == MoveFocus(-1)
    assert command_for_key(keymaps, "t") == Activate()
    assert command_for_key(keymaps, "esc") is None


def test_close_emits_once_and_then_ignores_input(tmp_path: Path) -> None:
    state, effects = reduce(fresh(tmp_path), Close(), 0.0)
    assert effects == (CloseSettings(),)
    assert state.closed

    for command in (Close(), Activate(), MoveFocus(1)):
        after, effects = reduce(state, command, 0.0)
        assert effects == ()
        assert after == state


def test_save_outcome_after_close_is_still_recorded(tmp_path: Path) -> None:
    state, (effect,) = reduce(fresh(tmp_path), Activate(), 0.0)
    assert isinstance(effect, SaveConfig)
    state, _ = reduce(state, Close(), 0.0)
    state, _ = reduce(state, SaveSucceeded(effect.config), 0.0)
    assert state.saved_config == effect.config
    assert state.saves_in_flight == 0


# --------------------------------------------------------------------------------------------
# Property: under any interleaving, the shown config settles on the saved one
# --------------------------------------------------------------------------------------------

user_commands = st.sampled_from([MoveFocus(1), MoveFocus(-1), Activate(), Close()])
steps = st.lists(
    st.one_of(
        st.tuples(st.just("user"), user_commands),
        st.tuples(st.just("complete"), st.booleans()),
        st.tuples(st.just("wait"), st.floats(0.0, 3.0)),
    ),
    max_size=40,
)


@given(steps)
def test_shown_config_settles_on_the_saved_one(script: list[tuple[str, object]]) -> None:
    state = open_settings_list(Config(), "/tmp/pi-agent-ask.json")
    now = 0.0
    pending: list[Config] = []  # saves the shell has been asked to perform, in order
    on_disk = Config()
    for kind, value in script:
        if kind == "wait":
            assert isinstance(value, float)
            now += value
            continue
        command: SettingsCommand
        if kind == "user":
            assert isinstance(value, MoveFocus | Activate | Close)
            command = value
        elif pending:
            attempted = pending.pop(0)
            if value:
                on_disk = attempted
                command = SaveSucceeded(attempted)
            else:
                command = SaveFailed(attempted, "failed")
        else:
            continue
        was_closed = state.closed
        state, effects = reduce(state, command, now)
        for effect in effects:
            if isinstance(effect, SaveConfig):
                assert not was_closed
                pending.append(effect.config)
        assert 0 <= state.focus < len(SETTING_ITEMS)
        assert state.saves_in_flight == len(pending)
        assert state.saved_config == on_disk
        if not pending:
            assert state.config == state.saved_config
