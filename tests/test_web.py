"""The web desk without a browser: sign-in codes and sessions, the page's drafts checked, the
form's ``ReplaceDrafts``, and the desk's HTTP side (sign-in, history, export, the live stream,
``login-url``, notification links, the TLS rule) through a real desk and an HTTP client."""

from __future__ import annotations

import datetime as dt
import functools
import html
import json
import os
import re
import sys
from contextlib import suppress
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio

from pi_agent_ask.desk.http import ListenError
from pi_agent_ask.desk.run import Desk
from pi_agent_ask.desk.testing import SDK_CLIENT_WARNINGS, answer_displayed, desk_client, open_desk
from pi_agent_ask.desk.web.auth import ATTEMPT_LIMIT, ATTEMPT_WINDOW, CODE_LIFETIME, Auth
from pi_agent_ask.desk.web.security import COOKIE
from pi_agent_ask.desk.web.view import DraftError, drafts_from_json, has_images, remote_answers
from pi_agent_ask.form import state as fs
from pi_agent_ask.form.types import AskParams, Draft, Image, Option, Question

pytestmark = [pytest.mark.filterwarnings(f) for f in SDK_CLIENT_WARNINGS]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_code_signs_in_once_and_only_while_fresh() -> None:
    clock = Clock()
    auth = Auth(clock=clock)
    code = auth.new_code()
    outcome, session = auth.sign_in(code)
    assert outcome == "ok" and session is not None
    assert auth.session(session.id) == session
    assert auth.sign_in(code) == ("invalid", None)
    late = auth.new_code()
    clock.now += CODE_LIFETIME + 1
    assert auth.sign_in(late) == ("invalid", None)
    assert auth.csrf_ok(session, session.csrf) and not auth.csrf_ok(session, "x")
    assert not auth.csrf_ok(session, None)


def test_sign_in_attempts_are_limited_for_everyone() -> None:
    clock = Clock()
    auth = Auth(clock=clock)
    for _ in range(ATTEMPT_LIMIT):
        assert auth.sign_in("guess")[0] == "invalid"
    good = auth.new_code()
    assert auth.sign_in(good)[0] == "limited"  # even a good code waits (and stays unused)
    assert auth.retry_after() == ATTEMPT_WINDOW
    clock.now += ATTEMPT_WINDOW / 2
    assert auth.retry_after() == ATTEMPT_WINDOW / 2
    clock.now += ATTEMPT_WINDOW / 2
    assert auth.retry_after() == 0.0
    assert auth.sign_in(good)[0] == "ok"


def form() -> fs.FormState:
    options = (Option("a", "A"), Option("b", "B"))
    return fs.new_form(
        AskParams(
            questions=(
                Question("one", "One", "One?", "single", options),
                Question("many", "Many", "Many?", "multi", options),
            )
        )
    )


def test_the_pages_drafts_are_checked_against_the_form() -> None:
    state = form()
    drafts = drafts_from_json(
        state,
        [
            {"selected": [1], "note": "n", "optionNotes": {"a": "on a", "b": " "}},
            {"selected": [1, 0], "custom": "mine", "customSelected": True},
        ],
    )
    assert drafts == (
        Draft(selected=(1,), note="n", option_notes={"a": "on a"}),
        Draft(selected=(0, 1), custom_text="mine", custom_selected=True),
    )
    assert remote_answers(state, drafts) == {
        "one": {"values": ["b"], "note": "n", "optionNotes": {"a": "on a"}},
        "many": {"values": ["a", "b"], "customText": "mine"},
    }
    skipped = drafts_from_json(state, [{"skipped": True, "note": "gone"}, {}])
    assert skipped[0] == Draft(skipped=True)
    bad: list[Any] = [
        [{}],
        "drafts",
        [{"selected": [2]}, {}],
        [{"selected": [0, 1]}, {}],
        [{"selected": [0], "custom": "x", "customSelected": True}, {}],
        [{"note": 3}, {}],
        [{"optionNotes": {"zz": "x"}}, {}],
        [{"surprise": 1}, {}],
        [{"selected": [True]}, {}],
    ]
    for data in bad:
        with pytest.raises(DraftError):
            drafts_from_json(state, data)


def test_images_attached_on_the_terminal_stay_with_the_pages_drafts() -> None:
    picture = Image(id="i1", mime_type="image/png", data="iVBORw0KGgo=")
    state = form()
    with_image = (Draft(custom_images=(picture,), custom_selected=True), Draft())
    state, _ = fs.reduce(state, fs.ReplaceDrafts(with_image))
    drafts = drafts_from_json(state, [{"customSelected": True, "note": "see picture"}, {}])
    assert drafts[0].custom_images == (picture,) and drafts[0].custom_selected
    assert drafts[0].note == "see picture"
    assert has_images(drafts) and not has_images((Draft(), Draft()))


def test_replace_drafts_keeps_the_form_open_and_journals_the_change() -> None:
    state = form()
    drafts = (Draft(selected=(1,)), Draft(note="later"))
    new, effects = fs.reduce(state, fs.ReplaceDrafts(drafts))
    assert new.drafts == drafts and new.outcome is None
    assert effects == (fs.DraftChanged(),)
    assert fs.reduce(new, fs.ReplaceDrafts(drafts)) == (new, ())
    with pytest.raises(ValueError, match="needs 2 drafts"):
        fs.reduce(state, fs.ReplaceDrafts((Draft(),)))


