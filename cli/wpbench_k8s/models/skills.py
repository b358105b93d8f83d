"""Skills for A/B runs: `--skill PATH` is a directory holding SKILL.md or a single .md file.

A run is single-shot, so the model cannot follow SKILL.md's pointers to its reference files; by
default every `references/*.md` is inlined after SKILL.md (`include_references=False` turns that
off). The injected text is exactly `SkillSpec.content`, and `SkillSpec.sha256` is its digest, so
results stay attributable to the exact skill text measured.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from pathlib import Path

from wpbench_k8s.errors import InputError
from wpbench_k8s.manifest import SkillSpec

_FRONTMATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*(?:\n|\Z)", re.DOTALL)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: skill file is not UTF-8 text") from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot read skill file: {exc.strerror}") from exc


def frontmatter_name(text: str) -> str | None:
    """`name:` from a YAML front matter block, without parsing the rest."""
    match = _FRONTMATTER.match(text)
    if not match:
        return None
    for line in match.group(1).splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "name" and value.strip():
            return value.strip().strip("'\"")
    return None


def content_sha256(content: str) -> str:
    return "sha256:" + hashlib.sha256(content.encode("utf-8")).hexdigest()


def load_skill(path: Path | str, include_references: bool = True) -> SkillSpec:
    """Read one skill.

    Raises:
        InputError: the path does not exist, a directory has no SKILL.md, or a file is not
            readable Markdown text.
    """
    path = Path(path)
    if path.is_dir():
        main = path / "SKILL.md"
        if not main.is_file():
            raise InputError(f"{path}: skill directory has no SKILL.md")
        text = _read(main)
        parts = [text.strip()]
        if include_references:
            for ref in sorted((path / "references").glob("*.md")):
                rel = ref.relative_to(path).as_posix()
                parts.append(f'<reference path="{rel}">\n{_read(ref).strip()}\n</reference>')
        name = frontmatter_name(text) or path.resolve().name
    elif path.is_file():
        if path.suffix.lower() not in (".md", ".markdown"):
            raise InputError(f"{path}: a skill is a directory with SKILL.md or a .md file")
        text = _read(path)
        parts = [text.strip()]
        name = frontmatter_name(text) or path.stem
    else:
        raise InputError(f"{path}: skill path does not exist")
    content = "\n\n".join(parts) + "\n"
    if not text.strip():
        raise InputError(f"{path}: skill is empty")
    return SkillSpec(name=name, source=str(path), content=content, sha256=content_sha256(content))


def load_skills(paths: Iterable[Path | str], include_references: bool = True) -> list[SkillSpec]:
    """Load several skills; two skills with the same name are an error (results would be ambiguous)."""
    skills = [load_skill(p, include_references) for p in paths]
    seen: dict[str, str] = {}
    for skill in skills:
        if skill.name in seen:
            raise InputError(f"{skill.source}: skill name {skill.name!r} is also used by {seen[skill.name]}")
        seen[skill.name] = skill.source
    return skills
