"""Validation and normalisation of ``ask_user`` arguments: every rule, with the exact texts."""

from __future__ import annotations

import copy
import os
import signal
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pi_agent_ask.form import validate as validate_module
from pi_agent_ask.form.context_files import (
    CONTEXT_FILE_MAX_BYTES,
    ContextFileError,
    is_context_path,
    load_context_file,
)
from pi_agent_ask.form.prepare import derive_label
from pi_agent_ask.form.schema_check import schema_error_text, schema_issues
from pi_agent_ask.form.types import AskParams, Issue, Option, Question
from pi_agent_ask.form.validate import params_from_saved, validate_ask_params

SCHEMA = 'Validation failed for tool "ask_user": '


def option(value: Any = "a", label: Any = "A", **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"value": value, "label": label}
    out.update(extra)
    return out


def question(qid: Any = "q", prompt: Any = "Which?", options: Any = None, **extra: Any) -> dict:
    out: dict[str, Any] = {"id": qid, "prompt": prompt}
    out["options"] = [option()] if options is None else options
    out.update(extra)
    return out


def ask(*questions: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"questions": list(questions), **extra}


def issues_of(arguments: object, **kwargs: Any) -> list[tuple[str, str]]:
    validation = validate_ask_params(arguments, **kwargs)
    assert validation.params is None
    return [(issue.path, issue.message) for issue in validation.issues]


def params_of(arguments: object, **kwargs: Any) -> AskParams:
    validation = validate_ask_params(arguments, **kwargs)
    assert validation.issues == ()
    assert validation.params is not None
    assert validation.ok
    return validation.params


# --------------------------------------------------------------------------------------------
# Label derivation
# --------------------------------------------------------------------------------------------


def test_label_derivation_catalog_example() -> None:
    raw = ask(
        question(
            options=[
                {"value": "region-local-kms-reencrypt-dek"},
                {"value": "follow_up", "label": "  "},
                {"value": "existing", "label": "Existing label"},
            ]
        )
    )
    # The raw input fails the public schema; derivation runs before it inside validation.
    assert schema_issues("ask_user", raw) == (
        Issue("questions[0].options[0].label", SCHEMA + "must have required property 'label'"),
    )
    params = params_of(raw)
    assert [o.label for o in params.questions[0].options] == [
        "Region local kms reencrypt dek",
        "Follow up",
        "Existing label",
    ]


@pytest.mark.parametrize(
    ("value", "label"),
    [
        ("follow_up", "Follow up"),
        ("a--b__c-_-d", "A b c d"),
        ("  spaced \t  out  ", "Spaced out"),
        ("camelCase_value", "CamelCase value"),
        ("éclair", "Éclair"),
        ("_leading", "Leading"),
        ("x", "X"),
        ("--", None),
        ("  _ - ", None),
        ("", None),
    ],
)
def test_derive_label(value: str, label: str | None) -> None:
    assert derive_label(value) == label


def test_derivation_leaves_non_string_labels_for_the_schema() -> None:
    assert issues_of(ask(question(options=[{"value": "x", "label": 5}]))) == [
        ("questions[0].options[0].label", SCHEMA + "must be string, not integer"),
    ]
    assert issues_of(ask(question(options=[{"value": "x", "label": None}]))) == [
        ("questions[0].options[0].label", SCHEMA + "must be string, not null"),
    ]


def test_derivation_needs_a_string_value_with_something_left() -> None:
    # Missing label and nothing to derive from: the schema's required label.
    assert issues_of(ask(question(options=[{"value": "--"}]))) == [
        ("questions[0].options[0].label", SCHEMA + "must have required property 'label'"),
    ]
    assert issues_of(ask(question(options=[{"value": 7}]))) == [
        ("questions[0].options[0].value", SCHEMA + "must be string, not integer"),
        ("questions[0].options[0].label", SCHEMA + "must have required property 'label'"),
    ]
    # Blank label kept blank: a semantic issue.
    assert issues_of(ask(question(options=[{"value": "-_-", "label": " "}]))) == [
        ("questions[0].options[0].label", "Question 1, option 1: label is required"),
    ]