def ask(label: str) -> dict[str, Any]:
    return {
        "questions": [
            {
                "id": "q",
                "label": label,
                "prompt": f"{label}?",
                "options": [{"value": "yes", "label": "Yes"}, {"value": "no", "label": "No"}],
            }
        ],
        "background": True,
    }


def sign_in_fields(page: str) -> dict[str, str]:
    """The hidden fields of a sign-in link's page (its form posts them to ``/login``)."""
    return {
        name: html.unescape(value)
        for name, value in re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', page)
    }


async def open_link(http: httpx2.AsyncClient, url: str) -> httpx2.Response:
    """What a person's browser does with a sign-in link: open it. Signed in, the answer is a
    page leading to the desk, with the session cookie."""
    return await http.get(url)


async def signed_in(http: httpx2.AsyncClient, url: str) -> str:
    """Sign ``http`` in with ``url``; the page's CSRF token."""
    response = await open_link(http, url)
    assert response.status_code == 200 and 'content="0;url=/"' in response.text, response.text
    page = await http.get(url.split("/login")[0] + "/")
    assert page.status_code == 200
    marker = 'name="csrf-token" content="'
    return page.text.split(marker, 1)[1].split('"', 1)[0]


async def test_the_page_needs_a_session_and_history_exports_as_a_download(
    tmp_path: Path,
) -> None:
    with trio.fail_after(60):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "alpha") as alpha:
            assert desk.web is not None
            base = desk.web.base_url
            async with httpx2.AsyncClient() as anonymous:
                page = await anonymous.get(base + "/")
                assert page.status_code == 401 and "login-url" in page.text
                assert "script-src 'self'" in page.headers["content-security-policy"]
                assert (await anonymous.get(base + "/history/export")).status_code == 401
                assert (await anonymous.get(base + "/events")).status_code == 401
                nobody = await anonymous.get(base + "/session")
                assert nobody.status_code == 401 and "sign-in link" in nobody.json()["error"]
                wrong = await anonymous.post(base + "/login-code")
                assert wrong.status_code == 401
            await alpha.call_tool("ask_user", ask("Colour <i>please</i>"))
            await answer_displayed(desk, {"q": {"values": ["no"], "note": "navy"}})
            async with httpx2.AsyncClient() as http:
                csrf = await signed_in(http, desk.web.login_url())
                # The session's token, for a page open from before this sign-in.
                assert (await http.get(base + "/session")).json() == {"csrf": csrf}
                cookie = http.cookies.jar
                assert any(c.name == COOKIE for c in cookie)
                history = await http.get(base + "/history", params={"agent": "alpha", "q": "navy"})
                assert "Colour &lt;i&gt;please&lt;/i&gt;" in history.text
                none = await http.get(base + "/history", params={"agent": "alpha", "q": "zebra"})
                assert "No questions found" in none.text
                export = await http.get(base + "/history/export", params={"agent": "alpha"})
                assert export.headers["content-disposition"].startswith("attachment;")
                assert export.text.startswith("# Ask history") and "navy" in export.text
        # Nothing was written on the server.
        assert await trio.to_thread.run_sync(lambda: list(tmp_path.rglob("*.md"))) == []


async def test_an_agent_key_beyond_ascii_exports_under_its_own_name(tmp_path: Path) -> None:
    """A key such as ``café-日本`` (allowed, ``docs/desk.md``) names the download: its UTF-8
    name in ``filename*``, an ASCII one in ``filename`` for older clients (the export used to
    fail with the server's 500 page: a header is Latin-1)."""
    with trio.fail_after(60):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "café-日本") as agent:
            assert desk.web is not None
            await agent.call_tool("ask_user", ask("Colour"))
            await answer_displayed(desk, {"q": {"values": ["no"]}})
            async with httpx2.AsyncClient() as http:
                await signed_in(http, desk.web.login_url())
                export = await http.get(
                    desk.web.base_url + "/history/export", params={"agent": "café-日本"}
                )
            assert export.status_code == 200, export.text[:200]
            assert export.text.startswith("# Ask history")
            disposition = export.headers["content-disposition"]
            assert disposition.isascii(), disposition
            assert "filename*=UTF-8''ask-history-caf%C3%A9-%E6%97%A5%E6%9C%AC.md" in disposition
            assert 'filename="ask-history-caf----.md"' in disposition


async def alpha_history(desk: Desk) -> str:
    """Agent alpha's history page, as a browser signed in to ``desk`` gets it."""
    assert desk.web is not None
    # The client's timeout as the other tests here have it: the httpx default (5 s) ran out
    # once under a loaded CI run, for a page served in about 0.1 s alone.
    async with httpx2.AsyncClient(timeout=30) as http:
        await signed_in(http, desk.web.login_url())
        return (await http.get(desk.web.base_url + "/history?agent=alpha")).text


