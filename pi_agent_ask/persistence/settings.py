"""The ask settings store: typed config, loading with migrations, saving, project override.

The file is JSON that people edit, at ``$PI_CODING_AGENT_DIR/extensions/pi-agent-ask.json``
(agent directory ``~/.pi/agent`` when the variable is unset). Rules, stated once:

- Loading never rewrites, renames or backs up an existing file. Older versions (1..5) migrate
  in memory only; a missing file is created with the full defaults, and only when it is still
  missing at the moment of creation.
- Whatever the file holds, loading returns a usable :class:`Config` and never raises: an
  unreadable, unparsable, unversioned, future-version or mistyped file loads the defaults with
  the catalog's notice; a bad ``keymaps`` section only replaces the keymaps with the defaults;
  bad notification channels are dropped.
- Saving writes the whole normalised current-version file atomically (a temporary file in the
  same directory, then a rename), so a reader never sees half a file.
- A project may override ``behaviour.questionMode`` only, through
  ``<project>/.pi/extensions/pi-agent-ask.json``, and only when the global file lists the
  project's absolute path in ``trustedProjects``.

JSON names are the file's (camelCase); Python names are snake_case. ``from_json`` is strict
(it raises :class:`InvalidConfigError` on anything it cannot represent); the tolerant path the
loader takes is :func:`decode_config_file`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import stat
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal, cast

import attrs

from pi_agent_ask.persistence.paths import agent_dir
from pi_agent_ask.persistence.settings_keymaps import (
    JSON,
    KEYMAP_CONTEXTS,
    EditorKeymap,
    GlobalKeymap,
    InvalidConfigError,
    InvalidKeymapsError,
    KeymapContext,
    Keymaps,
    MainKeymap,
    NoteEditorKeymap,
    SettingsModalKeymap,
    camel,
    is_object,
    keymaps_fallback_notice,
)
from pi_agent_ask.persistence.settings_migrations import MIGRATIONS, Migration, schema_version

__all__ = [
    "CURRENT_SCHEMA_VERSION",
    "INVALID_CONFIG_NOTICE",
    "KEYMAP_CONTEXTS",
    "MIGRATIONS",
    "MIGRATION_FAILED_NOTICE",
    "QUESTION_MODES",
    "Behaviour",
    "CommandChannel",
    "Config",
    "DecodedConfig",
    "EditorKeymap",
    "GlobalKeymap",
    "InvalidConfigError",
    "InvalidKeymapsError",
    "KeymapContext",
    "Keymaps",
    "LoadedSettings",
    "MainKeymap",
    "NoteEditorKeymap",
    "NotificationChannel",
    "Notifications",
    "QuestionMode",
    "SettingsModalKeymap",
    "SettingsSaveError",
    "agent_dir",
    "decode_config_file",
    "keymaps_fallback_notice",
    "load_settings",
    "normalize_channels",
    "project_settings_path",
    "save_settings",
    "settings_path",
]

CURRENT_SCHEMA_VERSION = 6

QuestionMode = Literal["standard", "background-only"]
QUESTION_MODES: tuple[QuestionMode, ...] = ("standard", "background-only")

INVALID_CONFIG_NOTICE = (
    "Config was invalid or unsupported. Loaded defaults for this session and left the config "
    "file unchanged. Fix the config file; pi-agent-ask reads it again at its next start."
)
MIGRATION_FAILED_NOTICE = (
    "Config migration failed. Loaded defaults for this session and left the config file "
    "unchanged. Fix the config file; pi-agent-ask reads it again at its next start."
)
_SAVE_ERROR_TEMPLATE = (
    "Unable to save ask config at {path}. The file may be read-only or managed outside "
    "pi-agent-ask; edit it by hand (read again at the next start). {detail}"
)

SETTINGS_FILE_NAME = "pi-agent-ask.json"


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


class SettingsSaveError(OSError):
    """Writing the settings file failed; the message is the text to show the person."""

    def __init__(self, path: str | os.PathLike[str], detail: str) -> None:
        self.path = os.fspath(path)
        self.detail = detail
        super().__init__(_SAVE_ERROR_TEMPLATE.format(path=self.path, detail=detail))

    def __str__(self) -> str:
        return _SAVE_ERROR_TEMPLATE.format(path=self.path, detail=self.detail)


# --------------------------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------------------------


def settings_path(env: Mapping[str, str]) -> Path:
    """The global settings file: ``<agent dir>/extensions/pi-agent-ask.json``."""
    return agent_dir(env) / "extensions" / SETTINGS_FILE_NAME


def project_settings_path(project_dir: str | os.PathLike[str]) -> Path:
    """The project override file: ``<project>/.pi/extensions/pi-agent-ask.json``."""
    return Path(project_dir) / ".pi" / "extensions" / SETTINGS_FILE_NAME


# --------------------------------------------------------------------------------------------
# Typed config
# --------------------------------------------------------------------------------------------


def _is_bool(value: object) -> bool:
    return isinstance(value, bool)


@attrs.frozen(repr=False)
class Behaviour:
    """The ``behaviour`` section."""

    auto_submit_when_answered_without_notes: bool = False
    confirm_dismiss_when_dirty: bool = True
    double_press_review_shortcuts: bool = True
    present_single_as_multi: bool = False
    show_footer_hints: bool = True
    history_tools: bool = False
    question_mode: QuestionMode = "standard"

    def to_json(self) -> dict[str, JSON]:
        return {camel(field.name): getattr(self, field.name) for field in attrs.fields(Behaviour)}

    @classmethod
    def from_json(cls, data: JSON) -> Behaviour:
        """Read ``behaviour``; absent keys take their defaults, unknown keys are ignored."""
        if not is_object(data):
            raise InvalidConfigError("behaviour must be an object")
        values: dict[str, Any] = {}
        for field in attrs.fields(Behaviour):
            name = camel(field.name)
            if name not in data:
                continue
            value = data[name]
            if field.name == "question_mode":
                if value not in QUESTION_MODES:
                    raise InvalidConfigError(
                        'behaviour.questionMode must be "standard" or "background-only"'
                    )
            elif not _is_bool(value):
                raise InvalidConfigError(f"behaviour.{name} must be true or false")
            values[field.name] = value
        return cls(**values)


@attrs.frozen(repr=False)
class CommandChannel:
    """A notification channel that runs ``command`` through the shell."""

    command: str

    def to_json(self) -> dict[str, JSON]:
        return {"type": "command", "command": self.command}


NotificationChannel = Literal["bell", "osc9", "osc777"] | CommandChannel
_NAMED_CHANNELS: tuple[str, ...] = ("bell", "osc9", "osc777")
_DEFAULT_CHANNELS: tuple[NotificationChannel, ...] = ("bell",)


def _channel(value: JSON) -> NotificationChannel | None:
    if isinstance(value, str) and value in _NAMED_CHANNELS:
        return cast(NotificationChannel, value)
    if (
        is_object(value)
        and value.get("type") == "command"
        and isinstance(value.get("command"), str)
        and value["command"].strip()
    ):
        return CommandChannel(value["command"])
    return None


def normalize_channels(value: JSON) -> tuple[tuple[NotificationChannel, ...], tuple[int, ...]]:
    """Channels as the catalog normalises them, and the indices of the entries dropped.

    Not a list → ``("bell",)``; invalid entries are dropped; none left → ``("bell",)``.
    Valid entries: ``"bell"``, ``"osc9"``, ``"osc777"``, ``{"type": "command", "command":
    <non-blank string>}``.
    """
    if not isinstance(value, list):
        return _DEFAULT_CHANNELS, ()
    kept: list[NotificationChannel] = []
    dropped: list[int] = []
    for index, item in enumerate(value):
        channel = _channel(item)
        if channel is None:
            dropped.append(index)
        else:
            kept.append(channel)
    return (tuple(kept) or _DEFAULT_CHANNELS), tuple(dropped)


def _channels_converter(value: Iterable[NotificationChannel]) -> tuple[NotificationChannel, ...]:
    return tuple(value)


@attrs.frozen(repr=False)
class Notifications:
    """The ``notifications`` section; channels run in this order."""

    enabled: bool = True
    channels: tuple[NotificationChannel, ...] = attrs.field(
        default=_DEFAULT_CHANNELS, converter=_channels_converter
    )

    def to_json(self) -> dict[str, JSON]:
        return {
            "enabled": self.enabled,
            "channels": [
                c.to_json() if isinstance(c, CommandChannel) else c for c in self.channels
            ],
        }

    @classmethod
    def from_json(cls, data: JSON) -> Notifications:
        """Read ``notifications``; channels are normalised (see :func:`normalize_channels`)."""
        if not is_object(data):
            raise InvalidConfigError("notifications must be an object")
        enabled = data.get("enabled", True)
        if not _is_bool(enabled):
            raise InvalidConfigError("notifications.enabled must be true or false")
        if "channels" not in data:
            return cls(enabled=enabled)
        return cls(enabled=enabled, channels=normalize_channels(data["channels"])[0])


def _trusted_projects(value: JSON) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidConfigError("trustedProjects must be a list of paths")
    return tuple(value)


def _paths(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(items)


@attrs.frozen(repr=False)
class Config:
    """The whole settings file (current schema version)."""

    SCHEMA_VERSION: ClassVar[int] = CURRENT_SCHEMA_VERSION

    behaviour: Behaviour = attrs.field(factory=Behaviour)
    keymaps: Keymaps = attrs.field(factory=Keymaps)
    notifications: Notifications = attrs.field(factory=Notifications)
    trusted_projects: tuple[str, ...] = attrs.field(default=(), converter=_paths)

    @property
    def schema_version(self) -> int:
        return CURRENT_SCHEMA_VERSION

    def to_json(self) -> dict[str, JSON]:
        """The full normalised file content."""
        return {
            "schemaVersion": CURRENT_SCHEMA_VERSION,
            "behaviour": self.behaviour.to_json(),
            "keymaps": self.keymaps.to_json(),
            "notifications": self.notifications.to_json(),
            "trustedProjects": list(self.trusted_projects),
        }

    @classmethod
    def from_json(cls, data: JSON) -> Config:
        """Read a current-version file strictly: any problem raises InvalidConfigError.

        Absent sections take their defaults; unknown keys are ignored. Use
        :func:`decode_config_file` for older versions and the tolerant load path.
        """
        if not is_object(data):
            raise InvalidConfigError("the config must be a JSON object")
        if schema_version(data) != CURRENT_SCHEMA_VERSION:
            raise InvalidConfigError(f"schemaVersion must be {CURRENT_SCHEMA_VERSION}")
        return cls(
            behaviour=Behaviour.from_json(data["behaviour"])
            if "behaviour" in data
            else Behaviour(),
            keymaps=Keymaps.from_json(data["keymaps"]) if "keymaps" in data else Keymaps(),
            notifications=(
                Notifications.from_json(data["notifications"])
                if "notifications" in data
                else Notifications()
            ),
            trusted_projects=(
                _trusted_projects(data["trustedProjects"]) if "trustedProjects" in data else ()
            ),
        )


# --------------------------------------------------------------------------------------------
# Decoding a parsed file
# --------------------------------------------------------------------------------------------


@attrs.frozen(repr=False)
class DecodedConfig:
    """The config a parsed file yields, the notices to show, and whether defaults replaced it."""

    config: Config
    notices: tuple[str, ...] = ()
    migrated_from: int | None = None
    used_defaults: bool = False
    problem: str | None = None
    """What was wrong first, when the file was invalid (its load names the file with it)."""


def _defaults(notice: str, problem: str | None = None) -> DecodedConfig:
    return DecodedConfig(Config(), (notice,), used_defaults=True, problem=problem)


_Global = tuple[Config, list[str], str | None]
"""The global file's config, its notices, and which file was invalid and why (``details``)."""


