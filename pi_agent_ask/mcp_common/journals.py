"""Where the desk keeps each agent's state: one session journal per agent key.

An agent key is any short printable text (a client's ``X-Pi-Agent-Ask-Key`` header, or its MCP
session id). Its journal lives under the desk's state directory in a file whose name is a
readable slug of the key plus a hash of the whole key, so two keys never share a file and no key
can name a path outside the directory. Beside each journal a ``.key`` file keeps the key itself:
the hash cannot be reversed, and a desk that starts reopens every journal it finds there.

A stdio server with no ``--key`` claims its default key (:func:`claim_default_key`): it holds a
lock on ``<journal name>.live`` beside the journal for as long as it runs. A second server of
the same client in the same directory, started while the first runs, finds that key claimed and
takes the next free one (``<client> #2@<cwd>``, ...): two agents running at once never share a
key, so neither takes the other's answers, and an agent that restarts after its server ended
claims the first key again and finds its own journal.

One desk owns a state directory at a time: it holds an exclusive lock on ``desk.lock`` there
(:func:`lock_state_dir`) for as long as it runs, so a second desk on the same directory (with
its own connection file) is refused at start instead of fighting over the journals. The lock
is the kernel's (``flock``): it goes with the process, so a killed desk leaves none behind.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "CLAIM_SUFFIX",
    "JOURNAL_SUFFIX",
    "KEY_SUFFIX",
    "LOCK_NAME",
    "MAX_KEY_LENGTH",
    "InvalidKey",
    "StateDirInUse",
    "check_key",
    "claim_default_key",
    "default_key",
    "default_state_dir",
    "journal_name",
    "journal_path",
    "known_keys",
    "lock_state_dir",
    "record_key",
    "wait_until_free",
]

JOURNAL_SUFFIX = ".pias"
KEY_SUFFIX = ".key"
CLAIM_SUFFIX = ".live"
MAX_RUNS = 1000
"""Default keys a server tries before it gives up claiming one (and uses the first)."""
MAX_KEY_LENGTH = 200
_SLUG_LENGTH = 40
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


LOCK_NAME = "desk.lock"


class StateDirInUse(Exception):
    """Another desk holds the state directory's lock."""