async def test_history_lists_forms_newest_first_and_each_forms_questions_in_order(
    tmp_path: Path,
) -> None:
    with trio.fail_after(60):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "alpha") as alpha:
            assert desk.web is not None
            first = ask("Early")
            second = ask("Database")
            second["questions"].append({**second["questions"][0], "id": "r", "label": "Region"})
            for payload in (first, second):
                await alpha.call_tool("ask_user", payload)
                await answer_displayed(desk)
            page = await alpha_history(desk)
            # The newer form first; within it, its questions as they were asked.
            where = [page.index(f">{label}</h2>") for label in ("Database", "Region", "Early")]
            assert where == sorted(where), where


async def test_history_times_carry_their_utc_value_and_read_as_utc_without_script(
    tmp_path: Path,
) -> None:
    """Each question's time is a ``<time>`` whose ``datetime`` is the recorded UTC instant; its
    text, what a page without script shows, is a readable time marked as UTC (the page's
    script shows it in the person's own time zone: ``test_web_browser.py``)."""
    with trio.fail_after(60):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "alpha") as alpha:
            assert desk.web is not None
            await alpha.call_tool("ask_user", ask("When"))
            await answer_displayed(desk)
            page = await alpha_history(desk)
            found = re.search(r'<time datetime="([^"]+)"[^>]*>([^<]+)</time>', page)
            assert found is not None, page
            stamp, text = found.groups()
            moment = dt.datetime.fromisoformat(stamp)
            assert moment.utcoffset() == dt.timedelta(0) and stamp.endswith("Z"), stamp
            assert abs(dt.datetime.now(dt.UTC) - moment) < dt.timedelta(minutes=5)
            assert text == moment.strftime("%Y-%m-%d %H:%M UTC"), text


async def test_history_says_when_a_question_was_answered_and_names_when_it_was_asked(
    tmp_path: Path,
) -> None:
    """The status badge ("answered") is followed by the time of the answer, not by the time
    the question was asked (which read as when it was answered); the asked time follows,
    named so. A question still waiting has the asked time only."""
    with trio.fail_after(60):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "alpha") as alpha:
            assert desk.web is not None
            await alpha.call_tool("ask_user", ask("When"))
            await desk.board.wait_for(lambda board: board.current is not None)
            now = dt.datetime.now(dt.UTC)
            before_answer = now.replace(microsecond=now.microsecond // 1000 * 1000)  # as stored
            await answer_displayed(desk)
            await alpha.call_tool("ask_user", {**ask("Later on"), "background": True})
            page = await alpha_history(desk)
            time = r'<time(?: class="answered-at")? datetime="([^"]+)"[^>]*>[^<]+</time>'
            answered = re.search(r'<span class="badge">answered</span> ' + time, page)
            asked = re.findall(r"asked " + time, page)
            assert answered is not None and len(asked) == 2, page
            answered_at = dt.datetime.fromisoformat(answered.group(1))
            _waiting, when_asked = (dt.datetime.fromisoformat(a) for a in asked)
            assert when_asked < before_answer <= answered_at, (when_asked, answered_at)
            assert re.search(
                r'<span class="badge">waiting</span> <span class="muted asked">asked', page
            )


async def test_history_shows_the_notes_on_options(tmp_path: Path) -> None:
    """A note written on an option (selected or not) is in the history with its option's
    label, as the Markdown export has it: the page left it out, so what the person wrote
    there was nowhere on it."""
    with trio.fail_after(60):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "alpha") as alpha:
            await alpha.call_tool("ask_user", ask("Deploy"))
            notes = {"yes": "only after 18:00", "no": "<b>never</b> on Fridays"}
            await answer_displayed(desk, {"q": {"values": ["yes"], "optionNotes": notes}})
            page = await alpha_history(desk)
            said = 'Note on <span dir="auto">{}</span>: <span dir="auto">{}</span>'
            assert said.format("Yes", "only after 18:00") in page, page
            assert said.format("No", "&lt;b&gt;never&lt;/b&gt; on Fridays") in page, page


async def test_a_long_history_says_how_much_of_it_the_page_lists(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "alpha") as alpha:
            assert desk.web is not None
            many = ask("Q0")
            many["questions"] = [
                {**many["questions"][0], "id": f"q{n}", "label": f"Q{n}"} for n in range(205)
            ]
            await alpha.call_tool("ask_user", many)
            await answer_displayed(desk)
            page = await alpha_history(desk)
            assert page.count('<li class="record">') == 200
            assert "205 questions" in page
            assert "the newest 200 are listed here; the export has them all" in page


async def test_the_live_stream_reports_the_board(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "alpha") as alpha:
            assert desk.web is not None
            async with httpx2.AsyncClient(timeout=30) as http:
                await signed_in(http, desk.web.login_url())
                async with http.stream("GET", desk.web.base_url + "/events") as stream:
                    seen: list[dict[str, Any]] = []
                    asked = False
                    async for line in stream.aiter_lines():
                        if line.startswith("data: "):
                            seen.append(json.loads(line[6:]))
                            if not asked:
                                asked = True
                                await alpha.call_tool("ask_user", ask("Live"))
                            elif seen[-1]["forms"] and seen[-1]["agents"][0][1] == 1:
                                break  # the pending count follows the form by a step
            assert seen[-1]["forms"][0]["id"].startswith("alpha/")
            assert seen[-1]["agents"][0][:2] == ["alpha", 1]