# --------------------------------------------------------------------------------------------
# Schema failures
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "kind"),
    [([1], "array"), (None, "null"), ("questions", "string"), (3.5, "number"), (True, "boolean")],
)
def test_arguments_that_are_not_an_object_are_a_schema_issue(arguments: object, kind: str) -> None:
    validation = validate_ask_params(arguments)
    assert validation.schema_error
    assert not validation.ok
    assert validation.issues == (Issue("root", f"{SCHEMA}must be object, not {kind}"),)


def test_missing_questions() -> None:
    validation = validate_ask_params({"title": "T"})
    assert validation.schema_error
    assert validation.issues == (
        Issue("questions", SCHEMA + "must have required property 'questions'"),
    )


def test_grid_type_fails_the_schema() -> None:
    validation = validate_ask_params(ask(question(type="grid")))
    assert validation.schema_error
    assert validation.issues == (
        Issue("questions[0].type", SCHEMA + 'must be one of "single", "multi", not "grid"'),
    )


def test_type_error_hides_the_enum_error_at_the_same_path() -> None:
    assert issues_of(ask(question(type=None))) == [
        ("questions[0].type", SCHEMA + "must be string, not null"),
    ]


def test_missing_value_fails_the_schema() -> None:
    assert issues_of(ask(question(options=[{"label": "REST"}]))) == [
        ("questions[0].options[0].value", SCHEMA + "must have required property 'value'"),
    ]


def test_schema_reports_every_error_in_schema_order() -> None:
    arguments = {
        "title": 3,
        "background": "yes",
        "questions": [
            {"prompt": "p", "context": 5, "options": [{"value": "x", "label": None}, {}]},
            "not a question",
        ],
    }
    validation = validate_ask_params(arguments)
    assert validation.schema_error
    assert [(i.path, i.message.removeprefix(SCHEMA)) for i in validation.issues] == [
        ("title", "must be string, not integer"),
        ("background", "must be boolean, not string"),
        ("questions[0].context", "must be string, not integer"),
        ("questions[0].options[0].label", "must be string, not null"),
        ("questions[0].options[1].value", "must have required property 'value'"),
        ("questions[0].options[1].label", "must have required property 'label'"),
        ("questions[0].id", "must have required property 'id'"),
        ("questions[1]", "must be object, not string"),
    ]
    assert all(i.message.startswith(SCHEMA) for i in validation.issues)


def test_schema_error_text() -> None:
    validation = validate_ask_params(ask(question(options=[option(), {"value": "--"}])))
    assert schema_error_text("ask_user", validation.issues) == (
        'Validation failed for tool "ask_user":\n'
        "  - questions[0].options[1].label: must have required property 'label'"
    )


def test_unknown_properties_are_ignored_and_dropped() -> None:
    params = params_of(
        ask(question(required=True, options=[option(extra=1)]), mode="submit", extra=[1])
    )
    assert params.to_json() == {
        "questions": [
            {
                "id": "q",
                "label": "Q1",
                "prompt": "Which?",
                "type": "single",
                "options": [{"value": "a", "label": "A"}],
            }
        ]
    }


def test_mapping_arguments_are_accepted() -> None:
    arguments = types.MappingProxyType(ask(question()))
    assert params_of(arguments).questions[0].id == "q"


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("wait_for_answers", {}, ()),
        ("wait_for_answers", [], (Issue("root", "must be object, not array"),)),
        ("list_ask_history", {"query": "x", "limit": 200, "offset": 0}, ()),
        ("list_ask_history", {"limit": 0}, (Issue("limit", "must be >= 1"),)),
        ("list_ask_history", {"limit": 201}, (Issue("limit", "must be <= 200"),)),
        ("list_ask_history", {"offset": -1}, (Issue("offset", "must be >= 0"),)),
        ("list_ask_history", {"offset": 1.5}, (Issue("offset", "must be integer, not number"),)),
        (
            "list_ask_history",
            {"answeredOnly": 1},
            (Issue("answeredOnly", "must be boolean, not integer"),),
        ),
        ("read_ask_history", {"requestId": "r", "questionId": "q"}, ()),
        (
            "read_ask_history",
            {"requestId": "r"},
            (Issue("questionId", "must have required property 'questionId'"),),
        ),
        ("export_ask_history", {"path": "out.md"}, ()),
        (
            "export_ask_history",
            {"path": "out.md", "keys": []},
            (Issue("keys", "must NOT have fewer than 1 items"),),
        ),
        (
            "export_ask_history",
            {"path": "out.md", "keys": [{"requestId": "r"}]},
            (Issue("keys[0].questionId", "must have required property 'questionId'"),),
        ),
        ("export_ask_history", {}, (Issue("path", "must have required property 'path'"),)),
    ],
)
def test_schema_issues_of_the_other_tools(
    tool: str, arguments: object, expected: tuple[Issue, ...]
) -> None:
    prefix = f'Validation failed for tool "{tool}": '
    got = schema_issues(tool, arguments)
    assert got == tuple(Issue(i.path, prefix + i.message) for i in expected)


