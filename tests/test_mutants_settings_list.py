"""Settings overlay behaviour the other suites left unpinned, found by mutation testing
(``docs/mutation-persistence.md``): saves finishing out of order or after a failure, a change
from outside while a save is in flight, closing disarms the reset, what a failed save names,
the rows' keys, and the footer without close keys.
"""

from __future__ import annotations

from pathlib import Path

from pi_agent_ask.persistence.settings import Config, Keymaps, SettingsModalKeymap
from pi_agent_ask.persistence.settings_list import (
    SETTING_ITEMS,
    Activate,
    Close,
    ConfigChanged,
    MoveFocus,
    SaveConfig,
    SaveFailed,
    SaveSucceeded,
    SettingsListState,
    open_settings_list,
    reduce,
    save_command,
    settings_view,
)


def fresh(tmp_path: Path) -> SettingsListState:
    return open_settings_list(Config(), tmp_path / "pi-agent-ask.json")


def toggle(state: SettingsListState) -> tuple[SettingsListState, Config]:
    state, effects = reduce(state, Activate(), 0.0)
    [effect] = effects
    assert isinstance(effect, SaveConfig)
    return state, effect.config


def test_the_first_of_two_saves_succeeding_keeps_the_second_shown(tmp_path: Path) -> None:
    state, first = toggle(fresh(tmp_path))
    state, second = toggle(state)
    assert second != first and state.saves_in_flight == 2
    state, _ = reduce(state, SaveSucceeded(first), 0.0)
    assert (state.config, state.saved_config, state.saves_in_flight) == (second, first, 1)
    state, _ = reduce(state, SaveSucceeded(second), 0.0)
    assert (state.config, state.saved_config, state.saves_in_flight) == (second, second, 0)


def test_a_save_succeeding_after_a_failed_one_shows_what_it_saved(tmp_path: Path) -> None:
    state, first = toggle(fresh(tmp_path))
    state, _ = reduce(state, MoveFocus(1), 0.0)
    state, second = toggle(state)  # both settings changed: neither the old nor the first
    assert second not in (Config(), first)
    state, _ = reduce(state, SaveFailed(first, "disk full"), 0.0)
    assert (state.config, state.error, state.saves_in_flight) == (Config(), "disk full", 1)
    state, _ = reduce(state, SaveSucceeded(second), 0.0)
    assert (state.config, state.saved_config, state.saves_in_flight) == (second, second, 0)


def test_a_change_from_outside_while_a_save_is_in_flight_keeps_the_shown_config(
    tmp_path: Path,
) -> None:
    state, mine = toggle(fresh(tmp_path))
    theirs = Config(trusted_projects=("/elsewhere",))
    state, _ = reduce(state, ConfigChanged(theirs), 0.0)
    assert (state.config, state.saved_config) == (mine, theirs)
    state, _ = reduce(state, SaveSucceeded(mine), 0.0)
    state, _ = reduce(state, ConfigChanged(theirs), 0.0)
    assert (state.config, state.saved_config) == (theirs, theirs)


def test_closing_disarms_the_reset(tmp_path: Path) -> None:
    state = fresh(tmp_path)
    state, _ = reduce(state, MoveFocus(-1), 0.0)  # up from the first row: the reset action
    state, _ = reduce(state, Activate(), 0.0)
    assert state.reset_armed(0.1)
    state, _ = reduce(state, Close(), 0.1)
    assert state.closed and state.reset_armed_until is None and not state.reset_armed(0.2)


def test_a_failed_save_names_the_config_it_could_not_save(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    config = Config(trusted_projects=("/p",))
    outcome = save_command(blocker / "pi-agent-ask.json", SaveConfig(config))
    assert isinstance(outcome, SaveFailed)
    assert outcome.config == config and str(blocker) in outcome.message


def test_rows_carry_their_setting_keys(tmp_path: Path) -> None:
    rows = settings_view(fresh(tmp_path), 0.0).rows
    assert [row.key for row in rows] == [item.key for item in SETTING_ITEMS]


def test_the_footer_is_empty_when_nothing_closes_the_overlay(tmp_path: Path) -> None:
    keymaps = Keymaps(settings_modal=SettingsModalKeymap(close=()))
    state = open_settings_list(Config(keymaps=keymaps), tmp_path / "pi-agent-ask.json")
    assert settings_view(state, 0.0).footer == ""
    assert settings_view(fresh(tmp_path), 0.0).footer.endswith(" to close")