async def test_signing_out_ends_a_live_stream_open_in_another_tab(tmp_path: Path) -> None:
    """A tab signs out while another tab of the same browser has the live stream open: the
    stream ends before its next event, so nothing more of the board (a new form, its agent)
    reaches the signed-out browser (it used to go on streaming for as long as it stayed
    open)."""
    with trio.fail_after(60):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "alpha") as alpha:
            assert desk.web is not None
            base = desk.web.base_url
            async with httpx2.AsyncClient(timeout=30) as http:
                csrf = await signed_in(http, desk.web.login_url())
                seen: list[dict[str, Any]] = []
                async with http.stream("GET", base + "/events") as stream:
                    async for line in stream.aiter_lines():
                        if not line.startswith("data: "):
                            continue
                        seen.append(json.loads(line[6:]))
                        if len(seen) == 1:
                            out = await http.post(
                                base + "/logout",
                                data={"csrf": csrf},
                                headers={"origin": base},
                            )
                            assert out.status_code == 303, out.text
                            await alpha.call_tool("ask_user", ask("After"))
            assert all(not event["forms"] for event in seen), seen
            assert desk.board.shown_forms()  # the form is there; the stream told nothing of it


async def test_login_url_talks_to_the_running_desk(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "pi_agent_ask", "desk", "login-url"]
    env = {**os.environ, "PI_AGENT_ASK_DESK_FILE": str(tmp_path / "desk.json")}
    with trio.fail_after(60):
        none = await trio.run_process(command, env=env, check=False, capture_stderr=True)
        assert none.returncode == 2 and b"no desk is running" in none.stderr
        async with open_desk(tmp_path) as desk:
            assert desk.web is not None
            done = await trio.run_process(command, env=env, capture_stdout=True)
            url = done.stdout.decode().strip()
            assert url.startswith(desk.web.base_url + "/login?code=")
            async with httpx2.AsyncClient() as http:
                assert (await open_link(http, url)).status_code == 200
            async with httpx2.AsyncClient() as other:
                assert (await open_link(other, url)).status_code == 403  # used once


async def test_login_url_into_a_pipe_closed_early_ends_quietly(tmp_path: Path) -> None:
    """``desk login-url --qr | head -1``: the reader is gone before the QR code (here before
    anything) is written. The command ends with 141 (128 + SIGPIPE, what a shell reports for
    a program a closed pipe ended) and nothing on standard error (it used to end in a
    ``BrokenPipeError`` traceback)."""
    command = [sys.executable, "-m", "pi_agent_ask", "desk", "login-url", "--qr"]
    env = {**os.environ, "PI_AGENT_ASK_DESK_FILE": str(tmp_path / "desk.json")}
    with trio.fail_after(60):
        async with open_desk(tmp_path) as desk:
            assert desk.web is not None
            read_end, write_end = os.pipe()
            os.close(read_end)  # the reader is gone, as ``head -1`` is after its line
            try:
                done = await trio.run_process(
                    command, env=env, stdout=write_end, check=False, capture_stderr=True
                )
            finally:
                os.close(write_end)
    assert (done.returncode, done.stderr.decode()) == (141, "")


async def test_a_notification_command_gets_the_forms_url(tmp_path: Path) -> None:
    out = tmp_path / "notified.fifo"
    os.mkfifo(out)  # the test reads it in a thread: the read ends when the command wrote
    settings = tmp_path / "settings.json"
    command = f'printf %s "$ASK_NOTIFY_URL" > {out}'
    settings.write_text(
        json.dumps(
            {
                "schemaVersion": 6,
                "notifications": {
                    "enabled": True,
                    "channels": [{"type": "command", "command": command}],
                },
            }
        )
    )
    with trio.fail_after(60):
        async with open_desk(tmp_path, settings=settings) as desk:
            async with desk_client(desk.address, "alpha") as alpha:
                await alpha.call_tool("ask_user", ask("Ping"))
                link = await trio.to_thread.run_sync(out.read_text)
                await desk.board.wait_for(lambda board: board.current is not None)
            assert desk.web is not None and desk.board.current is not None
            assert link == desk.web.form_url("alpha", desk.board.current.flow_id)
            assert link.startswith(desk.web.base_url + "/?form=alpha%2F")


async def test_a_link_to_a_form_no_longer_waiting_says_so_over_the_next_form(
    tmp_path: Path,
) -> None:
    """A notification's link opened after its form was answered (on the terminal, on another
    page) shows the next form with a sentence saying the linked one is gone, so no one takes
    another agent's question for the one they tapped."""
    with trio.fail_after(60):
        async with (
            open_desk(tmp_path) as desk,
            desk_client(desk.address, "alpha") as alpha,
            desk_client(desk.address, "beta") as beta,
        ):
            assert desk.web is not None
            await alpha.call_tool("ask_user", ask("Tone"))
            await desk.board.wait_for(lambda board: board.current is not None)
            await beta.call_tool("ask_user", ask("Budget"))
            await desk.board.wait_for(lambda board: len(board.shown_forms()) == 2)
            answered = await answer_displayed(desk)
            assert answered.key == "alpha"
            await desk.board.wait_for(lambda board: len(board.shown_forms()) == 1)
            async with httpx2.AsyncClient() as http:
                await signed_in(http, desk.web.login_url())
                gone = await http.get(desk.web.form_url("alpha", answered.flow_id))
                assert gone.status_code == 200 and "Budget?" in gone.text
                assert "no longer waiting" in gone.text
                (live,) = desk.board.shown_forms()
                shown = await http.get(desk.web.form_url("beta", live.flow_id))
                assert "Budget?" in shown.text and "no longer waiting" not in shown.text
                plain = await http.get(desk.web.base_url + "/")
                assert "no longer waiting" not in plain.text


