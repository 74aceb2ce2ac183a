"""Every agent-facing output of a rich form, byte for byte, against a stored copy.

The result path (``build_result``, ``tool_result``, ``background_answer_message``, the waits)
is pinned here on one hand-made form that has every kind of answer at once (options with a
recommended one, custom text, skipped, unanswered, note-only, multi-select, presented types,
images on every place, stale keys, text with control characters), submitted and cancelled,
with and without params, and each asked twice.

The outputs in ``tests/data/result_golden.json`` must stay exactly these: JSON text (key order
included), and the values' Python types, which JSON alone would blur (tuples and lists, ``str``
subclasses).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pi_agent_ask.form.result import BackgroundOutcome, build_result
from pi_agent_ask.form.text import (
    background_answer_message,
    result_text,
    summary_lines,
    tool_result,
    wait_complete_result,
    wait_deferred_result,
)
from pi_agent_ask.form.transcript import (
    background_card,
    result_rows,
)
from pi_agent_ask.form.types import AskParams, Draft, Image, Option, Question

GOLDEN = Path(__file__).parent / "data" / "result_golden.json"

PNG = Image(id="img-1", mime_type="image/png", data="QUFB")
JPG = Image(id="img-2", mime_type="image/jpeg", data="QkJC")
GIF = Image(id="img-3", mime_type="image/gif", data="Q0ND")


def rich_form() -> tuple[AskParams, list[Draft], list[Any]]:
    """Params, drafts and presented types of a form with every kind of answer."""
    params = AskParams(
        title="Release plan",
        questions=(
            Question(
                id="db",
                label="Database",
                prompt="Which database?",
                type="single",
                options=(
                    Option("pg", "Postgres", description="relational", recommended=True),
                    Option("sqlite", "SQLite"),
                    Option("mongo", "Mongo"),
                ),
            ),
            Question(
                id="langs",
                label="Languages",
                prompt="Which languages?\nPick any.",
                type="multi",
                options=(Option("py", "Python"), Option("rs", "Rust"), Option("go", "Go")),
            ),
            Question(
                id="skip-me",
                label="Skipped",
                prompt="Skip this one",
                type="single",
                options=(Option("a", "A"), Option("b", "B")),
            ),
            Question(
                id="empty",
                label="Unanswered",
                prompt="Nobody answers",
                type="single",
                options=(Option("x", "X"),),
            ),
            Question(
                id="noted",
                label="Note only",
                prompt="Only notes here",
                type="multi",
                options=(Option("n1", "First"), Option("n2", "Second"), Option("n3", "Third")),
            ),
            Question(
                id="shown",
                label="Shown multi",
                prompt="Presented as multi",
                type="single",
                options=(Option("s1", "One"), Option("s2", "Two")),
            ),
            Question(
                id="pre",
                label="Pre\x1b[31mset\nlabel",
                prompt="Presented type set by normalisation",
                type="multi",
                options=(Option("p1", "P one"), Option("p2", "P two")),
                presented_type="single",
            ),
            Question(
                id="wrote",
                label="Wrote",
                prompt="Custom only",
                type="single",
                options=(Option("w1", "W1"),),
            ),
        ),
    )
    drafts = [
        Draft(
            selected=(0,),
            note="  prefer managed  ",
            option_notes={"sqlite": "only for tests", "stale": "gone option"},
        ),
        Draft(
            selected=(2, 0),
            custom_text="  Zig  ",
            custom_selected=True,
            custom_images=(PNG,),
            note="two\nlines",
            note_images=(JPG, PNG),
            option_notes={"go": "fast builds", "rs": "maybe", "py": "   "},
            option_note_images={"rs": (GIF,), "go": (JPG,)},
        ),
        Draft(skipped=True, note="ignored", custom_images=(GIF,)),
        Draft(custom_text="unselected custom", custom_selected=False),
        Draft(note="just a note", option_notes={"n3": "third!", "n1": "first!"}),
        Draft(selected=(0, 1)),
        Draft(selected=(1,), option_notes={"p2": "chosen"}),
        Draft(custom_text="my own", custom_selected=True, custom_images=(GIF,)),
    ]
    presented = [None, "multi", None, None, None, "multi", None, "bogus"]
    return params, drafts, presented


def _typed(value: object) -> object:
    """``value`` as JSON; a container or scalar whose type JSON would not bring back (a
    tuple, a dict or str subclass) is wrapped as ``{"<type name>": value}``."""
    kind = type(value)
    if kind is dict:
        return {k: _typed(v) for k, v in value.items()}  # type: ignore[attr-defined]
    if kind is list:
        return [_typed(v) for v in value]  # type: ignore[attr-defined]
    if kind in (str, bool, int) or value is None:
        return value
    if isinstance(value, dict):
        return {f"<{kind.__name__}>": {k: _typed(v) for k, v in value.items()}}
    if isinstance(value, list | tuple):
        return {f"<{kind.__name__}>": [_typed(v) for v in value]}
    if isinstance(value, str):
        return {f"<{kind.__name__}>": str(value)}
    raise TypeError(f"unexpected {kind.__name__} in an output")


def outputs() -> dict[str, object]:
    """Every output of the rich form, in a fixed order, each typed (``_typed``)."""
    params, drafts, presented = rich_form()
    out: dict[str, object] = {}
    for cancelled in (False, True):
        for request_id in ("req-1", None):
            for with_params in (True, False):
                name = f"cancelled={cancelled} id={request_id} params={with_params}"
                result = build_result(
                    params,
                    drafts,
                    presented_types=presented,
                    cancelled=cancelled,
                    request_id=request_id,
                )
                shown = params if with_params else None
                outcome = BackgroundOutcome(
                    request_id or "bg", parent_tool_call_id="call-9", result=result
                )
                asked = [
                    _typed(tool_result(result, params=shown)),
                    _typed(background_answer_message(outcome, params=shown)),
                    _typed(result_text(result, params=shown)),
                    _typed(summary_lines(result, params=shown, with_ids=True)),
                ]
                # Asked again, the answers come from what the result kept: the same.
                assert asked[::-1] == [
                    _typed(summary_lines(result, params=shown, with_ids=True)),
                    _typed(result_text(result, params=shown)),
                    _typed(background_answer_message(outcome, params=shown)),
                    _typed(tool_result(result, params=shown)),
                ]
                for what, value in zip(
                    ("tool_result", "background", "text", "summary"), asked, strict=True
                ):
                    out[f"{name} {what}"] = value
                out[f"{name} rows"] = _typed(result_rows(result, params=shown, width=40))
                out[f"{name} card"] = _typed(background_card(outcome, width=40, params=shown))
    params, drafts, _ = rich_form()
    plain = build_result(params, drafts, request_id="plain")
    failed = BackgroundOutcome("broken", error="form crashed")
    both = [BackgroundOutcome("plain", result=plain), failed]
    lookup = {"plain": params}
    out["wait complete"] = _typed(wait_complete_result(["plain", "broken"], both, params=lookup))
    out["wait deferred"] = _typed(
        wait_deferred_result("hidden", ["plain", "later"], ["later"], both, params=lookup)
    )
    out["outcome json"] = _typed(both[0].to_json())
    return out


def test_rich_form_outputs_are_exactly_the_stored_ones() -> None:
    expected = json.loads(GOLDEN.read_text(encoding="utf-8"))
    actual = json.loads(json.dumps(outputs(), ensure_ascii=False))
    assert list(actual) == list(expected)
    for name, value in expected.items():
        assert actual[name] == value, name
    assert json.dumps(actual, ensure_ascii=False) == json.dumps(expected, ensure_ascii=False)


def test_outputs_are_fresh_objects_each_time() -> None:
    """Each output owns its containers: editing one never changes another or a later one."""
    params, drafts, presented = rich_form()
    result = build_result(params, drafts, presented_types=presented, request_id="req-1")
    first = tool_result(result, params=params)
    message = background_answer_message(BackgroundOutcome("req-1", result=result), params=params)
    before = json.dumps([first, message])
    first["details"]["questions"][0]["label"] = "edited"  # type: ignore[index]
    first["details"]["answers"]["db"]["values"].append("edited")  # type: ignore[index]
    first["structuredContent"]["answers"]["db"]["optionNotes"]["x"] = "y"  # type: ignore[index]
    first["content"].append({"type": "text", "text": "edited"})  # type: ignore[union-attr]
    message["details"]["result"]["questions"][1]["id"] = "edited"  # type: ignore[index]
    assert json.dumps(tool_result(result, params=params)) == json.dumps(json.loads(before)[0])
    again = background_answer_message(BackgroundOutcome("req-1", result=result), params=params)
    assert json.dumps(again) == json.dumps(json.loads(before)[1])
    other = build_result(params, drafts, presented_types=presented, request_id="req-1")
    assert json.dumps(tool_result(other, params=params)) == json.dumps(json.loads(before)[0])


if __name__ == "__main__":  # regenerate only from a tree whose outputs are known right
    GOLDEN.write_text(json.dumps(outputs(), ensure_ascii=False, indent=0) + "\n", encoding="utf-8")


def test_a_results_details_hold_each_answers_own_details() -> None:
    """``AskResult.to_details`` writes each answer's entry out (no call per answer): every
    entry equals that answer's ``AnswerResult.to_details``, images and notes included."""
    params, drafts, presented = rich_form()
    for cancelled in (False, True):
        result = build_result(params, drafts, presented_types=presented, cancelled=cancelled)
        answers = result.to_details()["answers"]
        assert isinstance(answers, dict) and list(answers) == list(result.answers)
        for qid, answer in result.answers.items():
            assert answers[qid] == answer.to_details(), qid