def test_schema_issues_unknown_tool() -> None:
    with pytest.raises(KeyError):
        schema_issues("no_such_tool", {})


# --------------------------------------------------------------------------------------------
# Semantic issues
# --------------------------------------------------------------------------------------------


def test_empty_questions() -> None:
    validation = validate_ask_params({"questions": [], "title": "  "})
    assert not validation.schema_error
    assert validation.issues == (Issue("questions", "At least one question is required"),)


def test_duplicate_question_id() -> None:
    validation = validate_ask_params(ask(question("scope"), question("scope")))
    assert not validation.schema_error
    assert validation.issues == (
        Issue("questions[1].id", 'Question 2: duplicate question id "scope"'),
    )


def test_duplicate_ids_compare_trimmed_and_first_wins() -> None:
    assert issues_of(ask(question(" scope "), question("other"), question("scope  "))) == [
        ("questions[2].id", 'Question 3: duplicate question id "scope"'),
    ]


def test_blank_value_is_required() -> None:
    assert issues_of(ask(question(options=[option(value="  ", label="REST")]))) == [
        ("questions[0].options[0].value", "Question 1, option 1: value is required"),
    ]


def test_all_semantic_issues_in_catalog_order() -> None:
    arguments = ask(
        question(" ", prompt=" ", options=[]),
        question(
            "b",
            prompt="\t",
            options=[option(" x "), option("x", label=" "), option(" "), option("_", " ")],
        ),
        question("b", options=[option("-", " "), option(" - ", "Y")]),
    )
    validation = validate_ask_params(arguments)
    assert not validation.schema_error
    assert [(i.path, i.message) for i in validation.issues] == [
        ("questions[0].id", "Question 1: id is required"),
        ("questions[0].prompt", "Question 1: prompt is required"),
        ("questions[0].options", "Question 1: at least one option is required"),
        ("questions[1].prompt", "Question 2: prompt is required"),
        # A blank label next to a derivable value is derived ("X"), so no label issue here.
        ("questions[1].options[1].value", 'Question 2, option 2: duplicate option value "x"'),
        ("questions[1].options[2].value", "Question 2, option 3: value is required"),
        ("questions[1].options[3].label", "Question 2, option 4: label is required"),
        ("questions[2].id", 'Question 3: duplicate question id "b"'),
        ("questions[2].options[0].label", "Question 3, option 1: label is required"),
        ("questions[2].options[1].value", 'Question 3, option 2: duplicate option value "-"'),
    ]


def test_value_issue_comes_before_label_issue_of_the_same_option() -> None:
    assert issues_of(ask(question(options=[option(" ", " ")]))) == [
        ("questions[0].options[0].value", "Question 1, option 1: value is required"),
        ("questions[0].options[0].label", "Question 1, option 1: label is required"),
    ]


def test_blank_id_is_not_remembered_for_duplicates() -> None:
    assert issues_of(ask(question(" "), question(""))) == [
        ("questions[0].id", "Question 1: id is required"),
        ("questions[1].id", "Question 2: id is required"),
    ]


def test_duplicate_messages_keep_non_ascii_text() -> None:
    assert issues_of(ask(question("größe"), question("größe"))) == [
        ("questions[1].id", 'Question 2: duplicate question id "größe"'),
    ]