async def test_a_link_to_a_form_cancelled_elsewhere_says_it_was_cancelled(tmp_path: Path) -> None:
    """A notification's link opened after its form was cancelled on another page: the page
    says the form is no longer waiting because it was cancelled (it used to offer "answered
    elsewhere ... or its agent withdrew it")."""
    with trio.fail_after(60):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "alpha") as alpha:
            assert desk.web is not None
            await alpha.call_tool("ask_user", ask("Tone"))
            await desk.board.wait_for(lambda board: board.current is not None)
            (shown,) = desk.board.shown_forms()
            base = desk.web.base_url
            async with httpx2.AsyncClient() as http:
                csrf = await signed_in(http, desk.web.login_url())
                cancelled = await http.post(
                    base + "/api/cancel",
                    json={"form": f"alpha/{shown.flow_id}"},
                    headers={"origin": base, "x-csrf-token": csrf},
                )
                assert cancelled.status_code == 200, cancelled.text
                await desk.board.wait_for(lambda board: not board.shown_forms())
                gone = await http.get(desk.web.form_url("alpha", shown.flow_id))
            text = html.unescape(gone.text)
            assert "no longer waiting" in text and "cancelled elsewhere" in text, text
            assert "answered elsewhere" not in text, text


async def test_a_non_loopback_listen_needs_tls_or_an_explicit_flag(tmp_path: Path) -> None:
    with pytest.RaisesGroup(
        pytest.RaisesExc(ListenError, match="--tls-elsewhere"), flatten_subgroups=True
    ):
        async with open_desk(tmp_path, listen="0.0.0.0:0", allow_remote=True):
            pass
    with pytest.RaisesGroup(
        pytest.RaisesExc(ListenError, match="go together"), flatten_subgroups=True
    ):
        async with open_desk(tmp_path, tls_cert=tmp_path / "cert.pem"):
            pass


async def test_tls_files_that_cannot_be_used_are_named_before_the_desk_starts(
    tmp_path: Path,
) -> None:
    """A missing or unreadable file, or one that is not a PEM certificate and its key, is
    refused with the option and the path (it was ``[Errno 2] No such file or directory`` with
    no name, or ``[SSL] PEM lib (_ssl.c:3905)``)."""
    text = tmp_path / "notes.txt"
    text.write_text("not a certificate")
    missing = tmp_path / "missing.pem"
    for cert, key, said in (
        (missing, text, f"--tls-cert {missing}: no such file"),
        (text, missing, f"--tls-key {missing}: no such file"),
        (tmp_path, text, f"--tls-cert {tmp_path}: not a file"),
        (text, text, f"--tls-cert {text} and --tls-key {text}: not a PEM certificate"),
    ):
        with pytest.RaisesGroup(
            pytest.RaisesExc(ListenError, match=re.escape(said)), flatten_subgroups=True
        ):
            async with open_desk(tmp_path, tls_cert=cert, tls_key=key):
                pass


async def test_a_tls_desk_serves_the_page_over_https_with_a_secure_cookie(tmp_path: Path) -> None:
    import ssl

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    await trio.run_process(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        capture_stdout=True,
        capture_stderr=True,
    )
    with trio.fail_after(60):
        async with open_desk(tmp_path, tls_cert=cert, tls_key=key) as desk:
            assert desk.web is not None
            assert desk.web.base_url.startswith("https://127.0.0.1:")
            assert desk.address.url.startswith("https://")
            trusted = ssl.create_default_context(cafile=str(cert))
            async with httpx2.AsyncClient(verify=trusted) as http:
                signed = await open_link(http, desk.web.login_url())
                assert signed.status_code == 200
                (cookie,) = [
                    c.lower()
                    for c in signed.headers.get_list("set-cookie")
                    if c.startswith(COOKIE + "=")
                ]
                assert "secure" in cookie and "httponly" in cookie and "samesite=strict" in cookie


@pytest.mark.parametrize("listen", ["127.0.0.1:0", "0.0.0.0:0"])
async def test_the_terminal_desk_shows_a_sign_in_link_and_a_qr_code_beyond_loopback(
    tmp_path: Path, listen: str
) -> None:
    from prompt_toolkit.input import create_pipe_input

    from pi_agent_ask.ui.testing import VirtualTerminal

    term = VirtualTerminal(120, 50)
    remote = not listen.startswith("127.")
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with open_desk(
            tmp_path,
            headless=False,
            input=pipe,
            output=term.output,
            listen=listen,
            allow_remote=remote,
            tls_elsewhere=remote,
        ) as desk:
            assert desk.web is not None
            await term.wait_for("Answer in a browser too")
            await term.wait_for("/login?code=")
            url = next(w for w in term.text().split() if "/login?code=" in w)
            assert url.startswith(desk.web.base_url)
            assert ("█" in term.text()) is remote  # the QR code, for a phone's camera
            async with httpx2.AsyncClient() as http:
                reached = url.replace(url.split("/login")[0], _loopback(url))
                assert (await open_link(http, reached)).status_code == 200
            # Used: the idle screen says so, and how to have another (it kept showing the
            # used link, which signs no one in).
            await term.wait_for("the sign-in link shown here was used; Ctrl-O or")
            assert "/login?code=" not in term.text() and "█" not in term.text()
            pipe.send_text("\x0f")  # Ctrl-O: a new one, in the sign-in lines
            await term.wait_for("/login?code=")
            assert url not in term.text()
            await _sign_in_lines_fit(term, desk.board.display, remote)


