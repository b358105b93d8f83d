"""Prompt templates a user points a run at (`run.prompt_templates` / `--prompt-templates DIR`).

The folder holds one file per test type: `execution.txt`, `multiple_choice.txt`, `short_answer.txt`
(a type without a file keeps our own wording). A template is plain text with:

  {{prompt}}          the test's prompt, as written in the suite
  {{requirements}}    one "- requirement" line per requirement
  {{test_function}}   the signature of the function the grader calls
  {{choices}}         one "KEY. text" line per choice
  {{#name}}...{{/name}}  a section kept only when `name` is not empty

Nothing else is interpreted, so a user can paste another harness's exact prompt wording (for
example upstream WP-Bench's, to compare with its published numbers) without it living in this
repository. The rendered prompt is what is sent and hashed.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from wpbench_k8s.errors import InputError
from wpbench_k8s.textsafe import decode_utf8

TEMPLATE_FILES = {"execution": "execution.txt", "multiple_choice": "multiple_choice.txt",
                  "short_answer": "short_answer.txt"}  # fmt: skip
PLACEHOLDERS = ("prompt", "requirements", "test_function", "choices")

_SECTION = re.compile(r"\{\{#(\w+)\}\}(.*?)\{\{/\1\}\}", re.DOTALL)
_VARIABLE = re.compile(r"\{\{(\w+)\}\}")


class PromptTemplates(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: str
    by_type: dict[str, str]  # test type -> template text


def _check(text: str, path: Path) -> None:
    names = {m.group(1) for m in _SECTION.finditer(text)} | set(_VARIABLE.findall(_SECTION.sub("", text)))
    for m in _SECTION.finditer(text):
        names |= set(_VARIABLE.findall(m.group(2)))
    unknown = sorted(names - set(PLACEHOLDERS))
    if unknown:
        raise InputError(f"{path}: unknown placeholder(s) {', '.join(unknown)} (known: {', '.join(PLACEHOLDERS)})")


def load_templates(folder: Path) -> PromptTemplates:
    if not folder.is_dir():
        raise InputError(
            f"{folder}: run.prompt_templates must be a folder holding {', '.join(TEMPLATE_FILES.values())}"
        )
    by_type: dict[str, str] = {}
    for kind, name in TEMPLATE_FILES.items():
        path = folder / name
        if path.is_file():
            try:
                text = decode_utf8(path.read_bytes(), str(path))
            except OSError as exc:
                raise InputError(f"{path}: cannot read: {exc.strerror}") from exc
            _check(text, path)
            by_type[kind] = text
    if not by_type:
        raise InputError(f"{folder}: no template files (expected {', '.join(TEMPLATE_FILES.values())})")
    return PromptTemplates(source=str(folder), by_type=by_type)


def render(template: str, values: dict[str, str]) -> str:
    def section(match: re.Match[str]) -> str:
        return match.group(2) if values.get(match.group(1)) else ""

    text = _SECTION.sub(section, template)
    return _VARIABLE.sub(lambda m: values.get(m.group(1), ""), text)
