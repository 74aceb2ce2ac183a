"""Agent-facing texts and transcript rendering (catalog §1.3, §2, §3.4, §4, §8; contract 000)."""

from __future__ import annotations

import re

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pi_agent_ask.form.result import (
    AskResult,
    BackgroundOutcome,
    build_result,
    invalid_result,
)
from pi_agent_ask.form.text import (
    EMPTY_WAIT_TEXT,
    background_answer_message,
    background_answer_text,
    fallback_text,
    fallback_tool_result,
    image_blocks,
    image_marker,
    receipt_text,
    receipt_tool_result,
    result_text,
    summary_lines,
    tool_result,
    wait_complete_result,
    wait_deferred_result,
)
from pi_agent_ask.form.transcript import (
    Line,
    background_card,
    call_rows,
    cell_width,
    drawn,
    line_text,
    receipt_row,
    result_rows,
    wait_confirmation,
    wrap_line,
)
from pi_agent_ask.form.types import AskParams, Draft, Image, Issue, Option, Question

IMG_A = Image(id="img-a", mime_type="image/png", data="QUFB")
IMG_B = Image(id="img-b", mime_type="image/jpeg", data="QkJC")
IMG_C = Image(id="img-c", mime_type="image/webp", data="Q0ND")


def _choice_params(title: str | None = "Test setup") -> AskParams:
    return AskParams(
        title=title,
        questions=[
            Question(
                id="source",
                label="Choice",
                prompt="Where should the test run?",
                type="single",
                options=[Option("agent-browser", "Agent browser"), Option("local", "Local")],
            ),
            Question(
                id="limit",
                label="Choice",
                prompt="How many requests?",
                type="multi",
                options=[Option("800", "800"), Option("1600", "1600")],
            ),
        ],
    )


def _goal_params() -> AskParams:
    return AskParams(
        questions=[
            Question(
                id="goal",
                label="Goal",
                prompt="What should I optimize for?",
                type="single",
                options=[Option("speed", "Speed"), Option("cost", "Cost", description="Cheap")],
            ),
            Question(
                id="tone",
                label="Tone",
                prompt="Which tone?",
                type="multi",
                options=[Option("formal", "Formal")],
            ),
        ]
    )


def _texts(lines: list[Line]) -> list[str]:
    return [line_text(line) for line in lines]


def _answered_choice(request_id: str = "req-1") -> AskResult:
    drafts = {
        "source": Draft(selected=[0]),
        "limit": Draft(selected=[0], custom_text="adjustable", custom_selected=True),
    }
    return build_result(_choice_params(), drafts, request_id=request_id)


# --------------------------------------------------------------------------------------------
# Summary and tool result text
# --------------------------------------------------------------------------------------------


def test_result_text_has_request_header_and_summary() -> None:
    assert result_text(_answered_choice()) == (
        "ask_user [req-1]\nChoice: Agent browser\nChoice: 800, adjustable"
    )


def test_cancelled_text() -> None:
    result = build_result(_choice_params(), {"source": Draft(selected=[0])}, cancelled=True)
    assert summary_lines(result) == ["User cancelled the ask flow"]
    assert result_text(attr_request(result, "r")) == "ask_user [r]\nUser cancelled the ask flow"


def attr_request(result: AskResult, request_id: str) -> AskResult:
    return attrs.evolve(result, request_id=request_id)


def test_submitted_text_when_nothing_to_list() -> None:
    assert summary_lines(AskResult(cancelled=False)) == ["User submitted the ask flow"]


def test_unanswered_and_note_only_questions_say_no_answer() -> None:
    result = build_result(_choice_params(), {"limit": Draft(note="depends on the quota")})
    assert summary_lines(result) == [
        "Choice: (no answer)",
        "Choice: (no answer)",
        "Choice note: depends on the quota",
    ]


def test_skipped_questions_are_marked_even_when_all_are_skipped() -> None:
    drafts = {"source": Draft(skipped=True), "limit": Draft(skipped=True)}
    result = build_result(_choice_params(), drafts)
    assert summary_lines(result) == ["Choice: (skipped)", "Choice: (skipped)"]
    assert _texts(result_rows(result)) == ["- Choice: (skipped)", "- Choice: (skipped)"]