async def _sign_in_lines_fit(term: Any, display: Any, remote: bool) -> None:
    """At 80x24 the sign-in link stands whole on one row (beside the agents pane the form's
    side has 49 columns: it went on under itself there, and a terminal finds a link to click
    or copy only on one row), and a QR code that does not fit whole is left out, saying where
    to have one; at 40x12, where no row holds the link, the screen says how to have it whole."""
    from pi_agent_ask.desk.terminal import LINK_CUT, QR_LEFT_OUT

    term.resize(80, 24)
    display.invalidate()
    # Drawn again at 80 columns: the sentence's second row.
    await term.wait_for(lambda t: " 'pi-agent-ask desk login-url' makes another):" in t.rows())
    (row,) = [row for row in term.rows() if "/login?code=" in row]
    assert re.fullmatch(r" https?://\S+/login\?code=[\w-]{22}", row), term.text()
    assert "█" not in term.text(), term.text()
    words = " ".join(term.text().split())
    assert (QR_LEFT_OUT in words) is remote and LINK_CUT not in words
    term.resize(40, 12)
    display.invalidate()
    await term.wait_for(lambda t: "login-url' prints a" in t.text())
    rows = term.rows()
    first = next(i for i, row in enumerate(rows) if "/login?code=" in row)
    assert rows[first].startswith(" http") and rows[first + 1].startswith("   "), rows
    assert row.strip() == rows[first].strip() + rows[first + 1].strip(), rows
    assert " ".join(" ".join(rows[first + 2 :]).split()) == LINK_CUT, rows


async def test_the_terminal_desk_s_sign_in_lines_say_when_their_link_ran_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prompt_toolkit.input import create_pipe_input

    from pi_agent_ask.desk import terminal
    from pi_agent_ask.ui.testing import VirtualTerminal

    monkeypatch.setattr(terminal, "CODE_LIFETIME", 0.5)  # the link's 10 minutes
    term = VirtualTerminal(120, 24)
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with open_desk(tmp_path, headless=False, input=pipe, output=term.output):
            await term.wait_for("the sign-in link shown here ran out (a link lasts 10 minutes);")
            assert "/login?code=" not in term.text()


def _loopback(url: str) -> str:
    """The URL's origin with its host replaced by 127.0.0.1 (the test reaches it there)."""
    port = url.split("/login")[0].rsplit(":", 1)[1]
    return f"http://127.0.0.1:{port}"


async def test_a_draft_sent_by_the_page_is_in_the_journal_after_a_desk_restart(
    tmp_path: Path,
) -> None:
    with trio.fail_after(90):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "alpha") as alpha:
            assert desk.web is not None
            await alpha.call_tool("ask_user", ask("Keep"))
            await desk.board.wait_for(lambda board: board.current is not None)
            shown = desk.board.current
            assert shown is not None
            base = desk.web.base_url
            async with httpx2.AsyncClient() as http:
                csrf = await signed_in(http, desk.web.login_url())
                body = {
                    "form": f"alpha/{shown.flow_id}",
                    "drafts": [{"selected": [1], "note": "typed on the phone"}],
                }
                headers = {"origin": base, "x-csrf-token": csrf}
                saved = await http.post(base + "/api/draft", json=body, headers=headers)
                assert saved.status_code == 200, saved.text
                malformed = {**body, "drafts": [{"selected": "all"}]}
                refused = await http.post(base + "/api/draft", json=malformed, headers=headers)
                assert refused.status_code == 400 and "selected" in refused.json()["error"]
            await desk.board.wait_for(
                lambda board: (
                    board.current is not None
                    and board.current.state.drafts[0].note == "typed on the phone"
                )
            )
        # The desk stopped (its runtimes saved and closed their journals); a new one reopens them.
        async with open_desk(tmp_path) as again:
            await again.board.wait_for(lambda board: board.current is not None)
            assert again.board.current is not None
            (draft,) = again.board.current.state.drafts
            assert draft.selected == (1,) and draft.note == "typed on the phone"