def _invalid(path: Path, problem: str) -> _Global:
    """The defaults for a file that was invalid: the reference's notice, unchanged, and the
    detail naming the file and what was wrong first."""
    return Config(), [INVALID_CONFIG_NOTICE], f"Config file {path}: {problem}."


def decode_config_file(
    data: JSON, *, migrations: Sequence[Migration] = MIGRATIONS
) -> DecodedConfig:
    """Turn parsed JSON from a settings file into a config, tolerantly; never raises.

    ``migrations`` are the steps from version 1 upwards (tests pass a failing step to see the
    migration notice). Versions below :data:`CURRENT_SCHEMA_VERSION` migrate in memory.
    """
    if not is_object(data):
        return _defaults(INVALID_CONFIG_NOTICE, "not a JSON object")
    version = schema_version(data)
    if version is None or not 1 <= version <= CURRENT_SCHEMA_VERSION:
        supported = f"schemaVersion must be a whole number from 1 to {CURRENT_SCHEMA_VERSION}"
        return _defaults(INVALID_CONFIG_NOTICE, supported)
    migrated: dict[str, JSON] = data
    if version < CURRENT_SCHEMA_VERSION:
        try:
            for step in migrations[version - 1 :]:
                migrated = step(migrated)
        except Exception:
            # A migration step is code over untrusted data: whatever it raises, the person gets
            # the defaults and a notice, and the file stays as it is.
            return _defaults(MIGRATION_FAILED_NOTICE)
        if not is_object(migrated) or schema_version(migrated) != CURRENT_SCHEMA_VERSION:
            return _defaults(MIGRATION_FAILED_NOTICE)
    origin = version if version < CURRENT_SCHEMA_VERSION else None

    notices: list[str] = []
    keymaps_json = migrated.get("keymaps")
    without_keymaps = {key: value for key, value in migrated.items() if key != "keymaps"}
    try:
        config = Config.from_json(without_keymaps)
    except InvalidConfigError as error:
        return _defaults(INVALID_CONFIG_NOTICE, str(error))

    if "keymaps" in migrated:
        try:
            config = attrs.evolve(config, keymaps=Keymaps.from_json(keymaps_json))
        except InvalidKeymapsError as error:
            notices.append(keymaps_fallback_notice(error.reason))

    notifications = migrated.get("notifications")
    if is_object(notifications) and "channels" in notifications:
        channels = notifications["channels"]
        if not isinstance(channels, list):
            notices.append(
                "notifications.channels must be a list; using the bell. "
                "Fix the config; pi-agent-ask reads it again at its next start."
            )
        else:
            dropped = normalize_channels(channels)[1]
            if dropped:
                where = ", ".join(f"notifications.channels[{index}]" for index in dropped)
                notices.append(
                    f"Ignored invalid notification channels: {where}. "
                    "Fix the config; pi-agent-ask reads it again at its next start."
                )

    relative = [entry for entry in config.trusted_projects if not Path(entry).is_absolute()]
    if relative:
        config = attrs.evolve(
            config,
            trusted_projects=tuple(e for e in config.trusted_projects if Path(e).is_absolute()),
        )
        listed = ", ".join(json.dumps(entry) for entry in relative)
        notices.append(
            f"Ignored trustedProjects entries that are not absolute paths: {listed}. "
            "Fix the config; pi-agent-ask reads it again at its next start."
        )
    return DecodedConfig(config, tuple(notices), migrated_from=origin)


