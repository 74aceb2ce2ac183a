"""The settings store, driven through real files: load, migrate, validate, save, override."""

from __future__ import annotations

import copy
import json
import stat
import tempfile
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pi_agent_ask.persistence.settings import (
    INVALID_CONFIG_NOTICE,
    MIGRATION_FAILED_NOTICE,
    MIGRATIONS,
    Behaviour,
    CommandChannel,
    Config,
    InvalidConfigError,
    InvalidKeymapsError,
    Keymaps,
    Notifications,
    SettingsSaveError,
    agent_dir,
    decode_config_file,
    load_settings,
    project_settings_path,
    save_settings,
    settings_path,
)

KEYMAPS_SUFFIX = " Using default ask keymaps for this session. Fix the config; pi-agent-ask reads it again at its next start."
SAVE_ERROR_PREFIX = (
    "Unable to save ask config at {path}. The file may be read-only or managed outside "
    "pi-agent-ask; edit it by hand (read again at the next start). "
)

# The defaults, written out by hand: the catalog's version 5 file plus what version 6 adds.
DEFAULT_FILE: dict[str, Any] = {
    "schemaVersion": 6,
    "behaviour": {
        "autoSubmitWhenAnsweredWithoutNotes": False,
        "confirmDismissWhenDirty": True,
        "doublePressReviewShortcuts": True,
        "presentSingleAsMulti": False,
        "showFooterHints": True,
        "historyTools": False,
        "questionMode": "standard",
    },
    "keymaps": {
        "global": {"dismiss": ["ctrl+c"], "settings": ["?"]},
        "main": {
            "confirm": ["enter"],
            "cancel": ["esc"],
            "toggle": ["space"],
            "changeQuestionType": ["t"],
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
            "pasteImage": ["ctrl+v"],
        },
        "noteEditor": {
            "save": ["enter"],
            "close": ["esc"],
            "nextTabWhenEmpty": ["tab", "right"],
            "previousTabWhenEmpty": ["shift+tab", "left"],
            "nextOptionWhenEmpty": ["down"],
            "previousOptionWhenEmpty": ["up"],
            "pasteImage": ["ctrl+v"],
        },
        "settingsModal": {
            "close": ["esc", "ctrl+c", "?"],
            "nextOption": ["down"],
            "previousOption": ["up"],
            "toggle": ["enter", "space"],
        },
    },
    "notifications": {"enabled": True, "channels": ["bell"]},
    "trustedProjects": [],
}
DEFAULT_TEXT = json.dumps(DEFAULT_FILE, indent=2) + "\n"

# A version 1..3 flat keymap, as the original's migration test wrote it.
LEGACY_KEYMAPS = {
    "cancel": "q",
    "confirm": "ctrl+k",
    "dismiss": "ctrl+d",
    "optionNote": "x",
    "questionNote": "shift+x",
    "toggle": "ctrl+t",
}