async def test_a_link_preview_uses_nothing_up_and_only_the_desks_own_page_signs_in(
    tmp_path: Path,
) -> None:
    """A chat app that previews a sign-in link fetches it (``HEAD``, ``GET``, often twice,
    no script run), as does a browser's prefetch: that tries no code and makes no session, so
    the person's tap afterwards still signs in. The page such a fetch gets signs in only by a
    ``POST`` from that page in the same browser (its origin, and the nonce it set as a
    cookie); any other ``POST`` is refused without trying the code. Signing in sets the
    session cookie with today's flags."""
    with trio.fail_after(60):
        async with open_desk(tmp_path) as desk:
            assert desk.web is not None
            url = desk.web.login_url()
            base = desk.web.base_url
            bot_headers = {
                "user-agent": "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"
            }
            async with httpx2.AsyncClient(headers=bot_headers) as bot:
                assert (await bot.head(url)).status_code == 200
                for _ in range(2):
                    preview = await bot.get(url)
                    assert preview.status_code == 200, preview.text
                    assert 'method="post" action="/login"' in preview.text
                    assert ">Sign in</button>" in preview.text
                    assert not any(c.name == COOKIE for c in bot.cookies.jar)
                fields = sign_in_fields(preview.text)
                assert fields["code"] == url.split("code=")[1]
                # Another site's form (its own origin), or a page's fields without the
                # page's cookie: refused, and the code is not tried.
                foreign = await bot.post(
                    base + "/login", data=fields, headers={"origin": "http://evil.example"}
                )
                assert foreign.status_code == 403 and "not tried" in foreign.text
            async with httpx2.AsyncClient() as other:
                copied = await other.post(base + "/login", data=fields, headers={"origin": base})
                assert copied.status_code == 403 and "not tried" in copied.text
                prefetched = await other.get(url, headers={"sec-purpose": "prefetch"})
                assert 'method="post" action="/login"' in prefetched.text
                assert not any(c.name == COOKIE for c in other.cookies.jar)
            async with httpx2.AsyncClient() as person:
                signed = await open_link(person, url)
                assert signed.status_code == 200 and 'content="0;url=/"' in signed.text
                (cookie,) = [
                    c.lower()
                    for c in signed.headers.get_list("set-cookie")
                    if c.startswith(COOKIE + "=")
                ]
                assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie
                assert (await person.get(base + "/")).status_code == 200
            async with httpx2.AsyncClient() as late:
                used = await open_link(late, url)
                assert used.status_code == 403 and "not valid" in used.text  # still once


async def test_past_the_sign_in_limit_the_page_says_when_the_same_link_works_again(
    tmp_path: Path,
) -> None:
    """Past the limit of failed sign-ins a good link is refused unused: the page says so and
    when to try it again (``Retry-After`` in seconds, and the same number in its words), and
    then the same link signs in."""
    with trio.fail_after(60):
        async with open_desk(tmp_path) as desk:
            assert desk.web is not None
            base = desk.web.base_url
            async with httpx2.AsyncClient() as guesser:
                for _ in range(ATTEMPT_LIMIT):
                    guessed = await open_link(guesser, base + "/login?code=guess")
                    assert guessed.status_code == 403
            url = desk.web.login_url()
            async with httpx2.AsyncClient() as person:
                limited = await open_link(person, url)
                assert limited.status_code == 429
                wait = int(limited.headers["retry-after"])
                assert 0 < wait <= ATTEMPT_WINDOW
                text = " ".join(limited.text.split())
                assert f"in {wait} seconds" in text, text
                assert "new link" not in text and "not used up" in text, text
                # A button posts the same link again.
                fields = sign_in_fields(limited.text)
                assert fields["code"] == url.split("code=")[1]
                # The window moves on: the same link, posted again, signs in.
                auth = desk.web.auth
                auth.clock = functools.partial(lambda now, later: now() + later, auth.clock, wait)
                again = await person.post(base + "/login", data=fields, headers={"origin": base})
                assert again.status_code == 303, again.text


async def test_a_used_link_opened_again_by_a_signed_in_browser_opens_the_desk(
    tmp_path: Path,
) -> None:
    """The terminal and a notification keep showing the link after it was used: the browser
    that used it, opening it again, goes to the desk instead of reading "not valid". Any
    other browser is still refused."""
    with trio.fail_after(60):
        async with open_desk(tmp_path) as desk:
            assert desk.web is not None
            url = desk.web.login_url()
            async with httpx2.AsyncClient() as http:
                await signed_in(http, url)
                again = await http.get(url)
                assert again.status_code == 200, again.text
                assert 'content="0;url=/"' in again.text and "not valid" not in again.text
                assert (await http.get(desk.web.base_url + "/")).status_code == 200
            async with httpx2.AsyncClient() as stranger:
                refused = await open_link(stranger, url)
                assert refused.status_code == 403 and "not valid" in refused.text