def test_option_notes_mark_unselected_options() -> None:
    drafts = {
        "source": Draft(selected=[0], option_notes={"agent-browser": "fast", "local": "slow"})
    }
    result = build_result(_choice_params(), drafts)
    assert summary_lines(result, params=_choice_params())[:3] == [
        "Choice: Agent browser",
        "Choice / Agent browser note: fast",
        "Choice / Local (not selected) note: slow",
    ]
    # Without the params, the result knows only selected labels: the value stands in.
    assert summary_lines(result)[2] == "Choice / local (not selected) note: slow"


def test_image_markers_on_answers_and_notes() -> None:
    assert image_marker(0) == ""
    assert image_marker(1) == "[1 image]"
    assert image_marker(3) == "[3 images]"
    drafts = {
        "source": Draft(custom_selected=True, custom_images=[IMG_A]),
        "limit": Draft(
            selected=[1],
            custom_text="more",
            custom_selected=True,
            custom_images=[IMG_A, IMG_B],
            note_images=[IMG_C],
            option_note_images={"1600": [IMG_B]},
        ),
    }
    result = build_result(_choice_params(), drafts)
    assert summary_lines(result) == [
        "Choice: [1 image]",
        "Choice: 1600, more [2 images]",
        "Choice note: [1 image]",
        "Choice / 1600 note: [1 image]",
    ]


@pytest.mark.parametrize(
    ("presented", "note"),
    [
        (
            ["multi", "multi"],
            "Note: Some questions were presented as multi-select by user preference.",
        ),
        (
            ["single", "single"],
            "Note: Some questions were presented as single-select by user preference.",
        ),
    ],
)
def test_presentation_note(presented: list[str], note: str) -> None:
    drafts = {"source": Draft(selected=[0]), "limit": Draft(selected=[0])}
    result = build_result(_choice_params(), drafts, presented_types=presented)  # type: ignore[arg-type]
    assert summary_lines(result)[-1] == note
    assert _texts(result_rows(result))[-1] == f"  {note}"


def test_presentation_note_for_mixed_changes_and_not_for_unanswered_questions() -> None:
    drafts = {"source": Draft(selected=[0]), "limit": Draft(selected=[0])}
    mixed = build_result(_choice_params(), drafts, presented_types=["multi", "single"])
    assert summary_lines(mixed)[-1] == (
        "Note: Some questions were presented with a different selection type by user preference."
    )
    unanswered = build_result(
        _choice_params(), {"limit": Draft(selected=[0])}, presented_types=["multi", "multi"]
    )
    assert not any(line.startswith("Note:") for line in summary_lines(unanswered))


def test_tool_result_carries_text_then_image_blocks_and_both_json_forms() -> None:
    drafts = {
        "source": Draft(
            custom_selected=True,
            custom_images=[IMG_A],
            note="see screenshot",
            note_images=[IMG_B],
            option_note_images={"local": [IMG_C], "agent-browser": [IMG_A]},
        )
    }
    result = build_result(_choice_params(), drafts, request_id="r7")
    out = tool_result(result, params=_choice_params())
    assert out["details"] == result.to_details()
    assert out["structuredContent"] == result.to_structured()
    assert out["content"] == [
        {
            "type": "text",
            "text": "ask_user [r7]\nChoice: [1 image]\nChoice note: see screenshot [1 image]\n"
            "Choice / Agent browser (not selected) note: [1 image]\n"
            "Choice / Local (not selected) note: [1 image]\nChoice: (no answer)",
        },
        {"type": "text", "text": "Image for [source] Where should the test run? — custom answer:"},
        {"type": "image", "mimeType": "image/png", "data": "QUFB"},
        {"type": "text", "text": "Image for [source] Where should the test run? — question note:"},
        {"type": "image", "mimeType": "image/jpeg", "data": "QkJC"},
        {
            "type": "text",
            "text": "Image for [source] Where should the test run? — option note for Local:",
        },
        {"type": "image", "mimeType": "image/webp", "data": "Q0ND"},
    ]


def test_no_image_blocks_for_cancelled_or_error_results() -> None:
    drafts = {"source": Draft(custom_selected=True, custom_images=[IMG_A], selected=[])}
    cancelled = build_result(_choice_params(), drafts, cancelled=True)
    assert image_blocks(cancelled) == []
    assert len(tool_result(cancelled)["content"]) == 1
    assert image_blocks(invalid_result(None, [Issue("questions", "x")])) == []