# --------------------------------------------------------------------------------------------
# Reading and writing files
# --------------------------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    # JSON has no NaN or Infinity; Python's parser accepts them unless told otherwise.
    raise ValueError(f"{name} is not JSON")


def _parse_json(text: str) -> JSON:
    return json.loads(text, parse_constant=_reject_constant)


def _encode(config: Config) -> str:
    return json.dumps(config.to_json(), indent=2, ensure_ascii=False) + "\n"


def _write_file(path: Path, content: str, *, replace: bool) -> None:
    """Write ``content`` to ``path`` through a temporary file in the same directory.

    ``replace=False`` creates the file only if it does not exist (a hard link never replaces
    an existing name; where links are unsupported, an exclusive create is used instead) and
    raises :class:`_TargetExists` otherwise. The temporary file is removed on every path.
    """
    parent = path.parent
    parent.mkdir(parents=True, exist_ok=True)
    mode = 0o666
    keep_mode = False  # a new file takes 0o666 under the umask, like any file created here
    if replace:
        try:
            existing = path.stat()
        except FileNotFoundError:
            existing = None
        if existing is not None:
            if not stat.S_ISREG(existing.st_mode):
                raise IsADirectoryError(f"{path} is not a regular file")
            if existing.st_mode & 0o222 == 0:
                # Someone made the file read-only on purpose; a rename would get around that.
                raise PermissionError(f"{path} is read-only")
            mode = stat.S_IMODE(existing.st_mode)
            keep_mode = True
    temp = parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    data = content.encode("utf-8")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        try:
            if keep_mode:
                # os.open applied the umask; the replacement keeps the old file's exact mode.
                os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            temp.replace(path)
        else:
            try:
                os.link(temp, path)
            except FileExistsError:
                raise _TargetExists(path) from None
            except OSError:
                _create_exclusive(path, data)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
    if hasattr(os, "O_DIRECTORY"):
        # Make the rename itself durable; best effort (some filesystems refuse).
        with contextlib.suppress(OSError):
            dir_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)


