"""Settings behaviour the other settings suites left unpinned, found by mutation testing
(``docs/mutation-persistence.md``): each migration step on its own, odd values inside old
keymaps, error texts, the agent directory without ``HOME`` or with a bare ``~``, NaN in a file,
non-ASCII text in a saved file, file modes, short writes, the directory sync, the exclusive
create where hard links fail, a file created by someone else meanwhile, and project files.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from pi_agent_ask.persistence import settings as st
from pi_agent_ask.persistence.settings import (
    INVALID_CONFIG_NOTICE,
    MIGRATION_FAILED_NOTICE,
    MIGRATIONS,
    Config,
    InvalidKeymapsError,
    Keymaps,
    SettingsSaveError,
    agent_dir,
    decode_config_file,
    load_settings,
    project_settings_path,
    save_settings,
)

from .test_settings import SAVE_ERROR_PREFIX, default_file, write

V4_KEYMAPS = MIGRATIONS[2]({"schemaVersion": 3, "keymaps": {}})["keymaps"]
"""The version 4 default keymaps, as the flat → context step writes them."""


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "agent" / "extensions" / "pi-agent-ask.json"


# --------------------------------------------------------------------------------------------
# Migrations, one step at a time
# --------------------------------------------------------------------------------------------


def test_each_migration_step_writes_the_next_version_number() -> None:
    for version, step in enumerate(MIGRATIONS, start=1):
        migrated = step({"schemaVersion": version, "other": [version]})
        assert migrated["schemaVersion"] == version + 1
        assert migrated["other"] == [version]
        assert "schemaversion" not in {k.lower() for k in migrated if k != "schemaVersion"}


def test_version_4_to_5_adds_present_single_as_multi_and_change_question_type() -> None:
    keymaps = {"main": {"confirm": ["x"]}, "global": {"dismiss": ["ctrl+d"]}}
    old = {"schemaVersion": 4, "behaviour": {"showFooterHints": False}, "keymaps": keymaps}
    assert MIGRATIONS[3](old) == {
        "schemaVersion": 5,
        "behaviour": {"presentSingleAsMulti": False, "showFooterHints": False},
        "keymaps": {
            "main": {"changeQuestionType": ["t"], "confirm": ["x"]},
            "global": {"dismiss": ["ctrl+d"]},
        },
    }
    # A file's own value wins; keymaps without a main context, or that are no object, stay.
    kept = {"schemaVersion": 4, "behaviour": {"presentSingleAsMulti": True}, "keymaps": {}}
    assert MIGRATIONS[3](kept) == kept | {"schemaVersion": 5}
    odd = {"schemaVersion": 4, "behaviour": "loud", "keymaps": "bad"}
    assert MIGRATIONS[3](odd) == odd | {"schemaVersion": 5}


def test_version_5_to_6_adds_history_tools_question_mode_and_paste_image() -> None:
    keymaps = {"editor": {"submit": ["enter"]}, "noteEditor": {"save": ["enter"]}}
    old = {"schemaVersion": 5, "behaviour": {"showFooterHints": True}, "keymaps": keymaps}
    assert MIGRATIONS[4](old) == {
        "schemaVersion": 6,
        "behaviour": {"historyTools": False, "questionMode": "standard", "showFooterHints": True},
        "keymaps": {
            "editor": {"submit": ["enter"], "pasteImage": ["ctrl+v"]},
            "noteEditor": {"save": ["enter"], "pasteImage": ["ctrl+v"]},
        },
    }
    mine = {"historyTools": True, "questionMode": "background-only"}
    assert MIGRATIONS[4]({"schemaVersion": 5, "behaviour": mine})["behaviour"] == mine


@pytest.mark.parametrize(
    ("keymaps", "editor", "note_editor"),
    [
        # ctrl+v bound globally: paste starts unbound in both editors.
        ({"global": {"settings": ["ctrl+v"]}}, [], []),
        # A single string (not a list) counts too, and only in its own editor.
        ({"editor": {"submit": "Ctrl+V"}}, [], ["ctrl+v"]),
        ({"noteEditor": {"save": ["ctrl+v"]}}, ["ctrl+v"], []),
        # Values that are not keys are skipped, not a failed migration.
        ({"editor": {"submit": 5, "close": ["not a key!", 7]}}, ["ctrl+v"], ["ctrl+v"]),
        ({"global": "nonsense"}, ["ctrl+v"], ["ctrl+v"]),
    ],
)
def test_version_5_paste_image_is_unbound_only_where_ctrl_v_is_taken(
    keymaps: dict[str, Any], editor: list[str], note_editor: list[str]
) -> None:
    sections = {"editor": {}, "noteEditor": {}} | keymaps
    migrated = MIGRATIONS[4]({"schemaVersion": 5, "keymaps": sections})["keymaps"]
    assert (migrated["editor"]["pasteImage"], migrated["noteEditor"]["pasteImage"]) == (
        editor,
        note_editor,
    )


def test_a_version_5_file_with_a_bad_editor_key_falls_back_to_default_keymaps_only() -> None:
    keymaps = Config().keymaps.to_json()
    del keymaps["editor"]["pasteImage"], keymaps["noteEditor"]["pasteImage"]
    keymaps["editor"]["submit"] = 5
    decoded = decode_config_file({"schemaVersion": 5, "keymaps": keymaps})
    assert decoded.migrated_from == 5 and not decoded.used_defaults
    assert decoded.notices == (
        st.keymaps_fallback_notice('Keymap "editor.submit" must be a key or a list of keys.'),
    )


def test_context_shaped_keymaps_of_an_old_file_are_kept_as_they_are() -> None:
    shaped = {"main": {"confirm": ["x"]}, "global": {"dismiss": ["ctrl+d"]}}
    assert MIGRATIONS[2]({"schemaVersion": 3, "keymaps": shaped})["keymaps"] == shaped
    assert MIGRATIONS[2]({"schemaVersion": 3, "keymaps": "bad"})["keymaps"] == "bad"


def test_flat_keymaps_of_one_file_never_leak_into_the_next() -> None:
    custom = MIGRATIONS[2]({"schemaVersion": 3, "keymaps": {"confirm": "ctrl+k"}})["keymaps"]
    assert custom["main"]["confirm"] == "ctrl+k"
    assert custom["editor"]["submit"] == "ctrl+k"
    again = MIGRATIONS[2]({"schemaVersion": 3, "keymaps": {}})["keymaps"]
    assert again == V4_KEYMAPS
    assert again["main"]["confirm"] == ["enter"] and again["editor"]["submit"] == ["enter"]


def test_a_current_file_is_not_migrated_from_anything() -> None:
    assert decode_config_file(default_file()).migrated_from is None
    assert decode_config_file(default_file(schemaVersion=5)).migrated_from == 5


def test_old_keymaps_that_are_no_object_are_a_keymaps_notice_not_a_failed_migration() -> None:
    decoded = decode_config_file({"schemaVersion": 1, "keymaps": "bad"})
    assert decoded.notices == (st.keymaps_fallback_notice("keymaps must be an object."),)
    assert not decoded.used_defaults and decoded.notices != (MIGRATION_FAILED_NOTICE,)


# --------------------------------------------------------------------------------------------
# Errors and paths
# --------------------------------------------------------------------------------------------


def test_error_texts_are_their_messages() -> None:
    with pytest.raises(InvalidKeymapsError) as raised:
        Keymaps.from_json({})
    assert str(raised.value) == raised.value.reason == 'Missing keymap context "global".'
    error = SettingsSaveError("/x/settings.json", "disk full")
    assert (
        str(error)
        == error.args[0]
        == SAVE_ERROR_PREFIX.format(path="/x/settings.json") + ("disk full")
    )
    with pytest.raises(KeyError) as missing:
        Config().keymaps.bindings("main", "jump")
    assert missing.value.args == ("main.jump",)


def test_agent_dir_without_home_and_with_a_bare_tilde() -> None:
    assert agent_dir({}) == Path.home() / ".pi" / "agent"
    assert agent_dir({"HOME": "/h", "PI_CODING_AGENT_DIR": "~"}) == Path("/h")
    assert agent_dir({"HOME": "/h", "PI_CODING_AGENT_DIR": "~/a"}) == Path("/h/a")


# --------------------------------------------------------------------------------------------
# Reading and writing files
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_a_file_with_a_number_json_does_not_have_is_invalid(path: Path, constant: str) -> None:
    text = write(path, f'{{"schemaVersion": 6, "extra": {constant}}}')
    loaded = load_settings(path)
    assert loaded.notices == (INVALID_CONFIG_NOTICE,)
    assert path.read_text(encoding="utf-8") == text


def test_a_saved_file_keeps_non_ascii_text_as_it_is(path: Path) -> None:
    save_settings(path, Config(trusted_projects=("/home/józef/projekt",)))
    text = path.read_text(encoding="utf-8")
    assert '"/home/józef/projekt"' in text and "\\u" not in text


def test_a_new_file_takes_the_umask_and_is_never_world_writable(path: Path) -> None:
    """Saved where no file is (it was removed meanwhile) or created with the defaults: the mode
    is 0o666 under the umask, as for any new file. (``save_settings`` once forced 0o666 on a
    new file: anyone could then add a notification command to it.)"""
    created = path.with_name("created.json")
    old = os.umask(0o022)
    try:
        save_settings(path, Config())
        load_settings(created)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert stat.S_IMODE(created.stat().st_mode) == 0o644


def test_a_file_nobody_may_write_is_not_replaced_even_when_executable(path: Path) -> None:
    write(path, default_file())
    path.chmod(0o555)
    with pytest.raises(SettingsSaveError, match="read-only"):
        save_settings(path, Config(trusted_projects=("/p",)))
    assert json.loads(path.read_text(encoding="utf-8")) == default_file()


def test_short_writes_still_write_the_whole_file(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.write

    def short(fd: int, data: Any) -> int:
        return real(fd, bytes(data[:100]))

    monkeypatch.setattr(os, "write", short)
    save_settings(path, Config(trusted_projects=("/p",)))
    monkeypatch.undo()
    assert Config.from_json(json.loads(path.read_text(encoding="utf-8"))) == Config(
        trusted_projects=("/p",)
    )


def test_a_save_syncs_the_directory_and_a_refused_sync_is_no_failure(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.fsync
    synced: list[bool] = []

    def fsync(fd: int) -> None:
        directory = stat.S_ISDIR(os.fstat(fd).st_mode)
        synced.append(directory)
        if directory:
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    save_settings(path, Config())
    monkeypatch.undo()
    assert synced == [False, True]  # the file, then its directory
    assert json.loads(path.read_text(encoding="utf-8")) == Config().to_json()


def test_defaults_are_created_exclusively_where_hard_links_fail(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(src: Any, dst: Any) -> None:
        raise OSError(errno.EPERM, os.strerror(errno.EPERM))

    monkeypatch.setattr(os, "link", no_links)
    old = os.umask(0o022)
    try:
        loaded = load_settings(path)
    finally:
        os.umask(old)
    assert loaded.notices == ()
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert json.loads(path.read_text(encoding="utf-8")) == Config().to_json()
    assert sorted(p.name for p in path.parent.iterdir()) == ["pi-agent-ask.json"]


@pytest.mark.parametrize("links", [True, False])
def test_a_file_created_by_someone_else_meanwhile_is_read_not_replaced(
    path: Path, monkeypatch: pytest.MonkeyPatch, links: bool
) -> None:
    theirs = write(path.with_name("theirs.json"), default_file(trustedProjects=["/theirs"]))
    real_read = st._read_text
    calls = 0

    def read_after_them(target: Path) -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            path.write_text(theirs, encoding="utf-8")  # they create it after our read failed
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(target))
        return real_read(target)

    monkeypatch.setattr(st, "_read_text", read_after_them)
    if not links:
        monkeypatch.setattr(os, "link", lambda src, dst: (_ for _ in ()).throw(OSError(1, "no")))
    loaded = load_settings(path)
    assert (calls, loaded.notices) == (2, ())
    assert loaded.config.trusted_projects == ("/theirs",)
    assert path.read_text(encoding="utf-8") == theirs


def test_the_notice_of_defaults_that_cannot_be_created_names_the_os_error(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "agent"
    blocker.write_text("a regular file", encoding="utf-8")
    path = blocker / "extensions" / "pi-agent-ask.json"
    try:
        path.parent.mkdir(parents=True)
    except OSError as error:
        detail = str(error)
    assert load_settings(path).notices == (SAVE_ERROR_PREFIX.format(path=path) + detail,)


def _read_notice(path: Path, reason: str) -> str:
    return (
        f"Unable to read ask config at {path}: {reason}. Loaded defaults for this session and "
        "left the config file unchanged. Fix the config file; pi-agent-ask reads it again at "
        "its next start."
    )


def test_a_settings_path_that_is_a_device_or_a_fifo_is_refused(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.symlink_to("/dev/null")
    assert load_settings(path).notices == (_read_notice(path, "not a regular file"),)
    fifo = path.with_name("fifo.json")
    os.mkfifo(fifo)
    holder = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # a writer: no open can block
    try:
        assert load_settings(fifo).notices == (_read_notice(fifo, "not a regular file"),)
    finally:
        os.close(holder)


def _sized(size: int) -> str:
    """A valid current file of exactly ``size`` bytes whose last byte matters (``}``)."""
    body = json.dumps(default_file(trustedProjects=["/p"]))
    return body[:-1] + " " * (size - len(body)) + "}"


def test_a_file_of_the_largest_size_loads_whole_and_one_byte_more_is_refused(
    path: Path,
) -> None:
    write(path, _sized(st.SETTINGS_MAX_BYTES))
    assert path.stat().st_size == st.SETTINGS_MAX_BYTES
    loaded = load_settings(path)
    assert (loaded.notices, loaded.config.trusted_projects) == ((), ("/p",))
    write(path, _sized(st.SETTINGS_MAX_BYTES + 1))
    loaded = load_settings(path)
    assert loaded.notices == (_read_notice(path, f"larger than {st.SETTINGS_MAX_BYTES} bytes"),)
    assert loaded.config == Config()


def test_strict_reading_names_the_section_at_fault() -> None:
    for data, message in (
        (default_file(notifications=5), "notifications must be an object"),
        (default_file(behaviour=[]), "behaviour must be an object"),
        ([default_file()], "the config must be a JSON object"),
        (default_file(schemaVersion=5), "schemaVersion must be 6"),
        (
            default_file(notifications={"enabled": "yes"}),
            "notifications.enabled must be true or false",
        ),
        (
            default_file(behaviour={"questionMode": "loud"}),
            'behaviour.questionMode must be "standard" or "background-only"',
        ),
        (
            default_file(behaviour={"historyTools": 1}),
            "behaviour.historyTools must be true or false",
        ),
        (default_file(trustedProjects="/p"), "trustedProjects must be a list of paths"),
        (default_file(trustedProjects=["/p", 3]), "trustedProjects must be a list of paths"),
    ):
        with pytest.raises(st.InvalidConfigError) as raised:
            Config.from_json(data)
        assert str(raised.value) == message
    with pytest.raises(KeyError) as missing:
        Config().keymaps.context("sidebar")
    assert missing.value.args == ("sidebar",)


def test_notifications_without_enabled_are_enabled() -> None:
    data = default_file(notifications={"channels": ["osc9"]})
    assert Config.from_json(data).notifications == st.Notifications(True, ("osc9",))


def test_a_load_without_a_project_has_no_project_dir(path: Path) -> None:
    loaded = load_settings(path)
    assert (loaded.project_dir, loaded.project_question_mode) == (None, None)


# --------------------------------------------------------------------------------------------
# Projects
# --------------------------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    directory = tmp_path / "project"
    directory.mkdir()
    return directory


def test_a_project_file_may_start_with_a_schema_version(path: Path, project: Path) -> None:
    write(path, default_file(trustedProjects=[str(project)]))
    body = {"schemaVersion": 6, "behaviour": {"questionMode": "background-only"}}
    write(project_settings_path(project), body)
    loaded = load_settings(path, project_dir=project)
    assert (loaded.notices, loaded.project_question_mode) == ((), "background-only")
    again = loaded.with_global_config(loaded.global_config)
    assert again.project_question_mode == "background-only"
    assert again.config.behaviour.question_mode == "background-only"


def test_a_project_behaviour_that_is_no_object_hides_no_later_key(
    path: Path, project: Path
) -> None:
    write(path, default_file(trustedProjects=[str(project)]))
    file = project_settings_path(project)
    write(file, {"behaviour": "background-only", "theme": "dark"})
    loaded = load_settings(path, project_dir=project)
    assert loaded.notices == (
        f"Project ask config at {file} may only set behaviour.questionMode; ignored: "
        "behaviour, theme.",
    )


def test_a_project_s_ignored_keys_are_named_before_its_bad_mode(path: Path, project: Path) -> None:
    write(path, default_file(trustedProjects=[str(project)]))
    file = project_settings_path(project)
    write(file, {"behaviour": {"questionMode": "loud"}, "theme": "dark"})
    loaded = load_settings(path, project_dir=project)
    assert loaded.notices == (
        f"Project ask config at {file} may only set behaviour.questionMode; ignored: theme.",
        f"Ignored behaviour.questionMode in project ask config at {file}: it must be "
        '"standard" or "background-only".',
    )
    assert loaded.project_question_mode is None


def test_a_fifo_settings_file_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    """In process, so the mutation run can judge it (``test_hostile_files`` checks the same in
    a subprocess): the read runs in a thread, and a read that blocks in ``open`` waiting for a
    writer is released by opening the FIFO for writing, then fails the test."""
    fifo = tmp_path / "pi-agent-ask.json"
    os.mkfifo(fifo)
    outcome: list[BaseException | str] = []

    def read() -> None:
        try:
            outcome.append(st._read_text(fifo))
        except BaseException as error:  # handed over to the test thread
            outcome.append(error)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=30)  # not a timing check: only a reader that blocked is still here
    if reader.is_alive():
        os.close(os.open(fifo, os.O_WRONLY))  # the rendezvous the blocked open waits for
        reader.join()
        pytest.fail("opening a FIFO settings file waited for a writer")
    assert len(outcome) == 1
    assert isinstance(outcome[0], st.SettingsFileRefused)
    assert str(outcome[0]) == "not a regular file"