def test_invalid_payload_text() -> None:
    issues = [
        Issue("questions[1].id", 'Question 2: duplicate question id "scope"'),
        Issue("questions[0].options[0].value", "Question 1, option 1: value is required"),
    ]
    out = tool_result(invalid_result("T", issues))
    assert out["content"] == [
        {
            "type": "text",
            "text": "Invalid ask_user payload:\n"
            '- questions[1].id: Question 2: duplicate question id "scope"\n'
            "- questions[0].options[0].value: Question 1, option 1: value is required",
        }
    ]
    assert out["details"]["error"]["kind"] == "invalid_input"
    assert "requestId" not in out["details"]
    rows = result_rows(invalid_result("T", issues))
    assert rows[0] == (("warning", "Invalid tool payload"),)


# --------------------------------------------------------------------------------------------
# Non-TUI fallback and receipts
# --------------------------------------------------------------------------------------------


def test_fallback_text_lists_every_question_and_option() -> None:
    text = fallback_text(_goal_params(), "req-3")
    assert text.splitlines() == [
        "ask_user [req-3]",
        "Needs user input: ask_user requires interactive TUI mode.",
        "Run same tool call in interactive TUI mode, or ask user these questions manually:",
        "1. Goal: What should I optimize for?",
        "   - Speed [speed]",
        "   - Cost [cost]",
        "   - Type your own [custom]",
        "2. Tone: Which tone?",
        "   - Formal [formal]",
        "   - Type your own [custom]",
        "details.questions contains normalized pending questions. "
        "details.answers stays empty until user responds.",
    ]
    assert re.search(r"1\. Goal: What should I optimize for\?", text)
    assert re.search(r"- Speed \[speed\]", text)
    assert re.search(r"- Type your own \[custom\]", text)


def test_fallback_tool_result() -> None:
    out = fallback_tool_result(_goal_params(), "req-3")
    assert out["details"]["cancelled"] is True
    assert out["details"]["answers"] == {}
    assert [q["id"] for q in out["details"]["questions"]] == ["goal", "tone"]
    assert out["structuredContent"] == {"requestId": "req-3", "cancelled": True, "answers": {}}


def test_receipt_text_and_result() -> None:
    assert receipt_text("req-4", 2) == (
        "Queued ask_user [req-4]. 2 form(s) pending. This is not an answer. Continue independent "
        "work; call wait_for_answers when answers are needed."
    )
    assert "wait_for_answers" not in receipt_text("req-4", 2, background_only=True)
    out = receipt_tool_result("req-4", ["goal", "tone"], 2)
    receipt = {
        "status": "queued",
        "requestId": "req-4",
        "questionIds": ["goal", "tone"],
        "pendingRequests": 2,
    }
    assert out["details"] == receipt
    assert out["structuredContent"] == receipt
    assert out["content"] == [{"type": "text", "text": receipt_text("req-4", 2)}]
    assert _texts([receipt_row(out["details"])]) == ["2 question(s) queued · 2 form(s) pending"]


# --------------------------------------------------------------------------------------------
# Background answers
# --------------------------------------------------------------------------------------------


def test_background_answer_text_identifies_questions_by_id() -> None:
    outcome = BackgroundOutcome("req-5", result=_answered_choice("req-5"))
    assert background_answer_text(outcome).splitlines() == [
        "Background answer [req-5] — Test setup:",
        "Questions:",
        "- [source] Choice: Where should the test run?",
        "- [limit] Choice: How many requests?",
        "Response:",
        "Choice [source]: Agent browser",
        "Choice [limit]: 800, adjustable",
    ]


def test_background_answer_text_unanswered_untitled_and_q_labels() -> None:
    result = build_result(_choice_params(title=None), {"source": Draft(selected=[0])})
    text = background_answer_text(BackgroundOutcome("r", result=result))
    assert text.startswith("Background answer [r]:\nQuestions:\n")
    assert "Choice [limit]: (no answer)" in text.splitlines()
    params = AskParams(
        questions=[
            Question(
                id="first",
                label="Q1",
                prompt="Choose first?",
                type="single",
                options=[Option("yes", "Yes")],
            )
        ]
    )
    lines = background_answer_text(
        BackgroundOutcome("r", result=build_result(params, [Draft(selected=[0])]))
    ).splitlines()
    assert "[first] Q1: Choose first?" in [line.removeprefix("- ") for line in lines]
    assert "Q1 [first]: Yes" in lines