class _TargetExists(Exception):
    """The file to create exists already (someone else created it first)."""


def _create_exclusive(path: Path, data: bytes) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except FileExistsError:
        raise _TargetExists(path) from None
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _resolve_target(path: Path) -> Path:
    # A settings file symlinked from a dotfiles repository is written where it really lives, so
    # the link survives the rename.
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def save_settings(path: str | os.PathLike[str], config: Config) -> None:
    """Write the full normalised current-version file atomically.

    Creates missing parent directories. Raises :class:`SettingsSaveError` (whose message is
    the text to show) when the file cannot be written; the old file is then unchanged.
    """
    target = Path(path)
    try:
        _write_file(_resolve_target(target), _encode(config), replace=True)
    except OSError as error:
        raise SettingsSaveError(path, str(error)) from error


def _create_defaults(path: Path) -> None:
    """Create the settings file with the defaults; _TargetExists if it appeared meanwhile."""
    try:
        _write_file(path, _encode(Config()), replace=False)
    except OSError as error:
        raise SettingsSaveError(path, str(error)) from error


@attrs.frozen(repr=False)
class LoadedSettings:
    """What loading the settings produced.

    ``config`` is the effective config (the project override applied); ``global_config`` is
    what the global file says, and is what the settings overlay edits and saves, so a
    project's mode never leaks into the global file.
    """

    path: Path
    config: Config
    global_config: Config
    notices: tuple[str, ...] = ()
    details: tuple[str, ...] = ()
    """What the notices leave out, for standard error and logs (printed before them): which
    file was invalid and what was wrong first (``Config file PATH: PROBLEM.``). The screens
    show the notices alone: a 40x12 form or overlay has no room for both."""
    project_dir: Path | None = None
    project_question_mode: QuestionMode | None = None

    @property
    def project_override_applied(self) -> bool:
        """Whether a trusted project's ``behaviour.questionMode`` is in effect."""
        return self.project_question_mode is not None

    def with_global_config(self, config: Config) -> LoadedSettings:
        """The same load after the global config changed (saved or reset in memory).

        The project's mode still applies only while the new global config trusts it.
        """
        mode = self.project_question_mode
        if mode is not None and (
            self.project_dir is None or not _is_trusted(self.project_dir, config.trusted_projects)
        ):
            mode = None
        return attrs.evolve(
            self,
            config=_apply_question_mode(config, mode),
            global_config=config,
            project_question_mode=mode,
        )