def test_invalid_type_message_when_the_schema_is_bypassed() -> None:
    # The schema rejects it first; the semantic rule stays for callers that skip the schema.
    got = validate_module._semantic_issues([question(type="grid")], {})
    assert got == (
        Issue("questions[0].type", 'Question 1: invalid type "grid"; expected "single" or "multi"'),
    )


# --------------------------------------------------------------------------------------------
# Normalisation
# --------------------------------------------------------------------------------------------


def test_trim_example() -> None:
    params = params_of(
        ask(
            {
                "id": "  scope  ",
                "label": "  Scope  ",
                "prompt": "  What scope?  ",
                "options": [
                    {"value": "  small  ", "label": "  Small  ", "description": "  Lowest risk  "}
                ],
            }
        )
    )
    assert params.questions == (
        Question(
            id="scope",
            label="Scope",
            prompt="What scope?",
            type="single",
            options=(Option(value="small", label="Small", description="Lowest risk"),),
        ),
    )


def test_blank_optionals_example() -> None:
    params = params_of(
        {
            "title": "   ",
            "questions": [
                question(
                    label="  ", context=" \n ", options=[option(description=" ", preview="\t")]
                )
            ],
        }
    )
    assert params.title is None
    only = params.questions[0]
    assert only.label == "Q1"
    assert only.context is None
    assert only.options == (Option(value="a", label="A", description=None),)


def test_labels_fall_back_by_position() -> None:
    params = params_of(ask(question("a"), question("b", label=" Second "), question("c")))
    assert [q.label for q in params.questions] == ["Q1", "Second", "Q3"]


def test_title_trimmed_and_type_defaults() -> None:
    params = params_of(ask(question("a"), question("b", type="multi"), title="  Plan  "))
    assert params.title == "Plan"
    assert [q.type for q in params.questions] == ["single", "multi"]
    assert [q.presented_type for q in params.questions] == [None, None]


def test_recommended_is_kept_as_given() -> None:
    params = params_of(
        ask(
            question(
                options=[
                    option("a", recommended=True),
                    option("b", recommended=False),
                    option("c", recommended=True),
                    option("d"),
                ]
            )
        )
    )
    assert [o.recommended for o in params.questions[0].options] == [True, False, True, None]


def test_background_flag() -> None:
    assert params_of(ask(question())).background is False
    assert params_of(ask(question(), background=False)).background is False
    assert params_of(ask(question(), background=True)).background is True


@pytest.mark.parametrize("stale", [True, False, "yes", None])
def test_background_only_forces_background(stale: object) -> None:
    assert params_of(ask(question()), background_only=True).background is True
    assert params_of(ask(question(), background=stale), background_only=True).background is True


def test_background_only_still_reports_other_issues() -> None:
    validation = validate_ask_params({"background": False, "questions": 1}, background_only=True)
    assert validation.issues == (Issue("questions", SCHEMA + "must be array, not integer"),)


def test_present_single_as_multi() -> None:
    params = params_of(
        ask(question("a"), question("b", type="multi"), question("c", type="single")),
        present_single_as_multi=True,
    )
    assert [q.type for q in params.questions] == ["single", "multi", "single"]
    assert [q.presented_type for q in params.questions] == ["multi", None, "multi"]
    assert [q.effective_type for q in params.questions] == ["multi", "multi", "multi"]
    # The normalised arguments keep the requested type only.
    assert [q["type"] for q in params.to_json()["questions"]] == ["single", "multi", "single"]


def test_input_is_not_mutated() -> None:
    arguments = ask(
        question(
            " q ",
            type="preview",
            context="  text  ",
            options=[{"value": "follow_up", "preview": "old"}, option("b", " B ")],
        ),
        title=" T ",
        background=True,
    )
    before = copy.deepcopy(arguments)
    params_of(arguments)
    params_of(arguments, background_only=True, present_single_as_multi=True)
    assert arguments == before


# --------------------------------------------------------------------------------------------
# Contexts and context files
# --------------------------------------------------------------------------------------------


@pytest.fixture
def no_hang() -> Iterator[None]:
    """Fail instead of hanging if a file open blocks (a FIFO without a writer would)."""

    def fail(signum: int, frame: object) -> None:
        raise AssertionError("validation blocked on a file")

    previous = signal.signal(signal.SIGALRM, fail)
    signal.alarm(20)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def context_of(context: str, **kwargs: Any) -> str | None:
    return params_of(ask(question(context=context)), **kwargs).questions[0].context