def test_background_answer_notes_use_ids_too() -> None:
    drafts = {"source": Draft(selected=[0], note="n1", option_notes={"local": "n2"})}
    result = build_result(_choice_params(), drafts)
    lines = background_answer_text(
        BackgroundOutcome("r", result=result), params=_choice_params()
    ).splitlines()
    assert "Choice [source] note: n1" in lines
    assert "Choice [source] / Local (not selected) note: n2" in lines


def test_background_answer_failure_and_cancelled_forms() -> None:
    assert background_answer_text(BackgroundOutcome("r", error="UI failed")) == (
        "Background answer [r]:\nQuestion form failed: UI failed"
    )
    assert background_answer_text(BackgroundOutcome("r")) == (
        "Background answer [r]:\nQuestion form failed: No form result available."
    )
    cancelled = build_result(_choice_params(), {}, cancelled=True)
    assert background_answer_text(BackgroundOutcome("r", result=cancelled)).splitlines() == [
        "Background answer [r] — Test setup:",
        "Questions:",
        "- [source] Choice: Where should the test run?",
        "- [limit] Choice: How many requests?",
        "Response:",
        "User cancelled the ask flow",
    ]


def test_background_answer_message_shape() -> None:
    result = _answered_choice("r")
    outcome = BackgroundOutcome("r", parent_tool_call_id="call-1", result=result)
    message = background_answer_message(outcome)
    assert message == {
        "customType": "ask:background-answer",
        "content": background_answer_text(outcome),
        "details": {"requestId": "r", "parentToolCallId": "call-1", "result": result.to_details()},
    }
    with_image = build_result(
        _choice_params(), {"source": Draft(custom_selected=True, custom_images=[IMG_A])}
    )
    message = background_answer_message(BackgroundOutcome("r2", result=with_image))
    assert isinstance(message["content"], list)
    assert message["content"][0]["type"] == "text"
    assert message["content"][0]["text"].startswith("Background answer [r2]")
    assert message["content"][1:] == [
        {"type": "text", "text": "Image for [source] Where should the test run? — custom answer:"},
        {"type": "image", "mimeType": "image/png", "data": "QUFB"},
    ]
    failed = background_answer_message(BackgroundOutcome("r3", error="boom"))
    assert failed["details"] == {"requestId": "r3", "error": "boom"}


# --------------------------------------------------------------------------------------------
# wait_for_answers
# --------------------------------------------------------------------------------------------


def test_wait_complete_empty() -> None:
    out = wait_complete_result([], [])
    assert out["content"] == [{"type": "text", "text": EMPTY_WAIT_TEXT}]
    assert EMPTY_WAIT_TEXT == (
        "No outstanding background answers. Previously delivered answers are already in context."
    )
    assert out["details"] == {"status": "complete", "requestIds": [], "results": []}
    assert out["structuredContent"] == out["details"]


def test_wait_complete_joins_answers_by_a_blank_line_then_images() -> None:
    first = BackgroundOutcome("r1", result=_answered_choice("r1"))
    with_image = build_result(
        _choice_params(), {"limit": Draft(note_images=[IMG_B])}, request_id="r2"
    )
    second = BackgroundOutcome("r2", result=with_image)
    out = wait_complete_result(["r1", "r2"], [first, second])
    assert out["content"][0] == {
        "type": "text",
        "text": background_answer_text(first) + "\n\n" + background_answer_text(second),
    }
    assert out["content"][1:] == [
        {"type": "text", "text": "Image for [limit] How many requests? — question note:"},
        {"type": "image", "mimeType": "image/jpeg", "data": "QkJC"},
    ]
    assert out["details"] == {
        "status": "complete",
        "requestIds": ["r1", "r2"],
        "results": [first.to_json(), second.to_json()],
    }
    assert out["structuredContent"] == out["details"]
    assert out["structuredContent"] is not out["details"]


@pytest.mark.parametrize("reason", ["hidden", "user_message"])
def test_wait_deferred_tells_the_agent_not_to_wait_again(reason: str) -> None:
    done = BackgroundOutcome("r1", result=_answered_choice("r1"))
    out = wait_deferred_result(reason, ["r1", "r2", "r3"], ["r2", "r3"], [done])  # type: ignore[arg-type]
    text = out["content"][0]["text"]
    assert "[r2], [r3]" in text
    assert "This is not an answer, a cancellation, or an approval" in text
    assert "do not call wait_for_answers again automatically" in text
    assert ("user sent a message" in text) == (reason == "user_message")
    assert ("hid the question panel" in text) == (reason == "hidden")
    assert text.endswith(background_answer_text(done))
    assert out["details"] == {
        "status": "deferred",
        "reason": reason,
        "requestIds": ["r1", "r2", "r3"],
        "pendingRequestIds": ["r2", "r3"],
        "results": [done.to_json()],
    }
    assert out["structuredContent"] == out["details"]