def _apply_question_mode(config: Config, mode: QuestionMode | None) -> Config:
    if mode is None:
        return config
    return attrs.evolve(config, behaviour=attrs.evolve(config.behaviour, question_mode=mode))


def _is_trusted(project_dir: Path, trusted: Iterable[str]) -> bool:
    """Whether ``project_dir`` is listed; paths compare normalised and, failing that, resolved."""
    wanted = os.path.normpath(Path(project_dir).absolute())
    entries = [os.path.normpath(entry) for entry in trusted if Path(entry).is_absolute()]
    if wanted in entries:
        return True
    real = _realpath(wanted)
    return real is not None and any(_realpath(entry) == real for entry in entries)


def _realpath(path: str) -> str | None:
    # Entries come from a hand-edited file: a NUL byte or an unreadable link is no match.
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return None


SETTINGS_MAX_BYTES = 1024 * 1024
"""Largest settings file read (1 MiB; the defaults take about 4 KiB)."""


class SettingsFileRefused(OSError):
    """A settings path that is not a regular file (a FIFO, a device, a directory) or is over
    ``SETTINGS_MAX_BYTES``: refused without blocking and without reading it whole."""


def _read_text(path: Path) -> str:
    """The text of a regular settings file of at most ``SETTINGS_MAX_BYTES``.

    Opened non-blocking (a FIFO opens at once instead of waiting for a writer) and checked
    through its descriptor before a byte is read, so a FIFO or a link to ``/dev/zero`` is a
    ``SettingsFileRefused``, never a hang or a read without end."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):  # what reading a directory has always said
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(mode):
            raise SettingsFileRefused("not a regular file")
        chunks: list[bytes] = []
        size = 0
        while size <= SETTINGS_MAX_BYTES:  # one byte past the cap tells a larger file
            chunk = os.read(fd, SETTINGS_MAX_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > SETTINGS_MAX_BYTES:
            raise SettingsFileRefused(f"larger than {SETTINGS_MAX_BYTES} bytes")
    finally:
        os.close(fd)
    # utf-8-sig: editors on some systems write a byte order mark; it is not part of the JSON.
    return b"".join(chunks).decode("utf-8-sig")


def _load_global(path: Path, *, migrations: Sequence[Migration]) -> _Global:
    for _attempt in range(2):
        try:
            text = _read_text(path)
        except (FileNotFoundError, NotADirectoryError):
            try:
                _create_defaults(path)
            except _TargetExists:
                continue  # created by someone else meanwhile: read theirs
            except SettingsSaveError as error:
                return Config(), [str(error)], None
            return Config(), [], None
        except UnicodeDecodeError as error:
            return _invalid(path, f"not UTF-8 text ({error.reason} at byte {error.start})")
        except OSError as error:
            unreadable = (
                f"Unable to read ask config at {path}: {error}. Loaded defaults for this "
                "session and left the config file unchanged. Fix the config file; "
                "pi-agent-ask reads it again at its next start."
            )
            return Config(), [unreadable], None
        try:
            data = _parse_json(text)
        except RecursionError:
            return _invalid(path, "not valid JSON: nested too deeply")
        except ValueError as error:
            return _invalid(path, f"not valid JSON: {error}")
        decoded = decode_config_file(data, migrations=migrations)
        if decoded.problem is not None:
            return _invalid(path, decoded.problem)
        return decoded.config, list(decoded.notices), None
    return Config(), [INVALID_CONFIG_NOTICE], None


_PROJECT_ALLOWED = "behaviour.questionMode"


def _load_project(
    project_dir: Path, global_config: Config, global_path: Path
) -> tuple[QuestionMode | None, list[str]]:
    path = project_settings_path(project_dir)
    # Trust first: an untrusted project's file is never opened, only noticed (``lexists``
    # neither blocks on a FIFO nor follows a link to a device).
    if not _is_trusted(project_dir, global_config.trusted_projects):
        if not os.path.lexists(path):
            return None, []
        return None, [
            f"Ignored project ask config at {path}: the project {project_dir} is not listed in "
            f"trustedProjects in {global_path}. Add its absolute path there to let it set "
            f"{_PROJECT_ALLOWED}."
        ]
    try:
        text = _read_text(path)
    except (FileNotFoundError, NotADirectoryError):
        return None, []
    except (OSError, UnicodeDecodeError) as error:
        return None, [f"Ignored project ask config at {path}: it could not be read ({error})."]
    try:
        data = _parse_json(text)
    except (ValueError, RecursionError):
        data = None
    if not is_object(data):
        return None, [f"Ignored project ask config at {path}: it is not a JSON object."]

    notices: list[str] = []
    ignored: list[str] = []
    mode: QuestionMode | None = None
    for key, value in data.items():
        if key == "schemaVersion":
            continue  # tolerated so the file can be a copy of the global one's shape
        if key != "behaviour":
            ignored.append(key)
            continue
        if not is_object(value):
            ignored.append("behaviour")
            continue
        for name, item in value.items():
            if name != "questionMode":
                ignored.append(f"behaviour.{name}")
            elif item in QUESTION_MODES:
                mode = cast(QuestionMode, item)
            else:
                notices.append(
                    f"Ignored {_PROJECT_ALLOWED} in project ask config at {path}: it must be "
                    f'"standard" or "background-only".'
                )
    if ignored:
        notices.insert(
            0,
            f"Project ask config at {path} may only set {_PROJECT_ALLOWED}; ignored: "
            f"{', '.join(ignored)}.",
        )
    return mode, notices


def load_settings(
    path: str | os.PathLike[str],
    *,
    project_dir: str | os.PathLike[str] | None = None,
    migrations: Sequence[Migration] = MIGRATIONS,
) -> LoadedSettings:
    """Load the global settings file, and a trusted project's override; never raises.

    A missing file is created with the defaults (the notice is the save error when that
    fails); an existing file is never written. ``project_dir`` is the project whose
    ``.pi/extensions/pi-agent-ask.json`` may set ``behaviour.questionMode`` (relative paths
    are taken from the current directory). ``migrations`` is for tests.
    """
    global_path = Path(path)
    global_config, notices, detail = _load_global(global_path, migrations=migrations)
    project: Path | None = None
    mode: QuestionMode | None = None
    if project_dir is not None:
        project = Path(os.path.normpath(Path(project_dir).absolute()))
        mode, project_notices = _load_project(project, global_config, global_path)
        notices.extend(project_notices)
    return LoadedSettings(
        path=global_path,
        config=_apply_question_mode(global_config, mode),
        global_config=global_config,
        notices=tuple(notices),
        details=() if detail is None else (detail,),
        project_dir=project,
        project_question_mode=mode,
    )