def context_issue(context: str) -> tuple[str, str]:
    got = issues_of(ask(question(context=context)))
    assert len(got) == 1
    return got[0]


def test_text_context_is_trimmed() -> None:
    assert context_of("  Some background.\nSecond line.  \n") == "Some background.\nSecond line."
    assert context_of("   ") is None


@pytest.mark.parametrize(
    "text",
    ["notes/context.txt", "./context.txt", "~/context.txt", "see /etc/hosts", "C:\\x.txt"],
)
def test_relative_or_non_path_context_stays_text(text: str) -> None:
    assert context_of(text) == text


def test_multi_line_text_starting_with_a_slash_stays_text(tmp_path: Path) -> None:
    real = tmp_path / "real.txt"
    real.write_text("file text\n")
    text = f"{real}\nand more"
    assert context_of(text) == text
    assert context_of(f"{real}\r") == "file text\n"  # trimmed first: one line again
    assert not is_context_path(f"{real}\rmore")


def test_absolute_path_loads_the_raw_file_text(tmp_path: Path) -> None:
    path = tmp_path / "context.md"
    path.write_text("  # Heading\n\nBody with trailing newline.\n", encoding="utf-8")
    assert context_of(f"  {path}  ") == "  # Heading\n\nBody with trailing newline.\n"


def test_symlink_to_a_regular_file_loads(tmp_path: Path) -> None:
    target = tmp_path / "target.txt"
    target.write_text("through a link")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    assert context_of(str(link)) == "through a link"


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "missing.txt"
    assert context_issue(str(path)) == (
        "questions[0].context",
        f'Cannot load context file "{path}": No such file or directory',
    )


def test_os_error_text_is_the_reason(tmp_path: Path) -> None:
    parent = tmp_path / "plain.txt"
    parent.write_text("x")
    path = parent / "child.txt"
    assert context_issue(str(path)) == (
        "questions[0].context",
        f'Cannot load context file "{path}": Not a directory',
    )


def test_path_with_a_nul_character(tmp_path: Path) -> None:
    path = f"{tmp_path}/a\x00b"
    assert context_issue(path) == (
        "questions[0].context",
        f'Cannot load context file "{tmp_path}/a\\u0000b": embedded null byte',
    )


def test_directory(tmp_path: Path) -> None:
    assert context_issue(str(tmp_path)) == (
        "questions[0].context",
        f'Cannot load context file "{tmp_path}": Expected a regular text file',
    )


def test_fifo_is_refused_without_blocking(tmp_path: Path, no_hang: None) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert context_issue(str(fifo)) == (
        "questions[0].context",
        f'Cannot load context file "{fifo}": Expected a regular text file',
    )


def test_character_device_is_refused(no_hang: None) -> None:
    assert context_issue("/dev/null") == (
        "questions[0].context",
        'Cannot load context file "/dev/null": Expected a regular text file',
    )


@pytest.mark.parametrize("content", [b"", b"  \n\t\r\n "])
def test_empty_or_whitespace_only_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "empty.txt"
    path.write_bytes(content)
    assert context_issue(str(path)) == (
        "questions[0].context",
        f'Cannot load context file "{path}": Context file is empty',
    )


def test_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "image.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    assert context_issue(str(path)) == (
        "questions[0].context",
        f'Cannot load context file "{path}": Expected UTF-8 text, not binary data',
    )


def test_text_with_a_nul_is_binary(tmp_path: Path) -> None:
    path = tmp_path / "nul.txt"
    path.write_bytes(b"text\x00more")
    assert context_issue(str(path))[1].endswith(": Expected UTF-8 text, not binary data")


def test_invalid_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes("abc café".encode("latin-1"))
    assert context_issue(str(path)) == (
        "questions[0].context",
        f'Cannot load context file "{path}": '
        "Expected UTF-8 text, found an invalid byte at offset 7",
    )


