"""The desk's terminal: the agents pane beside the one-agent form view.

:class:`DeskSurface` is the one-agent ``TerminalSurface`` (the same form view, key and mouse
bindings, notes, tabs and settings overlay) with a desk layout around it: a title line, the
agents pane (each agent's key, its pending count, whether it is blocked), a line saying which
agent the form on display comes from and whether that agent waits on it, and a status line with
the latest notice. While no form is on display the web page's sign-in lines take the whole
width under the pane (a link stands whole on one row at 80 columns). On a screen too narrow for
the pane and a form of ``FORM_MIN_WIDTH`` columns beside it, the pane gives way to one line
above the form (the agents, or the title while none is connected), the rules go, and the status
line shows only with a notice: the form keeps the terminal's width. The header is made for the
width it has, shortening its words rather than cutting them. The board (``board.py``) decides
which form is on display; this module only renders the board's state. It runs with
``ui.surface.run_terminal_surface``: the desk is always on screen (``has_content`` is always
true), so the application starts at once and stays until the desk stops.
"""

from __future__ import annotations

import functools
import textwrap
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import attrs
from prompt_toolkit.application import Application, get_app
from prompt_toolkit.data_structures import Size
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import StyleAndTextTuples, fragment_list_width
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent, merge_key_bindings
from prompt_toolkit.layout import (
    ConditionalContainer,
    Dimension,
    FormattedTextControl,
    HSplit,
    Layout,
    VSplit,
    Window,
)
from prompt_toolkit.output import Output

from pi_agent_ask.desk.board import AgentSnapshot, Board
from pi_agent_ask.desk.web.auth import CODE_LIFETIME
from pi_agent_ask.form.transcript import cell_width, drawn_text, wrap_line
from pi_agent_ask.persistence.settings import Config
from pi_agent_ask.ui.render.frame import SHORT_SCREEN_ROWS
from pi_agent_ask.ui.surface import TerminalSurface

__all__ = [
    "AGENTS_WIDTH",
    "FORM_MIN_WIDTH",
    "QUIT_KEY",
    "SIGN_IN_KEY",
    "Brief",
    "DeskSurface",
    "Listing",
    "Notice",
    "agent_line",
    "agent_rows",
    "form_header",
]

AGENTS_WIDTH = 30
PANE_KEPT_ROWS = 3
"""Rows the agents pane keeps above the full-width sign-in lines (its heading and two
agents), however many rows a QR code would take."""
FORM_MIN_WIDTH = 48
"""The pane stands beside the form only when the form keeps at least this many columns."""
QUIT_KEY = "c-q"
SIGN_IN_KEY = "c-o"
"""Makes a new sign-in link for the web page: in the sign-in lines, and in the status line
while a form is on display (which hides those lines)."""
SIGN_IN_HINT = "Ctrl-O: a sign-in link for the web page"
"""The status line's words while it has nothing else to say and a form hides the sign-in
lines."""
EMPTY_TEXT = "No questions waiting."
LINK_USED = "was used"
LINK_RAN_OUT = "ran out (a link lasts 10 minutes)"


def link_gone(why: str) -> str:
    """The sign-in lines once the link they showed signs no one in (``why``: it
    :data:`LINK_USED` or :data:`LINK_RAN_OUT`): how to have a new one."""
    return (
        f"\n Answer in a browser too: the sign-in link shown here {why}; Ctrl-O or "
        "'pi-agent-ask desk login-url' makes a new one.\n"
    )


MAX_NOTICES = 20
NOTICE_ROWS = 3
"""The most rows the latest notice takes at the bottom (it wraps up to there)."""


LINK_CUT = (
    "The link is cut to fit this screen; 'pi-agent-ask desk login-url' prints a new one on "
    "one line."
)
"""Under a sign-in link that had to go on under itself: a link a terminal finds (to click or
copy) is one on one line."""


QR_LEFT_OUT = "A taller screen shows a QR code here; 'pi-agent-ask desk login-url --qr' draws one."
"""In place of a QR code the screen has no room for."""