def test_wait_confirmation_rows() -> None:
    one = wait_complete_result(["r1"], [BackgroundOutcome("r1", error="x")])["details"]
    two = wait_complete_result(
        ["r1", "r2"], [BackgroundOutcome("r1", error="x"), BackgroundOutcome("r2", error="y")]
    )["details"]
    assert _texts([wait_confirmation(one)]) == ["Received answers for 1 form"]
    assert _texts([wait_confirmation(two)]) == ["Received answers for 2 forms"]
    assert _texts([wait_confirmation(wait_complete_result([], [])["details"])]) == [
        "No outstanding answers"
    ]
    deferred = wait_deferred_result("user_message", ["r1"], ["r1"], [])["details"]
    assert _texts([wait_confirmation(deferred)]) == [
        "Wait released (user message) · 1 form still pending"
    ]


# --------------------------------------------------------------------------------------------
# Transcript rows
# --------------------------------------------------------------------------------------------


def test_call_row() -> None:
    assert _texts(call_rows(_goal_params().to_json())) == ["ask_user 2 question(s) (Goal, Tone)"]
    raw = {"questions": [{"id": "a", "label": "  "}, {"id": "b"}, {"id": "c", "label": "Third"}]}
    assert _texts(call_rows(raw)) == ["ask_user 3 question(s) (Q1, Q2, Third)"]
    assert _texts(call_rows({"questions": "nope"})) == ["ask_user 0 question(s)"]
    long = {"questions": [{"label": "L" * 30} for _ in range(5)]}
    joined = ", ".join("L" * 30 for _ in range(5))
    assert _texts(call_rows(long)) == [f"ask_user 5 question(s) ({joined[:59]}…)"]
    assert all(cell_width(line_text(row)) <= 30 for row in call_rows(long, width=30))


def test_call_row_styles() -> None:
    (row,) = call_rows(_goal_params().to_json())
    assert row == (("accent", "ask_user"), ("text", " 2 question(s)"), ("muted", " (Goal, Tone)"))


def test_result_rows() -> None:
    drafts = {
        "goal": Draft(selected=[1], note="budget first", option_notes={"speed": "later"}),
        "tone": Draft(custom_text="warm", custom_selected=True),
    }
    result = build_result(_goal_params(), drafts)
    rows = result_rows(result, params=_goal_params())
    assert _texts(rows) == [
        "✓ Goal: Cost",
        "  note: budget first",
        "  Speed (not selected) note: later",
        "✓ Tone: (wrote) warm",
    ]
    assert rows[0][0] == ("success", "✓ ")
    unanswered = result_rows(build_result(_goal_params(), {}))
    assert _texts(unanswered) == ["? Goal: (no answer)", "? Tone: (no answer)"]
    assert unanswered[0][0] == ("warning", "? ")


def test_result_row_statuses() -> None:
    cancelled = build_result(_goal_params(), {}, cancelled=True)
    assert result_rows(cancelled) == [(("warning", "Cancelled"),)]
    assert result_rows(AskResult(cancelled=False)) == [(("success", "Submitted"),)]


def test_result_rows_neutralise_control_characters_and_split_lines() -> None:
    drafts = {"goal": Draft(custom_text="a\x1b[2Jb\nsecond", custom_selected=True)}
    rows = _texts(result_rows(build_result(_goal_params(), drafts)))
    assert rows[:2] == ["✓ Goal: (wrote) a\ufffdb", "  second"]
    assert not any("\x1b" in row for row in rows)


def _card(outcome: BackgroundOutcome, width: int = 60) -> list[str]:
    return _texts(background_card(outcome, width=width, params=_choice_params()))


def test_background_card_review_style_without_ids() -> None:
    drafts = {
        "source": Draft(selected=[0], note="fast enough", option_notes={"local": "flaky"}),
        "limit": Draft(
            selected=[0, 1],
            custom_text="adjustable",
            custom_selected=True,
            option_notes={"800": "ok"},
        ),
    }
    outcome = BackgroundOutcome("req-77", result=build_result(_choice_params(), drafts))
    lines = _card(outcome, width=40)
    assert lines == [
        "─" * 40,
        "Test setup · ✓ Answers received",
        "",
        "Where should the test run?",
        "Question note: fast enough",  # under the prompt: the question's, not the answer's
        "→ Agent browser",
        "  Local (not selected) note: flaky",
        "",
        "How many requests?",
        "→ 800",
        "  note: ok",
        "→ 1600",
        "→ adjustable",
        "─" * 40,
    ]
    assert not any("req-77" in line or "[source]" in line or "ask:" in line for line in lines)
    card = background_card(outcome, width=40, params=_choice_params())
    assert card[0] == (("accent", "─" * 40),)
    assert ("success", "✓ Answers received") in card[1]