@contextlib.contextmanager
def lock_state_dir(state_dir: Path) -> Iterator[None]:
    """Hold the state directory's desk lock (creating the directory, mode 0700) while the block
    runs; raises :class:`StateDirInUse` when another desk holds it."""
    if state_dir.exists() and not state_dir.is_dir():
        # mkdir's own words for it are "File exists", which does not say what is wrong.
        raise NotADirectoryError(
            errno.ENOTDIR, "the state directory is a file, not a directory", str(state_dir)
        )
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(state_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StateDirInUse(
                f"another desk is using the state directory {state_dir}; stop it, or give this "
                "desk its own --state directory"
            ) from None
        yield
    finally:
        os.close(fd)


def wait_until_free(state_dir: Path) -> None:
    """Block (a worker thread's call) until no desk holds ``state_dir``'s lock."""
    try:
        fd = os.open(state_dir / LOCK_NAME, os.O_RDONLY)
    except OSError:
        return  # no lock file: no desk ever ran there
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    finally:
        os.close(fd)


class InvalidKey(ValueError):
    """An agent key that is empty, too long or not printable text."""


def check_key(key: str) -> str:
    """The key itself when it is acceptable; raises :class:`InvalidKey` otherwise."""
    if not key.strip():
        raise InvalidKey("The agent key is empty.")
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidKey(f"The agent key is longer than {MAX_KEY_LENGTH} characters.")
    if not key.isprintable():
        raise InvalidKey("The agent key contains control or invisible characters.")
    return key


def default_key(client: str, cwd: str | os.PathLike[str], run: int = 1) -> str:
    """An agent's default key, ``<client>@<cwd>`` (the stdio server's, the hook's); for the
    ``run``-th server of that client running in that directory at once, ``<client> #run@<cwd>``
    (:func:`claim_default_key`; the number comes first, where a display that shortens a long
    key at its end keeps it).

    One that would be longer than ``MAX_KEY_LENGTH`` keeps the client's name (its first 60
    characters) and the end of the directory, after ``…``, and ends in ``#`` and 8 hex digits
    of the unnumbered whole one's SHA-256, so two directories that end alike stay two agents.
    A character no key may hold (a control or invisible one: a tab in a directory's name) is
    ``?``."""
    client, place = _printable(client), _printable(os.fspath(cwd))
    number = "" if run == 1 else f" #{run}"
    full = f"{client}{number}@{place}"
    if len(full) <= MAX_KEY_LENGTH:
        return full
    whole = f"{client}@{place}".encode("utf-8", "surrogatepass")
    digest = hashlib.sha256(whole).hexdigest()[:8]
    head = f"{client[:60]}{number}@…"
    room = MAX_KEY_LENGTH - len(head) - len(digest) - 1
    return f"{head}{place[-room:]}#{digest}"


def claim_default_key(state_dir: Path, client: str, cwd: str | os.PathLike[str]) -> tuple[str, int]:
    """The first default key of ``client`` in ``cwd`` (run 1, 2, ...) that no running server
    holds, and the open descriptor of its claim: the key is this process's until the
    descriptor is closed (or the process ends: the lock is the kernel's ``flock``). Raises
    ``OSError`` when the state directory cannot hold a claim."""
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    for run in range(1, MAX_RUNS + 1):
        key = default_key(client, cwd, run)
        claim = state_dir / (journal_name(key) + CLAIM_SUFFIX)
        fd = os.open(claim, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        except BaseException:
            os.close(fd)
            raise
        return key, fd
    raise OSError(errno.EBUSY, f"{MAX_RUNS} servers hold the keys of {client!r} here", str(cwd))


def _printable(text: str) -> str:
    return text if text.isprintable() else "".join(c if c.isprintable() else "?" for c in text)


def default_state_dir(env: os._Environ[str] | dict[str, str] | None = None) -> Path:
    """``~/.pi/agent/pi-agent-ask/desk/`` (``HOME`` from ``env`` when given)."""
    environment = os.environ if env is None else env
    home = environment.get("HOME")
    base = Path(home) if home else Path.home()
    return base / ".pi" / "agent" / "pi-agent-ask" / "desk"


def journal_name(key: str) -> str:
    """The file stem of ``key``'s journal: a slug of the key and 16 hex digits of its hash."""
    slug = _UNSAFE.sub("-", key).strip("-.")[:_SLUG_LENGTH] or "agent"
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{slug}-{digest}"


def journal_path(state_dir: Path, key: str) -> Path:
    return state_dir / (journal_name(key) + JOURNAL_SUFFIX)


def record_key(state_dir: Path, key: str) -> Path:
    """Make sure the state directory (mode 0700) and ``key``'s ``.key`` file exist; returns
    the journal path. The key file is written before the journal, so every journal a desk
    finds has its key beside it."""
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    key_file = state_dir / (journal_name(key) + KEY_SUFFIX)
    if not key_file.exists():
        partial = key_file.with_name(key_file.name + ".tmp")
        with partial.open("w", encoding="utf-8") as handle:
            handle.write(key)
            handle.flush()
            os.fsync(handle.fileno())
        partial.replace(key_file)
    return journal_path(state_dir, key)


def known_keys(state_dir: Path) -> list[str]:
    """The keys of every agent with state in ``state_dir``, oldest journal first.

    A key file that cannot be read, or whose text does not hash to its own name (edited by
    hand), is skipped: a desk never opens a journal under a key it cannot vouch for."""
    if not state_dir.is_dir():
        return []
    found: list[tuple[float, str]] = []
    for key_file in state_dir.glob("*" + KEY_SUFFIX):
        try:
            key = key_file.read_text(encoding="utf-8")
            check_key(key)
        except (OSError, UnicodeDecodeError, InvalidKey):
            continue
        if journal_name(key) + KEY_SUFFIX != key_file.name:
            continue
        try:
            stamp = key_file.stat().st_mtime
        except OSError:
            continue
        found.append((stamp, key))
    return [key for _stamp, key in sorted(found)]