def default_file(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(DEFAULT_FILE)
    data.update(changes)
    return data


def write(path: Path, data: Any) -> str:
    text = data if isinstance(data, str) else json.dumps(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return text


def snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``directory`` with its bytes and modification time."""
    return {
        str(p.relative_to(directory)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "agent" / "extensions" / "pi-agent-ask.json"


# --------------------------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------------------------


def test_settings_path_uses_the_agent_dir_variable() -> None:
    env = {"PI_CODING_AGENT_DIR": "/srv/agent", "HOME": "/home/someone"}
    assert settings_path(env) == Path("/srv/agent/extensions/pi-agent-ask.json")


def test_settings_path_defaults_to_home_pi_agent() -> None:
    assert settings_path({"HOME": "/home/someone"}) == Path(
        "/home/someone/.pi/agent/extensions/pi-agent-ask.json"
    )
    # An empty variable is the same as an unset one.
    assert agent_dir({"HOME": "/home/someone", "PI_CODING_AGENT_DIR": ""}) == Path(
        "/home/someone/.pi/agent"
    )


def test_agent_dir_expands_a_leading_tilde() -> None:
    env = {"HOME": "/home/someone", "PI_CODING_AGENT_DIR": "~/agents/pi"}
    assert agent_dir(env) == Path("/home/someone/agents/pi")


def test_project_settings_path() -> None:
    assert project_settings_path("/work/project") == Path(
        "/work/project/.pi/extensions/pi-agent-ask.json"
    )


# --------------------------------------------------------------------------------------------
# Typed config
# --------------------------------------------------------------------------------------------


def test_default_config_json_is_the_documented_file() -> None:
    assert Config().to_json() == DEFAULT_FILE
    assert Config().schema_version == 6
    assert Config.from_json(DEFAULT_FILE) == Config()


def test_typed_defaults() -> None:
    config = Config()
    assert config.behaviour == Behaviour(
        auto_submit_when_answered_without_notes=False,
        confirm_dismiss_when_dirty=True,
        double_press_review_shortcuts=True,
        present_single_as_multi=False,
        show_footer_hints=True,
        history_tools=False,
        question_mode="standard",
    )
    assert config.keymaps.editor.paste_image == ("ctrl+v",)
    assert config.keymaps.note_editor.paste_image == ("ctrl+v",)
    assert config.keymaps.settings_modal.close == ("esc", "ctrl+c", "?")
    assert config.keymaps.bindings("main", "changeQuestionType") == ("t",)
    assert config.keymaps.main.action_for_key("shift+n") == "questionNote"
    assert config.keymaps.main.action_for_key("x") is None
    assert config.notifications == Notifications(enabled=True, channels=("bell",))
    assert config.trusted_projects == ()


def test_from_json_is_strict() -> None:
    with pytest.raises(InvalidConfigError):
        Config.from_json(default_file(schemaVersion=5))
    with pytest.raises(InvalidConfigError):
        Config.from_json(default_file(behaviour={"showFooterHints": "no"}))
    with pytest.raises(InvalidKeymapsError):
        Config.from_json(default_file(keymaps={"global": {}}))


def test_command_channel_round_trips() -> None:
    notifications = Notifications(
        enabled=False, channels=("osc9", CommandChannel("notify-send hi"), "osc777")
    )
    data = notifications.to_json()
    assert data == {
        "enabled": False,
        "channels": ["osc9", {"type": "command", "command": "notify-send hi"}, "osc777"],
    }
    assert Notifications.from_json(data) == notifications


# --------------------------------------------------------------------------------------------
# Missing file
# --------------------------------------------------------------------------------------------


def test_missing_file_is_created_with_full_defaults(path: Path) -> None:
    loaded = load_settings(path)

    assert loaded.config == Config()
    assert loaded.global_config == Config()
    assert loaded.notices == ()
    assert loaded.path == path
    assert loaded.project_override_applied is False
    assert path.read_text(encoding="utf-8") == DEFAULT_TEXT
    # Only the settings file: no temporary file left behind.
    assert sorted(p.name for p in path.parent.iterdir()) == ["pi-agent-ask.json"]


def test_missing_file_that_cannot_be_created_loads_defaults_with_the_save_error(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "agent"
    blocker.write_text("a regular file where the agent directory should be", encoding="utf-8")
    path = blocker / "extensions" / "pi-agent-ask.json"

    loaded = load_settings(path)

    assert loaded.config == Config()
    (notice,) = loaded.notices
    prefix = SAVE_ERROR_PREFIX.format(path=path)
    assert notice.startswith(prefix)
    assert len(notice) > len(prefix)  # the OS detail follows
    assert blocker.read_text(encoding="utf-8").startswith("a regular file")


# --------------------------------------------------------------------------------------------
# Invalid and unsupported files: defaults, file untouched
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        "{bad json",
        "",
        "[]",
        '"settings"',
        "3",
        "null",
        json.dumps({"behaviour": {}, "keymaps": {}}),  # unversioned
        json.dumps(default_file(schemaVersion=7)),  # future version
        json.dumps(default_file(schemaVersion=0)),
        json.dumps(default_file(schemaVersion=-1)),
        json.dumps(default_file(schemaVersion="6")),
        json.dumps(default_file(schemaVersion=True)),
        json.dumps(default_file(schemaVersion=5.5)),
        json.dumps(default_file(behaviour={"showFooterHints": "yes"})),
        json.dumps(default_file(behaviour=["showFooterHints"])),
        json.dumps(default_file(behaviour={"questionMode": "sometimes"})),
        json.dumps(default_file(behaviour={"historyTools": 1})),
        json.dumps(default_file(notifications={"enabled": "on"})),
        json.dumps(default_file(notifications=["bell"])),
        json.dumps(default_file(trustedProjects="/work/project")),
        json.dumps(default_file(trustedProjects=["/work/project", 3])),
        '{"schemaVersion": 6, "behaviour": {"showFooterHints": NaN}}',
        '{"schemaVersion": Infinity}',
        "[" * 100_000,
    ],
)
def test_invalid_or_unsupported_file_loads_defaults_and_is_left_alone(
    path: Path, content: str
) -> None:
    write(path, content)
    before = snapshot(path.parent)

    loaded = load_settings(path)

    assert loaded.config == Config()
    assert loaded.notices == (INVALID_CONFIG_NOTICE,)
    # Which file, and what was wrong, beside the notice (for standard error and logs).
    [detail] = loaded.details
    assert detail.startswith(f"Config file {path}: ") and detail.endswith("."), detail
    assert INVALID_CONFIG_NOTICE == (
        "Config was invalid or unsupported. Loaded defaults for this session and left the "
        "config file unchanged. Fix the config file; pi-agent-ask reads it again at its next start."
    )
    assert snapshot(path.parent) == before  # no rewrite, no .bak, no temp file


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (
            default_file(behaviour={"showFooterHints": "yes"}),
            "behaviour.showFooterHints must be true or false",
        ),
        (default_file(schemaVersion=7), "schemaVersion must be a whole number from 1 to 6"),
        ([], "not a JSON object"),
        ("{bad json", "not valid JSON: Expecting property name enclosed in double quotes: "),
        (b'{"schemaVersion": 6, "x": "\xff"}', "not UTF-8 text (invalid start byte at byte 27)"),
    ],
)
def test_an_invalid_file_s_details_name_it_and_its_first_problem(
    path: Path, content: Any, problem: str
) -> None:
    if isinstance(content, bytes):
        path.parent.mkdir(parents=True)
        path.write_bytes(content)
    else:
        write(path, content)
    loaded = load_settings(path)
    assert loaded.notices == (INVALID_CONFIG_NOTICE,)  # the screens' text, unchanged
    [detail] = loaded.details
    assert detail.startswith(f"Config file {path}: {problem}"), detail
    assert load_settings(path.with_name("valid.json")).details == ()


def test_non_utf8_file_is_invalid(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"schemaVersion": 6, "x": "\xff\xfe"}')
    before = snapshot(path.parent)

    loaded = load_settings(path)

    assert loaded.notices == (INVALID_CONFIG_NOTICE,)
    assert snapshot(path.parent) == before


def test_byte_order_mark_is_tolerated(path: Path) -> None:
    path.parent.mkdir(parents=True)
    data = default_file(behaviour={"showFooterHints": False})
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(data).encode("utf-8"))

    loaded = load_settings(path)

    assert loaded.notices == ()
    assert loaded.config.behaviour.show_footer_hints is False


def test_integral_float_version_is_the_same_number(path: Path) -> None:
    write(path, default_file(schemaVersion=6.0, behaviour={"historyTools": True}))
    loaded = load_settings(path)
    assert loaded.notices == ()
    assert loaded.config.behaviour.history_tools is True


def test_unreadable_path_loads_defaults_with_a_notice(path: Path) -> None:
    path.mkdir(parents=True)  # a directory where the file should be

    loaded = load_settings(path)

    assert loaded.config == Config()
    assert loaded.notices == (
        f"Unable to read ask config at {path}: [Errno 21] Is a directory: '{path}'. Loaded "
        "defaults for this session and left the config file unchanged. Fix the config file; "
        "pi-agent-ask reads it again at its next start.",
    )
    assert path.is_dir()


# --------------------------------------------------------------------------------------------
# Current version
# --------------------------------------------------------------------------------------------


def test_current_file_loads_without_being_rewritten(path: Path) -> None:
    data = default_file(
        behaviour={
            "autoSubmitWhenAnsweredWithoutNotes": True,
            "presentSingleAsMulti": True,
            "historyTools": True,
            "questionMode": "background-only",
            "someFutureSetting": 3,  # unknown keys are ignored
        },
        notifications={"enabled": False},
        trustedProjects=["/work/project"],
        extra={"kept": True},
    )
    data["keymaps"]["main"]["cancel"] = "escape"  # alias and a single string, left as written
    text = write(path, data)
    before = snapshot(path.parent)

    loaded = load_settings(path)

    assert loaded.notices == ()
    behaviour = loaded.config.behaviour
    assert behaviour.auto_submit_when_answered_without_notes is True
    assert behaviour.present_single_as_multi is True
    assert behaviour.history_tools is True
    assert behaviour.question_mode == "background-only"
    assert behaviour.confirm_dismiss_when_dirty is True  # absent: default
    assert loaded.config.notifications == Notifications(enabled=False, channels=("bell",))
    assert loaded.config.keymaps.main.cancel == ("esc",)
    assert loaded.config.trusted_projects == ("/work/project",)
    assert snapshot(path.parent) == before
    assert path.read_text(encoding="utf-8") == text


def test_sections_may_be_omitted(path: Path) -> None:
    write(path, {"schemaVersion": 6})
    loaded = load_settings(path)
    assert loaded.notices == ()
    assert loaded.config == Config()


# --------------------------------------------------------------------------------------------
# Migrations (in memory only)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2, 3])
def test_flat_keymaps_migrate_into_contexts(path: Path, version: int) -> None:
    data: dict[str, Any] = {
        "schemaVersion": version,
        "behaviour": {
            "autoSubmitWhenAnsweredWithoutNotes": True,
            "confirmDismissWhenDirty": True,
            "doublePressReviewShortcuts": False,
            "showFooterHints": False,
        },
        "keymaps": LEGACY_KEYMAPS,
    }
    if version == 3:
        data["notifications"] = {"enabled": False, "channels": ["osc9"]}
    text = write(path, data)

    loaded = load_settings(path)

    assert loaded.notices == ()
    keymaps = loaded.config.keymaps
    assert keymaps.global_.dismiss == ("ctrl+d",)
    assert keymaps.global_.settings == ("?",)
    assert keymaps.main.cancel == ("q",)
    assert keymaps.main.confirm == ("ctrl+k",)
    assert keymaps.main.toggle == ("ctrl+t",)
    assert keymaps.main.option_note == ("x",)
    assert keymaps.main.question_note == ("shift+x",)
    assert keymaps.main.change_question_type == ("t",)
    assert keymaps.editor.submit == ("ctrl+k",)
    assert keymaps.editor.close == ("q",)
    assert keymaps.note_editor.save == ("ctrl+k",)
    assert keymaps.note_editor.close == ("q",)
    assert keymaps.editor.paste_image == ("ctrl+v",)
    assert keymaps.settings_modal == Keymaps().settings_modal
    behaviour = loaded.config.behaviour
    assert behaviour.auto_submit_when_answered_without_notes is True
    assert behaviour.double_press_review_shortcuts is False
    assert behaviour.show_footer_hints is False
    assert behaviour.present_single_as_multi is False
    assert behaviour.history_tools is False
    assert behaviour.question_mode == "standard"
    if version == 3:
        assert loaded.config.notifications == Notifications(enabled=False, channels=("osc9",))
    assert path.read_text(encoding="utf-8") == text


def test_version_1_with_context_keymaps_loads_them(path: Path) -> None:
    # Old files were sometimes hand-edited into the newer shape; the original accepted that.
    text = write(
        path,
        {
            "schemaVersion": 1,
            "behaviour": {"showFooterHints": False},
            "keymaps": DEFAULT_FILE["keymaps"],
        },
    )
    loaded = load_settings(path)
    assert loaded.notices == ()
    assert loaded.config.keymaps == Keymaps()
    assert loaded.config.behaviour.show_footer_hints is False
    assert path.read_text(encoding="utf-8") == text


def test_invalid_migrated_keymaps_fall_back_alone(path: Path) -> None:
    # The catalog's case: a version 1 file whose cancel key collides with global "?".
    text = write(
        path,
        {
            "schemaVersion": 1,
            "behaviour": {
                "autoSubmitWhenAnsweredWithoutNotes": True,
                "confirmDismissWhenDirty": True,
                "doublePressReviewShortcuts": True,
                "showFooterHints": False,
            },
            "keymaps": {
                "cancel": "?",
                "dismiss": "ctrl+c",
                "toggle": "space",
                "confirm": "enter",
                "optionNote": "n",
                "questionNote": "shift+n",
            },
        },
    )

    loaded = load_settings(path)

    assert loaded.config.keymaps == Keymaps()
    assert loaded.config.behaviour.auto_submit_when_answered_without_notes is True
    assert loaded.config.behaviour.show_footer_hints is False
    assert loaded.notices == (
        'Global key "?" of "global.settings" overlaps "main.cancel".' + KEYMAPS_SUFFIX,
    )
    assert path.read_text(encoding="utf-8") == text


def test_version_4_gains_present_single_as_multi_and_change_question_type(path: Path) -> None:
    keymaps = copy.deepcopy(DEFAULT_FILE["keymaps"])
    del keymaps["main"]["changeQuestionType"]
    del keymaps["editor"]["pasteImage"]
    del keymaps["noteEditor"]["pasteImage"]
    text = write(
        path,
        {
            "schemaVersion": 4,
            "behaviour": {
                "autoSubmitWhenAnsweredWithoutNotes": True,
                "confirmDismissWhenDirty": True,
                "doublePressReviewShortcuts": True,
                "showFooterHints": False,
            },
            "keymaps": keymaps,
            "notifications": {"enabled": True, "channels": ["bell"]},
        },
    )

    loaded = load_settings(path)

    assert loaded.notices == ()
    assert loaded.config.behaviour.present_single_as_multi is False
    assert loaded.config.behaviour.show_footer_hints is False
    assert loaded.config.keymaps.main.change_question_type == ("t",)
    assert path.read_text(encoding="utf-8") == text


def test_version_5_gains_history_tools_question_mode_and_paste_image(path: Path) -> None:
    data = default_file(schemaVersion=5)
    del data["behaviour"]["historyTools"]
    del data["behaviour"]["questionMode"]
    del data["keymaps"]["editor"]["pasteImage"]
    del data["keymaps"]["noteEditor"]["pasteImage"]
    del data["trustedProjects"]
    data["behaviour"]["presentSingleAsMulti"] = True
    text = write(path, data)
    before = snapshot(path.parent)

    loaded = load_settings(path)

    assert loaded.notices == ()
    assert loaded.config == attrs.evolve(
        Config(), behaviour=Behaviour(present_single_as_multi=True)
    )
    assert snapshot(path.parent) == before
    assert path.read_text(encoding="utf-8") == text


def test_version_5_paste_image_starts_unbound_where_ctrl_v_is_taken(path: Path) -> None:
    data = default_file(schemaVersion=5)
    del data["keymaps"]["editor"]["pasteImage"]
    del data["keymaps"]["noteEditor"]["pasteImage"]
    data["keymaps"]["editor"]["submit"] = ["enter", "ctrl+v"]

    write(path, data)
    loaded = load_settings(path)

    assert loaded.notices == ()
    assert loaded.config.keymaps.editor.paste_image == ()
    assert loaded.config.keymaps.editor.submit == ("enter", "ctrl+v")
    assert loaded.config.keymaps.note_editor.paste_image == ("ctrl+v",)


def test_a_failing_migration_loads_defaults_with_the_migration_notice(path: Path) -> None:
    def broken(data: dict[str, Any]) -> dict[str, Any]:
        raise KeyError("behaviour")

    text = write(path, {"schemaVersion": 3, "behaviour": {"showFooterHints": False}})
    steps = (MIGRATIONS[0], MIGRATIONS[1], broken, MIGRATIONS[3], MIGRATIONS[4])

    loaded = load_settings(path, migrations=steps)

    assert loaded.config == Config()
    assert loaded.notices == (MIGRATION_FAILED_NOTICE,)
    assert MIGRATION_FAILED_NOTICE == (
        "Config migration failed. Loaded defaults for this session and left the config file "
        "unchanged. Fix the config file; pi-agent-ask reads it again at its next start."
    )
    assert path.read_text(encoding="utf-8") == text


def test_a_migration_producing_the_wrong_version_is_a_failed_migration() -> None:
    decoded = decode_config_file(
        {"schemaVersion": 5}, migrations=(*MIGRATIONS[:4], lambda data: data)
    )
    assert decoded.notices == (MIGRATION_FAILED_NOTICE,)
    assert decoded.used_defaults


def test_migrations_do_not_modify_their_input() -> None:
    data = {"schemaVersion": 1, "behaviour": {"showFooterHints": False}, "keymaps": LEGACY_KEYMAPS}
    original = copy.deepcopy(data)
    decoded = decode_config_file(data)
    assert decoded.migrated_from == 1
    assert data == original


# --------------------------------------------------------------------------------------------
# Keymaps
# --------------------------------------------------------------------------------------------


def keymaps_file(edit: Any) -> dict[str, Any]:
    data = default_file()
    edit(data["keymaps"])
    return data


def _set(context: str, action: str, value: Any) -> Any:
    def edit(keymaps: dict[str, Any]) -> None:
        keymaps[context][action] = value

    return edit


def _delete(context: str, action: str | None = None) -> Any:
    def edit(keymaps: dict[str, Any]) -> None:
        if action is None:
            del keymaps[context]
        else:
            del keymaps[context][action]

    return edit


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (
            _set("main", "questionNote", ["n"]),
            'Duplicate key "n" in keymap context "main": "main.optionNote" and '
            '"main.questionNote".',
        ),
        (
            _set("main", "optionNote", ["n", "N"]),
            'Duplicate key "shift+n" in keymap context "main": "main.optionNote" and '
            '"main.questionNote".',
        ),
        (
            _set("editor", "submit", ["enter", "return"]),
            'Duplicate key "enter" in keymap context "editor": "editor.submit" and '
            '"editor.submit".',
        ),
        (
            _set("editor", "close", ["?"]),
            'Global key "?" of "global.settings" overlaps "editor.close".',
        ),
        (
            _set("noteEditor", "save", ["control+c"]),
            'Global key "ctrl+c" of "global.dismiss" overlaps "noteEditor.save".',
        ),
        (
            _set("main", "confirm", ["1"]),
            'Key "1" in "main.confirm" is reserved: digits 1..9 select options.',
        ),
        (
            _set("editor", "submit", ["@"]),
            'Key "@" in "editor.submit" is reserved: @ starts a file reference in editors.',
        ),
        (
            _set("noteEditor", "save", ["alt+ctrl+d"]),
            'Key "ctrl+alt+d" in "noteEditor.save" is reserved: ctrl+alt+d removes the last '
            "image in an editor.",
        ),
        (
            _set("main", "toggle", ["shift+d"]),
            'Key "shift+d" in "main.toggle" is reserved: shift+d skips the current question.',
        ),
        (
            _set("global", "settings", ["D"]),
            'Key "shift+d" in "global.settings" is reserved: shift+d skips the current question.',
        ),
        (
            _set("settingsModal", "toggle", ["alt+q"]),
            'Key "alt+q" in "settingsModal.toggle" is reserved: alt+q moves focus between the '
            "question panel and the editor.",
        ),
        (_delete("noteEditor"), 'Missing keymap context "noteEditor".'),
        (_delete("main", "confirm"), 'Missing keymap action "main.confirm".'),
        (_delete("editor", "pasteImage"), 'Missing keymap action "editor.pasteImage".'),
        (
            _set("main", "confirm", ["ctrl+shift+enter"]),
            'Invalid key "ctrl+shift+enter" in "main.confirm": ctrl+shift+enter cannot be told '
            "apart on a terminal.",
        ),
        (
            _set("main", "confirm", ["hyper+x"]),
            'Invalid key "hyper+x" in "main.confirm": "hyper" is not a modifier (use ctrl, '
            "shift or alt).",
        ),
        (_set("main", "confirm", 5), 'Keymap "main.confirm" must be a key or a list of keys.'),
        (
            _set("main", "confirm", ["enter", None]),
            'Keymap "main.confirm" must be a key or a list of keys.',
        ),
        (_set("main", "nextTab", None), 'Keymap "main.nextTab" must be a key or a list of keys.'),
    ],
)
def test_invalid_keymaps_fall_back_alone(path: Path, edit: Any, reason: str) -> None:
    data = keymaps_file(edit)
    data["behaviour"]["showFooterHints"] = False
    data["notifications"] = {"enabled": False, "channels": ["osc777"]}
    text = write(path, data)

    loaded = load_settings(path)

    assert loaded.notices == (reason + KEYMAPS_SUFFIX,)
    assert loaded.config.keymaps == Keymaps()
    # Everything else still loads.
    assert loaded.config.behaviour.show_footer_hints is False
    assert loaded.config.notifications == Notifications(enabled=False, channels=("osc777",))
    assert path.read_text(encoding="utf-8") == text


@pytest.mark.parametrize(
    ("keymaps", "reason"),
    [
        ([], "keymaps must be an object."),
        (None, "keymaps must be an object."),
        ({"global": {}, "main": []}, 'Missing keymap action "global.dismiss".'),
    ],
)
def test_malformed_keymaps_section(path: Path, keymaps: Any, reason: str) -> None:
    write(path, default_file(keymaps=keymaps))
    loaded = load_settings(path)
    assert loaded.notices == (reason + KEYMAPS_SUFFIX,)
    assert loaded.config == Config()


def test_context_that_is_not_an_object(path: Path) -> None:
    write(path, keymaps_file(lambda k: k.update(main=["enter"])))
    loaded = load_settings(path)
    assert loaded.notices == ('Keymap context "main" must be an object.' + KEYMAPS_SUFFIX,)


def test_key_aliases_normalise_and_single_strings_are_lists(path: Path) -> None:
    def edit(keymaps: dict[str, Any]) -> None:
        keymaps["main"]["cancel"] = "escape"
        keymaps["main"]["confirm"] = ["return"]
        keymaps["global"]["dismiss"] = "control+c"
        keymaps["main"]["questionNote"] = "Shift+N"
        keymaps["main"]["nextOption"] = ["down", "pagedown"]
        keymaps["main"]["previousOption"] = ["up", "pageup"]

    write(path, keymaps_file(edit))
    loaded = load_settings(path)

    assert loaded.notices == ()
    main = loaded.config.keymaps.main
    assert main.cancel == ("esc",)
    assert main.confirm == ("enter",)
    assert main.question_note == ("shift+n",)
    assert main.next_option == ("down", "pageDown")
    assert main.previous_option == ("up", "pageUp")
    assert loaded.config.keymaps.global_.dismiss == ("ctrl+c",)


def test_custom_keymaps_load(path: Path) -> None:
    def edit(keymaps: dict[str, Any]) -> None:
        keymaps["editor"]["submit"] = ["ctrl+k"]
        keymaps["editor"]["close"] = ["esc", "shift+d"]  # D is only reserved in navigation
        keymaps["main"]["changeQuestionType"] = []  # an empty list leaves an action unbound
        keymaps["settingsModal"]["close"] = ["esc", "q"]
        keymaps["main"]["unknownAction"] = ["z"]  # unknown actions are ignored
        keymaps["future"] = {"x": ["y"]}

    write(path, keymaps_file(edit))
    loaded = load_settings(path)

    assert loaded.notices == ()
    keymaps = loaded.config.keymaps
    assert keymaps.editor.submit == ("ctrl+k",)
    assert keymaps.editor.close == ("esc", "shift+d")
    assert keymaps.main.change_question_type == ()
    assert keymaps.settings_modal.close == ("esc", "q")


def test_settings_modal_may_share_keys_with_global(path: Path) -> None:
    # The defaults already do: "?" and ctrl+c both close settings and act globally.
    write(path, DEFAULT_FILE)
    assert load_settings(path).notices == ()


# --------------------------------------------------------------------------------------------
# Notifications and trusted projects
# --------------------------------------------------------------------------------------------


def test_invalid_notification_channels_are_dropped(path: Path) -> None:
    channels = [
        "osc9",
        "nope",
        {"type": "command", "command": "   "},
        {"type": "command", "command": "notify-send hi"},
        3,
        {"type": "shell", "command": "x"},
        "osc777",
    ]
    write(path, default_file(notifications={"enabled": True, "channels": channels}))

    loaded = load_settings(path)

    assert loaded.config.notifications.channels == (
        "osc9",
        CommandChannel("notify-send hi"),
        "osc777",
    )
    assert loaded.notices == (
        "Ignored invalid notification channels: notifications.channels[1], "
        "notifications.channels[2], notifications.channels[4], notifications.channels[5]. "
        "Fix the config; pi-agent-ask reads it again at its next start.",
    )


def test_no_valid_channel_leaves_the_bell(path: Path) -> None:
    write(path, default_file(notifications={"enabled": True, "channels": ["nope"]}))
    loaded = load_settings(path)
    assert loaded.config.notifications.channels == ("bell",)
    assert loaded.notices == (
        "Ignored invalid notification channels: notifications.channels[0]. "
        "Fix the config; pi-agent-ask reads it again at its next start.",
    )


def test_empty_channel_list_means_the_bell(path: Path) -> None:
    write(path, default_file(notifications={"enabled": True, "channels": []}))
    loaded = load_settings(path)
    assert loaded.config.notifications.channels == ("bell",)
    assert loaded.notices == ()


def test_channels_that_are_not_a_list_mean_the_bell(path: Path) -> None:
    write(path, default_file(notifications={"enabled": False, "channels": "osc9"}))
    loaded = load_settings(path)
    assert loaded.config.notifications == Notifications(enabled=False, channels=("bell",))
    assert loaded.notices == (
        "notifications.channels must be a list; using the bell. "
        "Fix the config; pi-agent-ask reads it again at its next start.",
    )


def test_relative_trusted_projects_are_ignored(path: Path) -> None:
    write(path, default_file(trustedProjects=["/work/a", "work/b", "", "/work/c/"]))
    loaded = load_settings(path)
    assert loaded.config.trusted_projects == ("/work/a", "/work/c/")
    assert loaded.notices == (
        'Ignored trustedProjects entries that are not absolute paths: "work/b", "". '
        "Fix the config; pi-agent-ask reads it again at its next start.",
    )


# --------------------------------------------------------------------------------------------
# Trusted project override
# --------------------------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    directory = tmp_path / "project"
    directory.mkdir()
    return directory


def test_trusted_project_sets_question_mode(path: Path, project: Path) -> None:
    write(path, default_file(trustedProjects=[str(project)]))
    write(project_settings_path(project), {"behaviour": {"questionMode": "background-only"}})

    loaded = load_settings(path, project_dir=project)

    assert loaded.notices == ()
    assert loaded.project_override_applied is True
    assert loaded.project_question_mode == "background-only"
    assert loaded.config.behaviour.question_mode == "background-only"
    assert loaded.global_config.behaviour.question_mode == "standard"
    # Nothing else differs.
    assert attrs.evolve(loaded.config, behaviour=Behaviour()) == loaded.global_config


def test_trusted_project_may_set_standard_over_a_global_background_only(
    path: Path, project: Path
) -> None:
    write(
        path,
        default_file(
            behaviour={"questionMode": "background-only"}, trustedProjects=[f"{project}/"]
        ),
    )
    write(
        project_settings_path(project),
        {"schemaVersion": 6, "behaviour": {"questionMode": "standard"}},
    )

    loaded = load_settings(path, project_dir=project)

    assert loaded.notices == ()
    assert loaded.config.behaviour.question_mode == "standard"
    assert loaded.global_config.behaviour.question_mode == "background-only"


def test_untrusted_project_is_ignored_with_a_notice(path: Path, project: Path) -> None:
    write(path, DEFAULT_FILE)
    project_file = project_settings_path(project)
    text = write(project_file, {"behaviour": {"questionMode": "background-only"}})

    loaded = load_settings(path, project_dir=project)

    assert loaded.project_override_applied is False
    assert loaded.config.behaviour.question_mode == "standard"
    assert loaded.notices == (
        f"Ignored project ask config at {project_file}: the project {project} is not listed "
        f"in trustedProjects in {path}. Add its absolute path there to let it set "
        "behaviour.questionMode.",
    )
    assert project_file.read_text(encoding="utf-8") == text


def test_project_of_an_invalid_global_file_is_untrusted(path: Path, project: Path) -> None:
    write(path, "{broken")
    write(project_settings_path(project), {"behaviour": {"questionMode": "background-only"}})

    loaded = load_settings(path, project_dir=project)

    assert loaded.config.behaviour.question_mode == "standard"
    assert loaded.notices[0] == INVALID_CONFIG_NOTICE
    assert "is not listed in trustedProjects" in loaded.notices[1]


def test_project_trusted_through_a_symlinked_path(
    path: Path, project: Path, tmp_path: Path
) -> None:
    link = tmp_path / "link-to-project"
    link.symlink_to(project)
    write(path, default_file(trustedProjects=[str(link)]))
    write(project_settings_path(project), {"behaviour": {"questionMode": "background-only"}})

    loaded = load_settings(path, project_dir=project)

    assert loaded.notices == ()
    assert loaded.config.behaviour.question_mode == "background-only"


def test_odd_trusted_entries_never_break_loading(path: Path, project: Path) -> None:
    # The symlink fallback resolves every entry; a NUL byte cannot be resolved and is no match.
    write(path, default_file(trustedProjects=["/\u0000odd", "/nonexistent/x"]))
    write(project_settings_path(project), {"behaviour": {"questionMode": "background-only"}})

    loaded = load_settings(path, project_dir=project)

    assert loaded.project_override_applied is False
    assert len(loaded.notices) == 1
    assert "is not listed in trustedProjects" in loaded.notices[0]


def test_other_project_keys_are_ignored_with_a_notice(path: Path, project: Path) -> None:
    write(path, default_file(trustedProjects=[str(project)]))
    project_file = project_settings_path(project)
    write(
        project_file,
        {
            "behaviour": {"questionMode": "background-only", "historyTools": True},
            "keymaps": {"main": {"confirm": ["x"]}},
            "trustedProjects": ["/elsewhere"],
        },
    )

    loaded = load_settings(path, project_dir=project)

    assert loaded.config.behaviour.question_mode == "background-only"
    assert loaded.config.behaviour.history_tools is False
    assert loaded.config.keymaps == Keymaps()
    assert loaded.config.trusted_projects == (str(project),)
    assert loaded.notices == (
        f"Project ask config at {project_file} may only set behaviour.questionMode; ignored: "
        "behaviour.historyTools, keymaps, trustedProjects.",
    )


@pytest.mark.parametrize(
    ("content", "notice"),
    [
        ("{nope", "Ignored project ask config at {file}: it is not a JSON object."),
        ("[1]", "Ignored project ask config at {file}: it is not a JSON object."),
        (
            json.dumps({"behaviour": {"questionMode": "quiet"}}),
            "Ignored behaviour.questionMode in project ask config at {file}: it must be "
            '"standard" or "background-only".',
        ),
        (
            json.dumps({"behaviour": "background-only"}),
            "Project ask config at {file} may only set behaviour.questionMode; ignored: behaviour.",
        ),
    ],
)
def test_invalid_project_file_is_ignored(
    path: Path, project: Path, content: str, notice: str
) -> None:
    write(path, default_file(trustedProjects=[str(project)]))
    project_file = project_settings_path(project)
    write(project_file, content)

    loaded = load_settings(path, project_dir=project)

    assert loaded.project_override_applied is False
    assert loaded.config.behaviour.question_mode == "standard"
    assert loaded.notices == (notice.format(file=project_file),)


def test_project_without_a_file_changes_nothing(path: Path, project: Path) -> None:
    write(path, default_file(trustedProjects=[str(project)]))
    loaded = load_settings(path, project_dir=project)
    assert loaded.notices == ()
    assert loaded.project_override_applied is False
    assert loaded.project_dir == project


def test_with_global_config_keeps_the_override_only_while_trusted(
    path: Path, project: Path
) -> None:
    write(path, default_file(trustedProjects=[str(project)]))
    write(project_settings_path(project), {"behaviour": {"questionMode": "background-only"}})
    loaded = load_settings(path, project_dir=project)

    toggled = attrs.evolve(
        loaded.global_config,
        behaviour=attrs.evolve(loaded.global_config.behaviour, show_footer_hints=False),
    )
    still = loaded.with_global_config(toggled)
    assert still.global_config == toggled
    assert still.config.behaviour.question_mode == "background-only"
    assert still.config.behaviour.show_footer_hints is False

    untrusted = loaded.with_global_config(attrs.evolve(toggled, trusted_projects=()))
    assert untrusted.project_override_applied is False
    assert untrusted.config.behaviour.question_mode == "standard"


# --------------------------------------------------------------------------------------------
# Saving
# --------------------------------------------------------------------------------------------


def test_save_writes_the_full_normalised_file(path: Path) -> None:
    config = Config(
        behaviour=Behaviour(auto_submit_when_answered_without_notes=True, show_footer_hints=False),
        notifications=Notifications(channels=("osc9", CommandChannel("say done"))),
        trusted_projects=("/work/project",),
    )

    save_settings(path, config)

    expected = default_file(trustedProjects=["/work/project"])
    expected["behaviour"]["autoSubmitWhenAnsweredWithoutNotes"] = True
    expected["behaviour"]["showFooterHints"] = False
    expected["notifications"]["channels"] = ["osc9", {"type": "command", "command": "say done"}]
    assert path.read_text(encoding="utf-8") == json.dumps(expected, indent=2) + "\n"
    loaded = load_settings(path)
    assert loaded.config == config
    assert loaded.notices == ()
    assert sorted(p.name for p in path.parent.iterdir()) == ["pi-agent-ask.json"]


def test_save_replaces_a_migrated_file_with_the_current_version(path: Path) -> None:
    write(path, {"schemaVersion": 2, "keymaps": LEGACY_KEYMAPS})
    loaded = load_settings(path)

    save_settings(path, loaded.config)

    saved = json.loads(path.read_text(encoding="utf-8"))
    assert saved["schemaVersion"] == 6
    assert saved["keymaps"]["editor"]["close"] == ["q"]
    assert load_settings(path).config == loaded.config


def test_save_keeps_the_file_mode(path: Path) -> None:
    write(path, DEFAULT_FILE)
    path.chmod(0o640)
    save_settings(path, Config(behaviour=Behaviour(show_footer_hints=False)))
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert load_settings(path).config.behaviour.show_footer_hints is False


def test_save_writes_through_a_symlink(path: Path, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "pi-agent-ask.json"
    write(real, DEFAULT_FILE)
    path.parent.mkdir(parents=True)
    path.symlink_to(real)

    save_settings(path, Config(behaviour=Behaviour(history_tools=True)))

    assert path.is_symlink()
    assert json.loads(real.read_text(encoding="utf-8"))["behaviour"]["historyTools"] is True


def test_save_failure_under_a_regular_file(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("x", encoding="utf-8")
    path = blocker / "pi-agent-ask.json"

    with pytest.raises(SettingsSaveError) as caught:
        save_settings(path, Config())

    error = caught.value
    assert error.detail
    assert str(error) == SAVE_ERROR_PREFIX.format(path=path) + error.detail
    assert str(error) == (
        f"Unable to save ask config at {path}. The file may be read-only or managed outside "
        f"pi-agent-ask; edit it by hand (read again at the next start). {error.detail}"
    )
    assert blocker.read_text(encoding="utf-8") == "x"


def test_save_refuses_a_read_only_file(path: Path) -> None:
    text = write(path, DEFAULT_FILE)
    path.chmod(0o444)
    before = snapshot(path.parent)

    with pytest.raises(SettingsSaveError) as caught:
        save_settings(path, Config(behaviour=Behaviour(show_footer_hints=False)))

    assert str(caught.value) == SAVE_ERROR_PREFIX.format(path=path) + f"{path} is read-only"
    assert path.read_text(encoding="utf-8") == text
    assert snapshot(path.parent) == before


def test_save_failure_when_the_path_is_a_directory(path: Path) -> None:
    path.mkdir(parents=True)
    with pytest.raises(SettingsSaveError) as caught:
        save_settings(path, Config())
    assert (
        str(caught.value) == SAVE_ERROR_PREFIX.format(path=path) + f"{path} is not a regular file"
    )
    assert list(path.parent.iterdir()) == [path]


def test_load_after_save_failure_elsewhere_never_writes(path: Path) -> None:
    write(path, default_file(behaviour={"showFooterHints": False}))
    before = snapshot(path.parent)
    for _ in range(3):
        load_settings(path)
    assert snapshot(path.parent) == before


# --------------------------------------------------------------------------------------------
# Properties: any file content loads, nothing is written
# --------------------------------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)
key_strings = st.sampled_from(
    ["esc", "enter", "?", "n", "N", "1", "@", "ctrl+c", "shift+d", "alt+q", "escape", "foo", ""]
)
key_values = key_strings | st.lists(key_strings, max_size=3) | json_values
context_names = ["global", "main", "editor", "noteEditor", "settingsModal"]
action_names = [
    "dismiss",
    "settings",
    "confirm",
    "cancel",
    "toggle",
    "changeQuestionType",
    "nextTab",
    "optionNote",
    "questionNote",
    "submit",
    "close",
    "save",
    "pasteImage",
    "nextOption",
]
keymap_values = st.dictionaries(
    st.sampled_from(context_names + action_names),
    st.dictionaries(st.sampled_from(action_names), key_values, max_size=6) | key_values,
    max_size=6,
)
behaviour_values = st.dictionaries(
    st.sampled_from(
        [
            "autoSubmitWhenAnsweredWithoutNotes",
            "showFooterHints",
            "presentSingleAsMulti",
            "historyTools",
            "questionMode",
        ]
    ),
    st.booleans() | st.sampled_from(["standard", "background-only"]) | json_values,
    max_size=5,
)
config_like = st.fixed_dictionaries(
    {},
    optional={
        "schemaVersion": st.integers(-1, 8) | json_values,
        "behaviour": behaviour_values | json_values,
        "keymaps": keymap_values | json_values,
        "notifications": st.fixed_dictionaries(
            {}, optional={"enabled": json_scalars, "channels": json_values}
        )
        | json_values,
        "trustedProjects": st.lists(st.text(max_size=6), max_size=3) | json_values,
    },
)


def _load_in_fresh_directory(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        path = root / "extensions" / "pi-agent-ask.json"
        path.parent.mkdir()
        path.write_bytes(content)
        project = root / "project"
        project_settings_path(project).parent.mkdir(parents=True)
        project_settings_path(project).write_bytes(content)
        before = snapshot(root)

        loaded = load_settings(path, project_dir=project)

        assert snapshot(root) == before
        assert isinstance(loaded.config, Config)
        assert all(isinstance(notice, str) and notice for notice in loaded.notices)
        # Whatever was loaded can be saved and read back unchanged.
        assert Config.from_json(loaded.config.to_json()) == loaded.config


@given(config_like | json_values)
def test_arbitrary_json_never_raises_and_never_modifies_the_file(data: Any) -> None:
    _load_in_fresh_directory(json.dumps(data).encode("utf-8"))


@given(st.binary(max_size=64))
def test_arbitrary_bytes_never_raise_and_never_modify_the_file(content: bytes) -> None:
    _load_in_fresh_directory(content)


@given(config_like | json_values)
def test_decoding_always_yields_a_saveable_config(data: Any) -> None:
    decoded = decode_config_file(data)
    assert Config.from_json(decoded.config.to_json()) == decoded.config
    if decoded.used_defaults:
        assert decoded.config == Config()
        assert decoded.notices in ((INVALID_CONFIG_NOTICE,), (MIGRATION_FAILED_NOTICE,))
    else:
        assert INVALID_CONFIG_NOTICE not in decoded.notices