def test_background_card_unanswered_skipped_and_untitled() -> None:
    drafts = {"source": Draft(note="ask the team"), "limit": Draft(skipped=True)}
    result = build_result(_choice_params(title=None), drafts)
    assert _card(BackgroundOutcome("r", result=result))[1:-1] == [
        "✓ Answers received",
        "",
        "Where should the test run?",
        "Question note: ask the team",
        "→ unanswered",
        "",
        "How many requests?",
        "→ skipped",
    ]


def test_background_card_cancelled_and_failed() -> None:
    cancelled = build_result(_choice_params(), {"source": Draft(selected=[0])}, cancelled=True)
    assert _card(BackgroundOutcome("r", result=cancelled))[1:-1] == [
        "Test setup · ? Questions cancelled",
        "No approval given.",
    ]
    assert _card(BackgroundOutcome("r", error="UI failed"))[1:-1] == [
        "! Question form failed",
        "UI failed",
    ]
    assert _card(BackgroundOutcome("r"))[1:-1] == [
        "! Question form failed",
        "No form result available.",
    ]
    failed = background_card(BackgroundOutcome("r", error="UI failed"), width=30)
    assert failed[1] == (("error", "! Question form failed"),)


def test_background_card_lines_fit_the_width() -> None:
    drafts = {
        "source": Draft(
            custom_text="a rather long answer that certainly needs wrapping " * 3,
            custom_selected=True,
            note="averyveryverylongwordwithoutanyspaces" * 2,
        )
    }
    result = build_result(_choice_params(), drafts)
    for width in (8, 20, 33):
        for line in background_card(BackgroundOutcome("r", result=result), width=width):
            assert cell_width(line_text(line)) <= width


def test_wrap_line_keeps_words_and_styles() -> None:
    line: Line = (("accent", "→ "), ("text", "alpha beta gamma"))
    assert wrap_line(line, 10, indent=2) == [
        (("accent", "→ "), ("text", "alpha")),
        (("text", "  beta"),),
        (("text", "  gamma"),),
    ]
    assert _texts(wrap_line((("text", "abcdefghij"),), 4)) == ["abcd", "efgh", "ij"]
    assert _texts(wrap_line((("text", "日本語テキスト"),), 5)) == ["日本", "語テ", "キス", "ト"]


# Emoji and the characters that join or restyle them, beside wide, combining and plain ones.
_WIDTH_ALPHABET = "a ❤☺⚠#👍👩💻🔥中日é\u0301\u20e3\u200d\ufe0f\ufe0e\U0001f3fb\U0001f3fd\U0001f3ff\U0001f1ef\U0001f1f5"


@given(st.text(alphabet=_WIDTH_ALPHABET, max_size=40))
def test_cell_width_is_prompt_toolkits_and_drawn_text_keeps_it(text: str) -> None:
    """One width rule: the layout counts cells as prompt_toolkit places characters. What the
    terminal is given (``drawn``) has no joiner, VS16 or skin tone, whose widths terminals
    disagree on, and takes exactly the cells the text was laid out in."""
    from prompt_toolkit.utils import get_cwidth

    assert cell_width(text) == get_cwidth(text)
    shown = drawn(text)
    assert cell_width(shown) == cell_width(text) == get_cwidth(shown)
    assert not set(shown) & {"\u200d", "\ufe0f", *map(chr, range(0x1F3FB, 0x1F400))}
    assert drawn(shown) == shown


def test_emoji_widths_as_a_terminal_draws_them() -> None:
    # tmux 3.3a, cursor after printing each: ❤️ 1, 👍 2, 中 2, é (combining) 1.
    assert cell_width("❤️") == 1
    assert cell_width("👍🏽") == 2 and drawn("👍🏽") == "👍"
    assert drawn("👩‍💻") == "👩💻" and cell_width("👩‍💻") == 4
    assert cell_width("e\u0301中") == 3
