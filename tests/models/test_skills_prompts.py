"""Skills loading and hashing; prompt assembly; skills as a system message beside an identical user prompt."""

from __future__ import annotations

from pathlib import Path

import pytest

from wpbench_k8s.dataset import ExecutionTest, KnowledgeTest
from wpbench_k8s.errors import InputError
from wpbench_k8s.models.prompts import build_prompt, messages
from wpbench_k8s.models.skills import content_sha256, load_skill, load_skills


def make_skill(root: Path) -> Path:
    skill = root / "wp-plugin-development"
    (skill / "references").mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: wp-plugin-dev\ndescription: Plugins\n---\n\n# Plugins\nPrefix all names.\n"
    )
    (skill / "references" / "b-security.md").write_text("Escape late.\n")
    (skill / "references" / "a-hooks.md").write_text("Hook on init.\n")
    (skill / "references" / "notes.txt").write_text("not markdown, not inlined\n")
    return skill


def test_skill_directory_with_references_inlined(tmp_path: Path) -> None:
    skill = load_skill(make_skill(tmp_path))
    assert skill.name == "wp-plugin-dev"  # from front matter
    assert skill.content.startswith("---\nname: wp-plugin-dev")
    assert skill.content.index("Hook on init.") < skill.content.index("Escape late.")  # sorted
    assert '<reference path="references/a-hooks.md">' in skill.content
    assert "not inlined" not in skill.content
    assert skill.sha256 == content_sha256(skill.content) and skill.sha256.startswith("sha256:")


def test_references_can_be_left_out_and_change_the_hash(tmp_path: Path) -> None:
    path = make_skill(tmp_path)
    full, bare = load_skill(path), load_skill(path, include_references=False)
    assert "Escape late." not in bare.content
    assert bare.sha256 != full.sha256
    assert load_skill(path).sha256 == full.sha256  # stable


def test_single_markdown_file_skill(tmp_path: Path) -> None:
    md = tmp_path / "security-tips.md"
    md.write_text("Always use $wpdb->prepare.\n")
    skill = load_skill(md)
    assert (skill.name, skill.source, skill.content) == ("security-tips", str(md), "Always use $wpdb->prepare.\n")


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda p: p.mkdir(), "has no SKILL.md"),
        (lambda p: None, "does not exist"),
    ],
)
def test_bad_skill_paths(tmp_path: Path, setup: object, message: str) -> None:
    path = tmp_path / "skill"
    setup(path)  # type: ignore[operator]
    with pytest.raises(InputError, match=message):
        load_skill(path)


def test_non_markdown_file_and_duplicate_names(tmp_path: Path) -> None:
    txt = tmp_path / "x.txt"
    txt.write_text("x")
    with pytest.raises(InputError, match=r"\.md file"):
        load_skill(txt)
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "same.md").write_text("a")
    (tmp_path / "two").mkdir()
    (tmp_path / "two" / "same.md").write_text("b")
    with pytest.raises(InputError, match="also used by"):
        load_skills([tmp_path / "one" / "same.md", tmp_path / "two" / "same.md"])


EXEC = ExecutionTest(
    id="e1", category="shortcodes", prompt="Register a shortcode [shout].",
    requirements=["Escape the output", "Handle empty content"], test_function="mini_shout( string $t ): string",
)  # fmt: skip


def test_execution_prompt_has_prompt_requirements_and_signature() -> None:
    text = build_prompt(EXEC)
    assert text.startswith("Register a shortcode [shout].")
    assert "- Escape the output\n- Handle empty content" in text
    assert "`mini_shout( string $t ): string`" in text
    assert "```php" in text and '"files"' not in text


def test_plugin_prompt_asks_for_a_files_map() -> None:
    plugin = EXEC.model_copy(update={"artifact_kind": "wp_plugin_files", "test_function": None})
    text = build_prompt(plugin)
    assert '{"files": {' in text and "Plugin Name:" in text and "```json" in text
    assert "`mini_shout" not in text


def test_knowledge_prompts() -> None:
    mc = KnowledgeTest(id="k", category="c", type="multiple_choice", prompt="Which?",
                       choices=[{"key": "A", "text": "x"}, {"key": "B", "text": "y"}], correct_answer="A")  # fmt: skip
    assert build_prompt(mc) == "Which?\n\nA. x\nB. y\n\nAnswer with the letter of the correct choice only."
    sa = KnowledgeTest(id="k", category="c", type="short_answer", prompt="Name it.", correct_answer="z")
    assert build_prompt(sa).startswith("Name it.\n\nAnswer with the answer only")


def test_skills_go_in_a_system_message_and_the_user_prompt_is_byte_identical(tmp_path: Path) -> None:
    skill = load_skill(make_skill(tmp_path))
    prompt = build_prompt(EXEC)
    base, with_skill = messages(prompt), messages(prompt, [skill])
    assert base == [{"role": "user", "content": prompt}]
    assert with_skill[1] == base[0]
    assert with_skill[0]["role"] == "system"
    assert skill.content.strip() in with_skill[0]["content"]