def _url_rows(url: str, width: int) -> list[str]:
    """``url`` in rows of at most ``width`` cells: the first after one space, the others
    after three (a hanging indent: the rows that go on read as one address, not as text of
    their own). An address has no spaces to wrap at, so it is cut where the row ends; then
    :data:`LINK_CUT` follows, wrapped between words, saying how to have it whole."""
    first = max(1, width - 1)
    step = max(1, width - 3)
    rest = url[first:]
    rows = [" " + url[:first], *("   " + rest[at : at + step] for at in range(0, len(rest), step))]
    if rest:
        rows.extend(_words(LINK_CUT, width))
    return rows


def _words(text: str, width: int) -> list[str]:
    """``text`` wrapped between words in rows of ``width`` cells, each after one space."""
    return textwrap.wrap(
        text, max(10, width), initial_indent=" ", subsequent_indent=" ", break_on_hyphens=False
    )


def _clip(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells (a wide character takes two), ending in ``…`` when
    it had to give way."""
    if cell_width(text) <= width:
        return text
    while text and cell_width(text) > width - 1:
        text = text[:-1]
    return text + "…"


@attrs.frozen
class Listing:
    """A notice that names several things ("Other desks: bob on alpha's form, ..."): on a
    screen where it does not fit, it keeps the items that fit whole and counts the rest
    (``, +2 more``), or says only ``counted`` when not even the first fits, rather than
    ending at the edge mid-name."""

    head: str
    items: tuple[str, ...]
    short: tuple[str, ...]
    """The same items in fewer words ("bob" for "bob on alpha's form"), tried when not even
    the first item fits in full."""
    counted: str
    """What it says when no item fits either way: the head and a count ("Other desks: on 3
    forms")."""

    def fitted(self, fits: Callable[[str], bool]) -> str:
        for items in (self.items, self.short):
            for shown in range(len(items), 0, -1):
                rest = len(items) - shown
                text = self.head + ", ".join(items[:shown]) + (f", +{rest} more" if rest else "")
                if fits(text):
                    return text
        return self.counted


@attrs.frozen
class Brief:
    """A notice with a shorter way of saying it, for a screen where the sentence does not fit
    (a short screen's one row, whose other rows are the form's)."""

    text: str
    short: str

    def fitted(self, fits: Callable[[str], bool]) -> str:
        return self.text if fits(self.text) else self.short


Notice = str | Listing | Brief
"""What the status line says: a sentence, or one it may shorten to the screen."""


def _shown(text: str) -> str:
    """Text from elsewhere (an agent's key, a notice) on one line, as the terminal is given it
    (``drawn_text``), so its cells are the cells it takes."""
    return drawn_text(text, keep_newlines=False)


def _padded(text: str, width: int) -> str:
    return text + " " * max(0, width - cell_width(text))


LEGEND = "\n ⏸ blocked on you\n … waiting for answers\n"


def agent_rows(
    board: Board, width: int = AGENTS_WIDTH, height: int | None = None
) -> StyleAndTextTuples:
    """The agents pane: a heading, one row per agent (pending count, blocked mark) and the
    marks' legend. In ``height`` rows the legend gives way first; then the agents with
    nothing waiting (no form, no wait: a desk that has run a while knows every agent it
    ever served); then the others that fit are listed, from the first or so that the one on
    display is the last, and a row counts the agents left out. Listed agents keep their
    order."""
    rows: StyleAndTextTuples = [("class:ask.title", " Agents\n")]
    agents = board.agents()
    if not agents:
        rows.append(("class:ask.muted", " none yet\n"))
    listed, left_out = agents, 0
    room = None if height is None else height - 1  # below the heading
    if room is not None and len(agents) > room:
        room = max(1, room - 1)  # the last row counts the agents left out
        busy = [agent for agent in agents if _busy(agent)]
        if len(busy) > room:
            shown = next((i for i, agent in enumerate(busy) if agent.displayed), 0)
            first = max(0, shown - room + 1)
            kept = {agent.key for agent in busy[first : first + room]}
        else:
            kept = {agent.key for agent in busy}
            idle = [agent.key for agent in agents if agent.key not in kept]
            kept.update(idle[: room - len(busy)])
        listed = [agent for agent in agents if agent.key in kept]
        left_out = len(agents) - len(listed)
    for agent in listed:
        pointer = "▶" if agent.displayed else " "
        mark = " ⏸" if agent.blocked else ("  " if not agent.waiting else " …")
        count = f"{agent.pending:>3}"
        name = _clip(_shown(agent.key), width - len(count) - len(mark) - 4)
        style = "class:ask.option.active" if agent.displayed else ""
        rows.append(("class:ask.pointer", pointer + " "))
        rows.append((style, _padded(name, width - len(count) - len(mark) - 4) + " "))
        rows.append(("class:ask.accent" if agent.pending else "class:ask.muted", count))
        rows.append(("class:ask.warning", mark + "\n"))
    if left_out:
        rows.append(("class:ask.muted", f" {_more(left_out)}\n"))
    elif room is None or len(agents) + LEGEND.count("\n") <= room:
        rows.append(("class:ask.muted", LEGEND))
    return rows


def agent_line(board: Board, width: int | None = None) -> StyleAndTextTuples:
    """The agents pane on one line (a narrow screen): each agent's key, pending count and
    blocked mark, the one on display marked ``▶``. Within ``width`` only whole agents are
    kept, as the pane keeps its rows: the one on display always (its key clipped, visibly,
    when it alone is too long), then those that block on the person, then those with
    anything waiting, then the rest; the listed keep their order, and ``+N more`` counts
    those left out (an agent blocked on the person was left out when idle ones came first)."""
    parts: StyleAndTextTuples = [("class:ask.title", " Agents")]
    agents = board.agents()
    groups = [_agent_group(agent, _shown(agent.key)) for agent in agents]
    if width is None:
        return parts + [part for group in groups for part in group]
    used = fragment_list_width(parts)
    first = sorted(
        range(len(agents)),
        key=lambda n: (not agents[n].displayed, not agents[n].blocked, not _busy(agents[n]), n),
    )
    kept: set[int] = set()
    for n in first:
        agent, size = agents[n], fragment_list_width(groups[n])
        # Room for the count of those left out should this one be the last listed (a later
        # one listed only shortens it).
        left = len(agents) - len(kept) - 1
        room = width - used - (len(_more(left)) if left else 0)
        if agent.displayed and size > room:  # alone too long: its key gives way (``_clip``)
            key = _shown(agent.key)
            rest = size - cell_width(key)  # the group's cells besides its key
            groups[n] = _agent_group(agent, _clip(key, max(2, room - rest)))
            size = fragment_list_width(groups[n])
        elif size > room:
            continue
        kept.add(n)
        used += size
    parts.extend(part for n, group in enumerate(groups) if n in kept for part in group)
    if len(kept) < len(agents):
        parts.append(("class:ask.muted", _more(len(agents) - len(kept))))
    return parts


def _busy(agent: AgentSnapshot) -> bool:
    """Whether ``agent`` has anything on the desk: forms waiting, a wait, a form on display.
    The agents pane lists these first when it has no room for every agent."""
    return bool(agent.pending or agent.waiting or agent.blocked or agent.displayed)


def _more(count: int) -> str:
    return f" +{count} more"


def _agent_group(agent: AgentSnapshot, key: str) -> StyleAndTextTuples:
    parts: StyleAndTextTuples = [("class:ask.muted", " ·")]
    if agent.displayed:
        parts.append(("class:ask.pointer", " ▶"))
    style = "class:ask.option.active" if agent.displayed else ""
    parts.append((style, f" {key}"))
    parts.append(("class:ask.accent" if agent.pending else "class:ask.muted", f" {agent.pending}"))
    if agent.blocked:
        parts.append(("class:ask.warning", " ⏸"))
    return parts


def form_header(board: Board, width: int | None = None) -> StyleAndTextTuples:
    """Which agent the form on display comes from, whether that agent waits on it and how many
    questions are behind it, in the longest wording that leaves a column free in ``width``
    (every wording when ``width`` is None): words are dropped or shortened, never cut."""
    current = board.current
    if current is None:
        # Forms may wait while none is on display: on a team desk, each is held by another
        # desk, or the store is away (the status line says which). "No questions waiting"
        # then contradicted the agents' counts beside it.
        waiting = sum(agent.pending for agent in board.agents())
        none = "not" if waiting == 1 else "none"
        return [
            (
                "class:ask.muted",
                f" {waiting} waiting, {none} free here." if waiting else " " + EMPTY_TEXT,
            )
        ]
    name = _shown(current.key)
    states: list[tuple[str, str]]
    if board.is_blocked(current):
        states = [
            ("class:ask.warning", "  ⏸ the agent is blocked until you answer"),
            ("class:ask.warning", "  ⏸ blocked until you answer"),
            ("class:ask.warning", "  ⏸ blocked"),
            ("class:ask.warning", " ⏸"),
        ]
    else:
        states = [
            ("class:ask.muted", "  (background question: the agent goes on working)"),
            ("class:ask.muted", "  (background question)"),
            ("class:ask.muted", "  (background)"),
            ("class:ask.muted", ""),
        ]
    # Every agent's pending questions, not only the forms shown: what is left after this one.
    behind = max(board.waiting_forms, sum(agent.pending for agent in board.agents()) - 1)
    mores = [f"  · {behind} more waiting", f" · {behind} more", ""] if behind else [""]
    # The count keeps its words longest: the state's short wordings still say it all.
    for more in mores:
        for state in states:
            parts: StyleAndTextTuples = [
                ("class:ask.muted", " From "),
                ("class:ask.title", name),
                state,
                ("class:ask.muted", more),
            ]
            if width is None or fragment_list_width(parts) < width:
                return parts
    # Not even the name fits: the name is clipped, visibly.
    room = max(1, (width or 0) - len(" From ") - fragment_list_width([states[-1]]) - 1)
    return [("class:ask.muted", " From "), ("class:ask.title", _clip(name, room)), states[-1]]


def _narrow(columns: int) -> bool:
    return columns < AGENTS_WIDTH + 1 + FORM_MIN_WIDTH


def _form_width(columns: int) -> int:
    """The columns the form's side has: all of them when the agents pane gives way."""
    return columns if _narrow(columns) else columns - AGENTS_WIDTH - 1


@attrs.define(eq=False)
class DeskSurface(TerminalSurface):
    """The desk's display: a ``TerminalSurface`` in the desk layout (see the module docstring).

    Set ``board`` before the first form is shown; ``quit`` is called on Ctrl-Q."""

    board: Board | None = None
    url: str = ""
    quit: Callable[[], None] = lambda: None
    notices: list[Notice] = attrs.field(factory=list)
    hint_text: str | None = None
    """What the person's last key did where the screen does not show it, in the status line
    (over the latest notice) until the next key or the next notice."""
    busy_text: str | None = None
    """What a key is doing while the form stays on display ("Saving for later…"), in the
    status line (over a hint and the latest notice) until it is done (:meth:`busy`)."""
    sign_in: str = ""
    """Shown while no form is on display: the web page's sign-in URL (and its QR code, for a
    listen other machines reach), set by the desk once it listens (:meth:`show_sign_in`)."""
    login_url: Callable[[], str] | None = None
    """Makes a new one-time sign-in URL for the web page; ``None`` until the desk listens."""
    sign_in_lines: Callable[[str], str] = lambda url: url
    """The sign-in lines (:attr:`sign_in`) of a URL."""
    sign_in_url: str = ""
    """The URL the sign-in lines show, until it is used or runs out (:func:`link_gone`)."""
    link: str | None = None
    """A sign-in URL made with Ctrl-O while a form is on display: in the status line (over
    the latest notice) until the next key."""

    @property
    def has_content(self) -> bool:
        return True

    def notice(self, text: Notice) -> None:
        """Show a message for the person in the status line (the latest one wins, also over
        what the last key did: on a team desk "Deferred: ..." hid "The team's store cannot
        be reached ..." for as long as no key was pressed)."""
        self.hint_text = None
        self.notices.append(text)
        del self.notices[:-MAX_NOTICES]
        self.invalidate()

    def hint(self, text: str) -> None:
        """Say what a key did, in the status line until the next key (``Esc`` on a desk where
        no other form waits brings the same form back: without words it looked ignored)."""
        self.hint_text = text
        self.invalidate()

    def busy(self, text: str | None) -> None:
        """Say what a key is doing until it is done (``None``): the keys typed meanwhile do
        not end it, as they end a hint."""
        self.busy_text = text
        self.invalidate()

    def _clear_hint(self, _processor: object) -> None:
        if self.hint_text is not None or self.link is not None:
            self.hint_text = None
            self.link = None
            self.invalidate()

    def show_sign_in(self, login_url: Callable[[], str], lines: Callable[[str], str]) -> None:
        """The desk listens: its sign-in lines show while no form is on display, and Ctrl-O
        makes a new link (``login_url``; ``lines``: the sign-in lines of a URL)."""
        self.login_url = login_url
        self.sign_in_lines = lines
        self._show_link(login_url())

    def new_sign_in(self) -> None:
        """Ctrl-O: a new sign-in link, in the sign-in lines and, while a form is on display
        (hiding them), in the status line until the next key. The link shown at start may be
        used or past its 10 minutes by then."""
        if self.login_url is None:
            return
        url = self.login_url()
        self._show_link(url)
        if self.board is not None and self.board.current is not None:
            self.link = url

    def _show_link(self, url: str) -> None:
        """The sign-in lines show ``url`` until it is used (:meth:`link_used`) or runs out
        (they showed the first link for good, used or not, however old)."""
        self.sign_in_url = url
        self.sign_in = self.sign_in_lines(url)
        self._call_later(CODE_LIFETIME, functools.partial(self._link_gone, url, LINK_RAN_OUT))
        self.invalidate()

    def link_used(self, code: str) -> None:
        """A sign-in used ``code`` (the web desk's ``Auth.used``): the sign-in lines say so
        when it was theirs."""
        if parse_qs(urlsplit(self.sign_in_url).query).get("code") == [code]:
            self._link_gone(self.sign_in_url, LINK_USED)

    def _link_gone(self, url: str, why: str) -> None:
        if url == self.sign_in_url:
            self.sign_in_url = ""
            self.sign_in = link_gone(why)
            self.invalidate()

    def apply_config(self, config: Config) -> None:
        """A config was saved: the settings file loads now, so the notices its load gave
        leave the status line too, the desk's own and those the agents' runtimes relayed
        (``key: notice``)."""
        stale = self.settings.notices
        super().apply_config(config)
        self.notices[:] = [
            text
            for text in self.notices
            if not isinstance(text, str) or not any(n in text for n in stale)
        ]

    def write_terminal(self, text: str) -> None:
        """Notification bytes (bell, OSC 9/777) of the agents' runtimes, to the desk's
        terminal while it is on screen (dropped otherwise)."""
        app = self._app
        if app is not None and app.is_running:
            app.output.write_raw(text)
            app.output.flush()

    def _title(self, width: int | None = None) -> StyleAndTextTuples:
        """The desk's name, address, agent count and how to quit: the parts that fit in
        ``width`` whole (a cut address would name another port), dropped from the end."""
        board = self.board
        count = len(board.agents()) if board is not None else 0
        parts: StyleAndTextTuples = [
            ("class:ask.title", " pi-agent-ask desk"),
            ("class:ask.muted", f"  {self.url}"),
            ("class:ask.muted", f"  ·  {count} agent{'s' if count != 1 else ''}"),
            ("class:ask.muted", "  ·  Ctrl-Q quits"),
        ]
        while width is not None and len(parts) > 1 and fragment_list_width(parts) > width:
            parts.pop()
        return parts

    def _sign_in_rows(self) -> list[str]:
        """The sign-in lines in rows of the screen's width (they take the whole width, under
        the agents pane when it stands beside the form: at 80 columns the form's side is too
        narrow for a link on one line). Each sentence is wrapped between words; the address
        and the QR code stay as they are (neither may change). At most the rows the screen
        has for them (:meth:`_sign_in_room`): a QR code that does not fit whole is left out
        (a cut one scans as nothing), and a line says where to have one."""
        if not self.sign_in:
            return []
        size = get_app().output.get_size()
        width = size.columns - 1
        rows, code = [], []
        text = self.sign_in.rstrip("\n")
        if not _narrow(size.columns):
            text = text.lstrip("\n")  # a rule stands above them there
        for line in text.split("\n"):
            if " " in line.strip() and any(c.isascii() and c.isalpha() for c in line):
                rows.extend(_words(line.strip(), width))
            elif "://" in line:
                rows.extend(_url_rows(line.strip(), max(10, width)))
            elif line.strip():
                code.append(line)
            else:
                rows.append(line)
        room = self._sign_in_room(size)
        if code and len(rows) + len(code) > room:
            note = _words(QR_LEFT_OUT, width)
            code = note if len(rows) + len(note) <= room else []
        return [*rows, *code][:room]

    def _sign_in_room(self, size: Size) -> int:
        """The rows the sign-in lines may take on a screen of ``size``: its rows less the
        desk's own (title and rule, or the agents line; the status line) and those the agents
        pane keeps beside the form's header when it stands there (:data:`PANE_KEPT_ROWS`, and a
        rule above the sign-in lines)."""
        if _narrow(size.columns):
            status = len(self._notice_lines()) if self._has_notice() else 0
            return max(0, size.rows - 2 - status)
        return max(0, size.rows - 3 - len(self._notice_lines()) - PANE_KEPT_ROWS)

    def _has_notice(self) -> bool:
        """Whether the status line has something to say (on a narrow screen it shows only
        then)."""
        return bool(self.notices) or any(
            text is not None for text in (self.hint_text, self.busy_text, self.link)
        )

    def _sign_in(self) -> StyleAndTextTuples:
        return [("class:ask.muted", "\n".join(self._sign_in_rows()))]

    def _sign_in_height(self) -> Dimension:
        return Dimension.exact(len(self._sign_in_rows()))

    def _notice_lines(self) -> list[str]:
        """The latest notice wrapped between words at the screen's width, at most
        ``NOTICE_ROWS`` lines (one on a short screen, where the rows are the form's): a notice
        names a file, so it wraps rather than ending at the edge. What a key is doing
        (:attr:`busy_text`) takes a row of its own above it, never its place: Esc's put-back
        waits out a store that is away, and the notice saying so must stay readable."""
        size = get_app().output.get_size()
        if self.link is not None:
            # Asked for with a key, and gone at the next: every row it takes, however short
            # the screen (a cut address signs no one in).
            words = "Sign-in link for the web page (it works once, for 10 minutes):"
            lines = wrap_line([("text", words)], max(1, size.columns - 1))
            return [
                *(" " + "".join(text for _, text in line) for line in lines),
                *_url_rows(self.link, max(10, size.columns)),
            ]
        latest = self.hint_text or (self.notices[-1] if self.notices else None)
        notice = latest if latest is not None else self.busy_text
        if notice is None:
            return [""]
        # Short: the rows go to the form, while there is one on display.
        on_display = self.board is not None and self.board.current is not None
        rows = 1 if size.rows <= SHORT_SCREEN_ROWS and on_display else NOTICE_ROWS

        def wrapped(text: str) -> list[str]:
            lines = wrap_line([("text", _shown(text))], max(1, size.columns - 1))
            return [" " + "".join(text for _, text in line) for line in lines]

        if not isinstance(notice, str):
            notice = notice.fitted(lambda text: len(wrapped(text)) <= rows)
        busy = wrapped(self.busy_text)[:1] if self.busy_text and latest is not None else []
        return [*busy, *wrapped(notice)[:rows]]

    def _status(self) -> StyleAndTextTuples:
        lines = self._notice_lines()
        # Nothing to say, and the form hides the sign-in lines: how to have them.
        on_display = self.board is not None and self.board.current is not None
        if lines == [""] and self.login_url is not None and on_display:
            return [("class:ask.muted", " " + SIGN_IN_HINT)]
        accent = "class:ask.accent"  # what a key did or does, as against a warning
        style = accent if self.link is not None or self.hint_text else "class:ask.warning"
        if self.busy_text is None or self.link is not None:
            return [(style, "\n".join(lines))]
        if not (self.hint_text or self.notices):
            return [(accent, "\n".join(lines))]
        # The busy row, then the latest notice under it (``_notice_lines``).
        return [(accent, lines[0] + "\n"), (style, "\n".join(lines[1:]))]

    def _status_height(self) -> Dimension:
        return Dimension.exact(len(self._notice_lines()))

    def build_application(
        self,
        *,
        input: Input | None = None,
        output: Output | None = None,
        full_screen: bool = True,
        mouse_support: bool | None = None,
    ) -> Application[Any]:
        app = super().build_application(
            input=input, output=output, full_screen=full_screen, mouse_support=mouse_support
        )
        form = app.layout.container
        empty = Condition(lambda: self.board is None or self.board.current is None)
        narrow = Condition(lambda: _narrow(get_app().output.get_size().columns))
        wide = ~narrow
        notice = Condition(self._has_notice)

        def agents() -> StyleAndTextTuples:
            if self.board is None:
                return []
            # The pane's rows: the screen's less the title, its rule and the status line, and
            # the sign-in lines under it with their rule while no form is on display.
            rows = get_app().output.get_size().rows - 2 - len(self._notice_lines())
            if self.board.current is None and self.sign_in:
                rows -= 1 + len(self._sign_in_rows())
            return agent_rows(self.board, height=rows)

        def top_line() -> StyleAndTextTuples:
            if self.board is None or not self.board.agents():
                return self._title(get_app().output.get_size().columns)
            return agent_line(self.board, get_app().output.get_size().columns)

        def header() -> StyleAndTextTuples:
            if self.board is None:
                return []
            return form_header(self.board, _form_width(get_app().output.get_size().columns))

        body = VSplit(
            [
                ConditionalContainer(
                    Window(FormattedTextControl(agents), width=AGENTS_WIDTH, wrap_lines=False),
                    filter=wide,
                ),
                ConditionalContainer(
                    Window(width=1, char="│", style="class:ask.rule"), filter=wide
                ),
                HSplit(
                    [
                        Window(FormattedTextControl(header), height=1, wrap_lines=False),
                        ConditionalContainer(
                            Window(height=1, char="─", style="class:ask.rule"), filter=wide
                        ),
                        ConditionalContainer(
                            Window(
                                FormattedTextControl(self._sign_in),
                                height=self._sign_in_height,
                                wrap_lines=False,
                            ),
                            filter=empty & narrow,
                        ),
                        form,
                    ]
                ),
            ]
        )
        # Beside the agents pane the form's side has 49 of 80 columns: the sign-in lines take
        # the whole width under both, so the link stays on one line (a terminal finds a link
        # to click or copy only on one line).
        sign_in = ConditionalContainer(
            HSplit(
                [
                    Window(height=1, char="─", style="class:ask.rule"),
                    Window(
                        FormattedTextControl(self._sign_in),
                        height=self._sign_in_height,
                        wrap_lines=False,
                    ),
                ]
            ),
            filter=empty & wide & Condition(lambda: bool(self.sign_in)),
        )
        root = HSplit(
            [
                ConditionalContainer(
                    Window(FormattedTextControl(self._title), height=1, wrap_lines=False),
                    filter=wide,
                ),
                ConditionalContainer(
                    Window(FormattedTextControl(top_line), height=1, wrap_lines=False),
                    filter=narrow,
                ),
                ConditionalContainer(
                    Window(height=1, char="─", style="class:ask.rule"), filter=wide
                ),
                body,
                sign_in,
                ConditionalContainer(
                    Window(
                        FormattedTextControl(self._status),
                        height=self._status_height,
                        wrap_lines=False,
                    ),
                    filter=wide | notice,
                ),
            ]
        )
        app.layout = Layout(root, focused_element=self.control)
        desk_keys = KeyBindings()

        @desk_keys.add(QUIT_KEY, eager=True)
        def _quit(event: KeyPressEvent) -> None:
            self.quit()

        @desk_keys.add(SIGN_IN_KEY, eager=True)
        def _sign_in(event: KeyPressEvent) -> None:
            self.new_sign_in()

        form_keys = app.key_bindings
        assert form_keys is not None, "the form application always has its key bindings"
        app.key_bindings = merge_key_bindings([desk_keys, form_keys])
        app.key_processor.before_key_press += self._clear_hint
        return app