async def test_bad_requests_get_a_sentence_and_leave_the_form_answerable(tmp_path: Path) -> None:
    """Malformed bodies of the page's API are refused with a 400 and a sentence naming what is
    wrong, never taken for a form answered elsewhere and never let through to the journal: a
    lone UTF-16 surrogate (valid JSON, ``"\\ud800"``, but not text) cannot be stored, and a
    draft or answer holding one used to be accepted and leave the form unanswerable."""
    with trio.fail_after(60):
        async with open_desk(tmp_path) as desk, desk_client(desk.address, "alpha") as alpha:
            assert desk.web is not None
            await alpha.call_tool("ask_user", ask("Shape"))
            await desk.board.wait_for(lambda board: board.current is not None)
            shown = desk.board.current
            assert shown is not None
            form_id = f"alpha/{shown.flow_id}"
            base = desk.web.base_url
            async with httpx2.AsyncClient() as http:
                csrf = await signed_in(http, desk.web.login_url())
                headers = {
                    "origin": base,
                    "x-csrf-token": csrf,
                    "content-type": "application/json",
                }

                async def post(path: str, body: object) -> httpx2.Response:
                    # json.dumps escapes the surrogate as JSON spells it: "\ud800".
                    return await http.post(base + path, content=json.dumps(body), headers=headers)

                for path in ("/api/draft", "/api/submit", "/api/cancel", "/api/later"):
                    for body in ({}, {"form": 7}, {"form": [form_id]}):
                        refused = await post(path, body)
                        assert refused.status_code == 400, (path, body, refused.text)
                        assert "form" in refused.json()["error"], refused.text
                for path in ("/api/draft", "/api/submit"):
                    for draft in (
                        {"custom": "round \ud800", "customSelected": True},
                        {"selected": [0], "note": "\udfff"},
                        {"optionNotes": {"yes": "x\ud83d"}},
                    ):
                        refused = await post(path, {"form": form_id, "drafts": [draft]})
                        assert refused.status_code == 400, (path, draft, refused.text)
                        assert "drafts[0]" in refused.json()["error"], refused.text
                # JSON nested deeper than the parser goes is not JSON the desk reads: a
                # sentence, not the server's error page.
                deep = b'{"form": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
                for path in ("/api/draft", "/api/submit", "/api/cancel", "/api/later"):
                    refused = await http.post(base + path, content=deep, headers=headers)
                    assert refused.status_code == 400, (path, refused.text[:200])
                    assert "JSON" in refused.json()["error"], refused.text
                # A wrong method or an unknown path of the API is a JSON sentence too.
                wrong = await http.get(base + "/api/draft", headers=headers)
                assert wrong.status_code == 405 and "POST" in wrong.json()["error"]
                unknown = await post("/api/answer", {"form": form_id})
                assert unknown.status_code == 404 and "/api/answer" in unknown.json()["error"]
                # The form is still there and takes a good answer, which reaches the agent.
                good = {"form": form_id, "drafts": [{"selected": [1], "note": "fine"}]}
                assert (await post("/api/draft", good)).status_code == 200
                sent = await post("/api/submit", good)
                assert sent.status_code == 200, sent.text
            waited = await alpha.call_tool("wait_for_answers", {})
            (entry,) = waited.structured_content["results"]
            assert entry["result"]["answers"]["q"]["values"] == ["no"]
            assert entry["result"]["answers"]["q"]["note"] == "fine"


async def test_a_body_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """A signed-in client announcing a body over the limit gets its 413 at once: the desk does
    not wait for (and hold in memory) the bytes first; nor does it for a chunked body."""
    with trio.fail_after(60):
        async with open_desk(tmp_path) as desk:
            assert desk.web is not None
            base = desk.web.base_url
            async with httpx2.AsyncClient() as http:
                csrf = await signed_in(http, desk.web.login_url())
                cookie = next(c.value for c in http.cookies.jar if c.name == COOKIE)
            host, port = base.removeprefix("http://").rsplit(":", 1)
            for framing in (f"content-length: {1 << 30}", "transfer-encoding: chunked"):
                stream = await trio.open_tcp_stream(host, int(port))
                async with stream:
                    head = (
                        f"POST /api/draft HTTP/1.1\r\nhost: {host}:{port}\r\n"
                        f"origin: {base}\r\nx-csrf-token: {csrf}\r\n"
                        f"cookie: {COOKIE}={cookie}\r\ncontent-type: application/json\r\n"
                        f"{framing}\r\n\r\n"
                    )
                    await stream.send_all(head.encode())
                    chunk = b"x" * (1 << 20)
                    if framing.startswith("transfer"):
                        chunk = b"%x\r\n%s\r\n" % (len(chunk), chunk)

                    async def send_body(
                        stream: trio.SocketStream = stream, chunk: bytes = chunk
                    ) -> None:
                        # 5 MiB, and the client then waits; the desk may close the connection
                        # once it answered, before the client is done sending.
                        with suppress(trio.BrokenResourceError):
                            for _ in range(5):
                                await stream.send_all(chunk)

                    reply = b""
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(send_body)
                        with trio.move_on_after(10):
                            while b"}" not in reply:  # the head, then the JSON sentence
                                received = await stream.receive_some(65536)
                                if not received:
                                    break
                                reply += received
                    assert reply.startswith(b"HTTP/1.1 413"), (framing, reply[:200])
                    assert b"too large" in reply


async def test_at_40_columns_the_desk_s_title_and_sign_in_lines_keep_their_words_whole(
    tmp_path: Path,
) -> None:
    from prompt_toolkit.input import create_pipe_input

    from pi_agent_ask.ui.testing import VirtualTerminal

    term = VirtualTerminal(40, 12)
    with trio.fail_after(60), create_pipe_input() as pipe:
        async with open_desk(tmp_path, headless=False, input=pipe, output=term.output) as desk:
            await term.wait_for("/login?code=")
            rows = term.text().splitlines()
            # The title shows no cut address: the whole one, or none.
            assert "pi-agent-ask desk" in rows[0]
            assert "127.0.0.1" not in rows[0] or desk.address.url in rows[0], rows[0]
            # The sentence wraps between words: every word of it is on one row.
            words = " ".join(rows).split()
            for word in (
                "Answer",
                "browser",
                "minutes;",
                "'pi-agent-ask",
                "login-url'",
                "another):",
            ):
                assert word in words, (word, rows)
            assert all(len(row) <= 40 for row in rows)
