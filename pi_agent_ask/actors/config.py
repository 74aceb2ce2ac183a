"""The runtime's configuration: read from the settings, the tools the question mode exposes,
settings applied live, and ``/ask-mode`` (``set_question_mode``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from pi_agent_ask.actors import queue as q
from pi_agent_ask.actors.core import RuntimeConfig, RuntimeCore
from pi_agent_ask.actors.form import SettingsUpdate
from pi_agent_ask.actors.notifications import channels_from_json
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.tools import tool_definitions_for


def config_from_settings(loaded: Any) -> RuntimeConfig:
    """The runtime's view of loaded settings (``persistence.settings.LoadedSettings``)."""
    behaviour = loaded.config.behaviour
    notifications = loaded.config.notifications
    return RuntimeConfig(
        form_settings=fs.FormSettings(
            auto_submit_when_answered_without_notes=behaviour.auto_submit_when_answered_without_notes,
            confirm_dismiss_when_dirty=behaviour.confirm_dismiss_when_dirty,
            double_press_review_shortcuts=behaviour.double_press_review_shortcuts,
        ),
        present_single_as_multi=behaviour.present_single_as_multi,
        background_only=behaviour.question_mode == "background-only",
        history_tools=behaviour.history_tools,
        notifications_enabled=notifications.enabled,
        notification_channels=channels_from_json(notifications.to_json()["channels"]),
    )


def tool_names(config: RuntimeConfig) -> tuple[str, ...]:
    """The names of the tools ``config`` exposes."""
    names = ["ask_user"]
    if not config.background_only:
        names.append("wait_for_answers")
    if config.history_tools:
        names += ["list_ask_history", "read_ask_history", "export_ask_history"]
    return tuple(names)


def tool_definitions(config: RuntimeConfig) -> list[dict[str, Any]]:
    """The definitions of the tools ``config`` exposes."""
    return tool_definitions_for(
        question_mode="background-only" if config.background_only else "standard",
        history_tools=config.history_tools,
    )


def apply_settings(rt: RuntimeCore, loaded: Any) -> None:
    """Apply loaded settings live (``Runtime.apply_settings``): the question mode and the
    history tools keep their values."""
    fresh = config_from_settings(loaded)
    rt.config = attrs.evolve(
        fresh,
        background_only=rt.config.background_only,
        history_tools=rt.config.history_tools,
    )
    rt.settings = loaded
    if not rt._disposed:  # disposed: no form is open any more to push them to
        rt._nursery.start_soon(_push_form_settings, rt, rt.config.form_settings)


async def _push_form_settings(rt: RuntimeCore, settings: fs.FormSettings) -> None:
    await rt._tell_visible(SettingsUpdate(settings))


async def set_question_mode(
    rt: RuntimeCore,
    mode: str,
    *,
    confirm: Callable[[str], Awaitable[bool]] | None = None,
) -> bool:
    """Switch the question mode (``Runtime.set_question_mode``)."""
    from pi_agent_ask.persistence.settings import SettingsSaveError, save_settings

    if mode not in ("standard", "background-only"):
        raise ValueError(f"question mode must be 'standard' or 'background-only', not {mode!r}")
    loaded = rt.settings
    behaviour = attrs.evolve(loaded.global_config.behaviour, question_mode=mode)
    global_config = attrs.evolve(loaded.global_config, behaviour=behaviour)
    updated = loaded.with_global_config(global_config)
    background_only = updated.config.behaviour.question_mode == "background-only"
    changes_tools = background_only != rt.config.background_only
    if changes_tools and rt._model_requested:
        message = (
            f"Switching to {'background-only' if background_only else 'standard'} mode "
            "changes the agent's tools, so the next model request cannot reuse the cached "
            "prompt. Switch anyway?"
        )
        if confirm is None or not await confirm(message):
            return False
    try:
        await trio.to_thread.run_sync(save_settings, loaded.path, global_config)
    except SettingsSaveError as error:
        rt.notice(str(error))
        return False
    rt.settings = updated
    rt.config = attrs.evolve(rt.config, background_only=background_only)
    if changes_tools:
        await rt._queue_tx.send(q.ModeChanged(background_only))
    if mode != updated.config.behaviour.question_mode:
        rt.notice(
            f"Saved question mode {mode}; this project's trusted settings keep "
            f"{updated.config.behaviour.question_mode} in effect here."
        )
    return True