def test_size_cap(tmp_path: Path) -> None:
    at_cap = tmp_path / "at-cap.txt"
    at_cap.write_bytes(b"x" * CONTEXT_FILE_MAX_BYTES)
    assert context_of(str(at_cap)) == "x" * CONTEXT_FILE_MAX_BYTES
    too_large = tmp_path / "too-large.txt"
    too_large.write_bytes(b"x" * (CONTEXT_FILE_MAX_BYTES + 1))
    assert CONTEXT_FILE_MAX_BYTES == 1048576
    assert context_issue(str(too_large)) == (
        "questions[0].context",
        f'Cannot load context file "{too_large}": Context file is larger than 1048576 bytes',
    )


def test_load_context_file_cap_is_a_parameter(tmp_path: Path) -> None:
    path = tmp_path / "small.txt"
    path.write_text("12345")
    assert load_context_file(str(path), max_bytes=5) == "12345"
    with pytest.raises(ContextFileError) as caught:
        load_context_file(str(path), max_bytes=4)
    assert caught.value.reason == "Context file is larger than 4 bytes"


def test_every_unreadable_file_is_reported(tmp_path: Path) -> None:
    good = tmp_path / "good.txt"
    good.write_text("fine")
    missing = tmp_path / "missing.txt"
    arguments = ask(
        question("a", context=str(missing)),
        question("b", context=str(good)),
        question("c", context=str(tmp_path)),
    )
    assert issues_of(arguments) == [
        (
            "questions[0].context",
            f'Cannot load context file "{missing}": No such file or directory',
        ),
        (
            "questions[2].context",
            f'Cannot load context file "{tmp_path}": Expected a regular text file',
        ),
    ]


def test_files_are_read_only_after_the_other_checks_pass(tmp_path: Path) -> None:
    missing = tmp_path / "missing.txt"
    arguments = ask(question("a", context=str(missing)), question("a"))
    assert issues_of(arguments) == [
        ("questions[1].id", 'Question 2: duplicate question id "a"'),
    ]


def test_loaded_text_is_saved_and_recovery_never_reads_again(tmp_path: Path) -> None:
    path = tmp_path / "context.txt"
    # A file whose text is itself a path: recovery must show this text, not read that path.
    path.write_text(f"{tmp_path}/elsewhere.txt\n")
    params = params_of(ask(question(context=str(path))))
    assert params.questions[0].context == f"{tmp_path}/elsewhere.txt\n"
    saved = params.to_json()
    path.unlink()
    assert params_from_saved(saved) == params


# --------------------------------------------------------------------------------------------
# Legacy conversion
# --------------------------------------------------------------------------------------------


def test_legacy_preview_type_becomes_single() -> None:
    params = params_of(ask(question(type="preview")))
    assert params.questions[0].type == "single"


def test_legacy_preview_type_with_present_single_as_multi() -> None:
    params = params_of(ask(question(type="preview")), present_single_as_multi=True)
    assert params.questions[0].type == "single"
    assert params.questions[0].presented_type == "multi"


def test_legacy_option_previews_become_labelled_context_sections() -> None:
    params = params_of(
        ask(
            question(
                type="preview",
                options=[
                    {"value": "compact", "preview": "  Dense rows.\n  "},
                    {"value": "none", "label": "None"},
                    {"value": "spacious_layout", "label": "Spacious", "preview": "Airy rows."},
                ],
            )
        )
    )
    only = params.questions[0]
    assert only.context == "Compact:\nDense rows.\n\nSpacious:\nAiry rows."
    assert only.options == (
        Option(value="compact", label="Compact"),
        Option(value="none", label="None"),
        Option(value="spacious_layout", label="Spacious"),
    )
    assert "preview" not in str(params.to_json())


def test_legacy_previews_follow_the_question_context() -> None:
    params = params_of(
        ask(question(context="  Pick a layout.  ", options=[option("a", "A", preview="Alpha")]))
    )
    assert params.questions[0].context == "Pick a layout.\n\nA:\nAlpha"


def test_legacy_absolute_preview_file(tmp_path: Path) -> None:
    path = tmp_path / "preview.txt"
    path.write_text(
        "Preview loaded from a local file.\nSecond line: the option label stays unchanged.\n"
    )
    params = params_of(
        ask(question(options=[option("doc", "Document", previewFile=f" {path} "), option("b")]))
    )
    only = params.questions[0]
    assert only.context == (
        "Document:\nPreview loaded from a local file.\n"
        "Second line: the option label stays unchanged."
    )
    assert only.options[0] == Option(value="doc", label="Document")


