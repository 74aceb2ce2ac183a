"""``@`` path completion in the editors (pure)."""

from __future__ import annotations

from pathlib import Path

from pi_agent_ask.ui.paths import PathCompletion, at_token, complete_at_path


def tree(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("")
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "README.md").write_text("")
    (tmp_path / ".hidden").write_text("")
    return tmp_path


def test_the_token_is_the_at_word_ending_at_the_cursor() -> None:
    assert at_token("see @src/ma", 11) == (4, "src/ma")
    assert at_token("see src", 7) is None
    assert at_token("mail a@b", 8) is None
    assert at_token("@", 1) == (0, "")


def test_one_match_completes_fully_and_directories_get_a_slash(tmp_path: Path) -> None:
    cwd = tree(tmp_path)
    assert complete_at_path("look at @sr", 11, cwd) == PathCompletion("look at @src/", 13)
    assert complete_at_path("@src/m and more", 6, cwd) == PathCompletion(
        "@src/main.py and more", 12
    )


def test_several_matches_extend_to_their_common_prefix(tmp_path: Path) -> None:
    cwd = tree(tmp_path)
    (cwd / "settings.json").write_text("")
    result = complete_at_path("@se", 3, cwd)
    assert result == PathCompletion("@set", 4, ("settings.json", "setup.py"))


def test_hidden_files_only_when_asked_and_nothing_for_no_match(tmp_path: Path) -> None:
    cwd = tree(tmp_path)
    assert ".hidden" not in complete_at_path("@", 1, cwd).candidates
    assert complete_at_path("@.h", 3, cwd) == PathCompletion("@.hidden", 8)
    assert complete_at_path("@zzz", 4, cwd) == PathCompletion("@zzz", 4)
    assert complete_at_path("no token", 8, cwd) is None


def test_absolute_paths_are_completed_as_they_are(tmp_path: Path) -> None:
    cwd = tree(tmp_path)
    text = f"@{cwd}/READ"
    result = complete_at_path(text, len(text), Path("/nonexistent"))
    assert result is not None
    assert result.text == f"@{cwd}/README.md"
