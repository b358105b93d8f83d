"""Prompt assembly. The user prompt depends only on the test, so it is byte-identical between the
baseline and with-skills variants; skills travel as a system message of their own.

`build_prompt(test)` is what the manifest stores (`ManifestItem.prompt`, hashed into
`prompt_hash`) and what `generate_candidate` sends: both call this one function.
"""

from __future__ import annotations

from collections.abc import Sequence

from wpbench_k8s.dataset import ExecutionTest, KnowledgeTest
from wpbench_k8s.manifest import SkillSpec
from wpbench_k8s.models.templates import PromptTemplates, render

PHP_SNIPPET_INSTRUCTIONS = (
    "Write the WordPress PHP code for this task. It is loaded as a single PHP file inside a "
    "running WordPress site (after WordPress has booted), so do not bootstrap WordPress and do not "
    "print anything unless the task asks for output.\n"
    "Reply with the complete code in one ```php fenced block. Do not add usage examples or tests."
)

PLUGIN_FILES_INSTRUCTIONS = (
    "Write this as a WordPress plugin. Reply with a JSON object whose `files` member maps relative "
    "file paths to complete file contents, for example:\n"
    '{"files": {"my-plugin.php": "<?php\\n/**\\n * Plugin Name: My Plugin\\n */\\n...", '
    '"includes/class-my-plugin.php": "<?php\\n..."}}\n'
    "Include exactly one top-level PHP file with a `Plugin Name:` header. Use relative paths only "
    "(no `..`, no leading `/`). Reply with the JSON object only, in one ```json fenced block."
)

MULTIPLE_CHOICE_INSTRUCTIONS = "Answer with the letter of the correct choice only."
SHORT_ANSWER_INSTRUCTIONS = "Answer with the answer only (a word, name or short phrase), no explanation."

SKILLS_PREAMBLE = (
    "The following skill material is provided to help with WordPress development tasks. Use it where it applies."
)


def execution_prompt(test: ExecutionTest) -> str:
    """Prompt + requirements + the test_function signature + how to reply."""
    parts = [test.prompt.strip()]
    if test.requirements:
        parts.append("Requirements:\n" + "\n".join(f"- {r.strip()}" for r in test.requirements))
    if test.test_function:
        parts.append(
            "The grader calls this function, so define it with exactly this name and signature:\n"
            f"`{test.test_function.strip()}`"
        )
    parts.append(PLUGIN_FILES_INSTRUCTIONS if test.artifact_kind == "wp_plugin_files" else PHP_SNIPPET_INSTRUCTIONS)
    return "\n\n".join(parts)


def knowledge_prompt(test: KnowledgeTest) -> str:
    parts = [test.prompt.strip()]
    if test.type == "multiple_choice":
        parts.append("\n".join(f"{c.key}. {c.text.strip()}" for c in test.choices))
        parts.append(MULTIPLE_CHOICE_INSTRUCTIONS)
    else:
        parts.append(SHORT_ANSWER_INSTRUCTIONS)
    return "\n\n".join(parts)


def template_prompt(test: ExecutionTest | KnowledgeTest, templates: PromptTemplates) -> str | None:
    """The test rendered with the user's template for its type, or None when there is none."""
    kind = "execution" if isinstance(test, ExecutionTest) else test.type
    template = templates.by_type.get(kind)
    if template is None:
        return None
    if isinstance(test, ExecutionTest):
        values = {
            "prompt": test.prompt,
            "requirements": "\n".join(f"- {r}" for r in test.requirements),
            "test_function": test.test_function or "",
        }
    else:
        values = {"prompt": test.prompt, "choices": "\n".join(f"{c.key}. {c.text}" for c in test.choices)}
    return render(template, values)


def build_prompt(test: ExecutionTest | KnowledgeTest, templates: PromptTemplates | None = None) -> str:
    """Our wording, or the user's template for the test's type when the run names templates."""
    if templates is not None:
        rendered = template_prompt(test, templates)
        if rendered is not None:
            return rendered
    return execution_prompt(test) if isinstance(test, ExecutionTest) else knowledge_prompt(test)


def skills_system_message(skills: Sequence[SkillSpec]) -> str:
    """All skills as one system message, in the order given."""
    blocks = [f'<skill name="{s.name}">\n{s.content.strip()}\n</skill>' for s in skills]
    return SKILLS_PREAMBLE + "\n\n" + "\n\n".join(blocks)


def messages(prompt: str, skills: Sequence[SkillSpec] = ()) -> list[dict[str, str]]:
    """The chat messages: an optional skills system message, then the user prompt unchanged."""
    out: list[dict[str, str]] = []
    if skills:
        out.append({"role": "system", "content": skills_system_message(skills)})
    out.append({"role": "user", "content": prompt})
    return out