def test_legacy_relative_preview_file_is_an_issue() -> None:
    arguments = ask(question(options=[option("a"), option("b", "B", previewFile="notes.txt")]))
    assert issues_of(arguments) == [
        (
            "questions[0].options[1].previewFile",
            'Question 1, option 2: previewFile must be an absolute path, not "notes.txt"',
        ),
    ]


def test_legacy_preview_and_preview_file_together_is_an_issue() -> None:
    arguments = ask(question(options=[option("a", preview="x", previewFile="/tmp/x.txt")]))
    assert issues_of(arguments) == [
        (
            "questions[0].options[0].previewFile",
            "Question 1, option 1: use either preview or previewFile, not both",
        ),
    ]


def test_legacy_preview_file_errors(tmp_path: Path, no_hang: None) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text(" \n")
    missing = tmp_path / "missing.txt"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    arguments = ask(
        question(
            options=[
                option("a", previewFile=str(missing)),
                option("b", previewFile=str(empty)),
                option("c", previewFile=str(fifo)),
                option("d", previewFile=" "),
            ]
        )
    )
    at = "questions[0].options"
    assert issues_of(arguments) == [
        (
            f"{at}[0].previewFile",
            f'Cannot load preview file "{missing}": No such file or directory',
        ),
        (f"{at}[1].previewFile", f'Cannot load preview file "{empty}": Preview file is empty'),
        (
            f"{at}[2].previewFile",
            f'Cannot load preview file "{fifo}": Expected a regular text file',
        ),
    ]


def test_legacy_saved_form_is_converted() -> None:
    saved = {
        "title": "Layout",
        "questions": [
            {
                "id": "layout",
                "label": "Layout",
                "prompt": "Which layout?",
                "type": "preview",
                "required": False,
                "options": [
                    {"value": "doc", "label": "Document", "preview": "Loaded text.\n"},
                    {"value": "grid", "label": "Grid"},
                ],
            }
        ],
    }
    params = params_from_saved(saved)
    assert params is not None
    assert params.title == "Layout"
    assert params.questions[0].type == "single"
    assert params.questions[0].context == "Document:\nLoaded text."
    assert params.questions[0].options == (
        Option(value="doc", label="Document"),
        Option(value="grid", label="Grid"),
    )


def test_saved_form_with_a_preview_file_is_invalid(tmp_path: Path) -> None:
    path = tmp_path / "p.txt"
    path.write_text("text")
    saved = ask(question(options=[option(previewFile=str(path))]))
    assert params_from_saved(saved) is None


# --------------------------------------------------------------------------------------------
# Saved parameters
# --------------------------------------------------------------------------------------------


def test_params_from_saved_round_trip() -> None:
    params = params_of(
        ask(
            question("a", label="Goal", context="Why we ask.", options=[option(recommended=True)]),
            question("b", type="multi", options=[option("x", "X", description="d")]),
            title="Plan",
            background=True,
        )
    )
    assert params_from_saved(params.to_json()) == params


def test_params_from_saved_keeps_context_text_and_does_not_read(tmp_path: Path) -> None:
    missing = f"{tmp_path}/missing.txt"
    saved = ask(question(context=missing))
    params = params_from_saved(saved)
    assert params is not None
    assert params.questions[0].context == missing
    # The same arguments in a call read the path.
    assert issues_of(saved) == [
        ("questions[0].context", f'Cannot load context file "{missing}": No such file or directory')
    ]


def test_params_from_saved_presents_single_as_multi() -> None:
    params = params_from_saved(ask(question()), present_single_as_multi=True)
    assert params is not None
    assert params.questions[0].presented_type == "multi"


@pytest.mark.parametrize(
    "saved",
    [
        None,
        [],
        "x",
        {},
        {"questions": []},
        ask(question("a"), question("a")),
        ask(question(type=1)),
    ],
)
def test_params_from_saved_rejects_invalid_data(saved: object) -> None:
    assert params_from_saved(saved) is None
