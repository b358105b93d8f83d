"""Getting gradable code out of a completion.

`extract_php(text)` finds PHP however the model wrapped it: fenced blocks anywhere (``` or ~~~,
with or without a language tag, closed or cut off at the end), prose around them, several blocks
(the PHP one wins; further PHP blocks that only add new functions or classes are kept, usage
examples and rewritten copies are dropped), a bare `<?php` file, or bare code with no fence.
The result has no leading `<?php` tag and no trailing `?>`: the grader adds the open tag.

`extract_files(text)` finds the plugin files map for `wp_plugin_files` tests: `{"files": {...}}`
fenced or bare, with prose around it, or a bare path -> contents map.

Both return an `Extraction`; when nothing gradable is found its `error` says why, and the
pipeline records that as `Candidate.extraction_error` (a model failure, scored 0, never retried).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from wpbench_k8s.manifest import Candidate
from wpbench_k8s.upstream_compat import strip_outer_fence

PHP_LANGS = frozenset({"php", "php5", "php7", "php8", "phtml", "wordpress"})
# Languages that are certainly not the PHP answer (a block tagged so is skipped unless it opens with <?php).
OTHER_LANGS = frozenset(
    {
        "json", "bash", "sh", "shell", "console", "zsh", "js", "javascript", "ts", "typescript", "jsx", "tsx",
        "html", "css", "scss", "sql", "text", "txt", "plaintext", "markdown", "md", "yaml", "yml", "xml",
        "python", "py", "diff", "ini", "apache", "nginx", "dockerfile",
    }
)  # fmt: skip

_OPEN_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<pre>.*?)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*?)[ \t]*$")
_PHP_HINTS = re.compile(
    r"<\?php|\bfunction\s+&?\w+\s*\(|\badd_(?:action|filter|shortcode)\s*\(|\$\w+\s*(?:=|->)|\bnamespace\s+\w|"
    r"\bclass\s+\w+|\bregister_\w+\s*\(|\bwp_\w+\s*\("
)
_PHP_START = re.compile(
    r"^\s*(?:<\?php|function\b|add_(?:action|filter|shortcode)\b|class\b|final\b|abstract\b|interface\b|trait\b|"
    r"enum\b|namespace\b|use\b|declare\b|if\s*\(|\$\w|//|/\*|#(?!\s*#)|require|include|const\b|defined\b|"
    r"register_\w+\s*\(|\w+\s*\(.*\)\s*;)"
)
_DECLARATION = re.compile(
    r"^\s*(?:(?:final|abstract|readonly)\s+)*(?:function\s+&?|class\s+|interface\s+|trait\s+|enum\s+)(\w+)",
    re.MULTILINE | re.IGNORECASE,
)


@dataclass(frozen=True)
class Extraction:
    code: str | None = None
    files: dict[str, str] | None = None
    error: str | None = None


@dataclass(frozen=True)
class Block:
    lang: str
    body: str
    closed: bool


def fenced_blocks(text: str) -> list[Block]:
    """Every fenced block, in order. A fence left open at the end runs to the end of the text."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = _OPEN_FENCE.match(lines[i])
        # A fence opens a block only when the info string is a single word (or nothing).
        if not match or " " in match.group("info").strip():
            i += 1
            continue
        fence = match.group("fence")
        lang = match.group("info").strip().lower().lstrip("{.").rstrip("}")
        closer = re.compile(r"^[ \t]*" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}[ \t]*$")
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not closer.match(lines[j]):
            body.append(lines[j])
            j += 1
        blocks.append(Block(lang=lang, body="\n".join(body), closed=j < len(lines)))
        i = j + 1
    return blocks


def strip_php_tags(code: str) -> str:
    """Drop a leading `<?php` open tag and a trailing `?>`; leave everything in between alone."""
    code = code.strip()
    code = re.sub(r"^<\?php\b[ \t]*\n?", "", code, count=1, flags=re.IGNORECASE)
    code = re.sub(r"\n?\?>\s*$", "", code, count=1)
    return code.strip("\n") + "\n"


def _is_php_block(block: Block) -> bool:
    if block.lang in PHP_LANGS:
        return True
    if block.body.lstrip().lower().startswith("<?php"):
        return True
    return block.lang == "" and bool(_PHP_HINTS.search(block.body)) and not _looks_like_json(block.body)


def _looks_like_json(body: str) -> bool:
    try:
        json.loads(body)
    except ValueError:
        return False
    return True


def _declared(code: str) -> set[str]:
    return {name.lower() for name in _DECLARATION.findall(code)}


def _combine(blocks: list[Block]) -> str:
    """The largest block, plus others that declare something new and redeclare nothing."""
    main = max(blocks, key=lambda b: len(b.body.strip()))
    chosen = [main]
    declared = _declared(main.body)
    for block in blocks:
        if block is main:
            continue
        names = _declared(block.body)
        if names and not names & declared:
            chosen.append(block)
            declared |= names
    ordered = [b for b in blocks if any(b is c for c in chosen)]  # keep the model's order
    return "\n\n".join(strip_php_tags(b.body).rstrip("\n") for b in ordered) + "\n"


def extract_php(text: str) -> Extraction:
    if not text or not text.strip():
        return Extraction(error="empty completion")
    blocks = [b for b in fenced_blocks(text) if b.body.strip()]
    php_blocks = [b for b in blocks if _is_php_block(b)]
    if php_blocks:
        return Extraction(code=_combine(php_blocks))
    if blocks:
        untagged = [b for b in blocks if b.lang not in OTHER_LANGS and not _looks_like_json(b.body)]
        if untagged:
            return Extraction(code=_combine(untagged))
        langs = ", ".join(sorted({b.lang or "untagged" for b in blocks}))
        return Extraction(error=f"no PHP code in the completion: its fenced blocks are {langs}")
    # No fences at all.
    open_tag = re.search(r"<\?php\b", text, re.IGNORECASE)
    if open_tag:
        code = text[open_tag.start() :]
        close = code.rfind("?>")
        if close != -1 and not code[close + 2 :].strip().startswith("<"):
            code = code[: close + 2]
        return Extraction(code=strip_php_tags(code))
    first_line = next((line for line in text.splitlines() if line.strip()), "")
    if _PHP_START.match(first_line) and _PHP_HINTS.search(text):
        return Extraction(code=strip_php_tags(text))
    return Extraction(error="no PHP code in the completion (no fenced block, no <?php tag, no code)")


def _files_from(doc: Any) -> dict[str, str] | str | None:
    """A files map from a parsed JSON document; an error string when it is one but malformed."""
    if not isinstance(doc, dict):
        return None
    files: Any = doc.get("files") if "files" in doc else None
    if files is None:
        # A bare path -> contents map: every key looks like a file path.
        if doc and all(isinstance(k, str) and re.search(r"\.\w+$", k) for k in doc):
            files = doc
        else:
            return None
    if isinstance(files, list):  # [{"path": ..., "content": ...}], a shape models like to invent
        try:
            files = {str(f["path"]): f["content"] for f in files}
        except (TypeError, KeyError):
            return "`files` is a list whose entries are not {path, content} objects"
    if not isinstance(files, dict):
        return f"`files` must map paths to contents, got {type(files).__name__}"
    if not files:
        return "`files` map is empty"
    bad = [k for k, v in files.items() if not isinstance(v, str)]
    if bad:
        return f"`files` values must be file contents (strings); {bad[0]!r} is not"
    return {str(k): v for k, v in files.items()}


def json_documents(text: str) -> list[Any]:
    """JSON objects in the text: fenced blocks first (json-tagged before others), then the whole
    text, then every object that starts at a `{` in the prose."""
    decoder = json.JSONDecoder(strict=False)  # models put raw newlines inside strings
    docs: list[Any] = []
    blocks = sorted(fenced_blocks(text), key=lambda b: b.lang != "json")
    for candidate in [b.body for b in blocks] + [text]:
        try:
            docs.append(decoder.decode(candidate.strip()))
        except ValueError:
            continue
    for match in re.finditer(r"\{", text):
        try:
            doc, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        docs.append(doc)
    return docs


def extract_files(text: str) -> Extraction:
    if not text or not text.strip():
        return Extraction(error="empty completion")
    first_error: str | None = None
    for doc in json_documents(text):
        found = _files_from(doc)
        if isinstance(found, dict):
            return Extraction(files=found)
        if isinstance(found, str) and first_error is None:
            first_error = found
    if first_error:
        return Extraction(error=f"plugin files JSON is malformed: {first_error}")
    return Extraction(error='no JSON object with a "files" map in the completion')


# Upstream's verifier strips `^<\?php\s*` with PCRE, whose \s is ASCII only: a no-break space after the
# tag stays in the code (where PHP reads its bytes as part of a name), so here \s must not be Unicode's.
_LEADING_OPEN_TAG = re.compile(r"^<\?php[ \t\n\r\f\v]*", re.IGNORECASE)
_BOM = "\ufeff"


def extract_strict(text: str) -> Extraction:
    """The upstream profile: one outer fence stripped, then the leading `<?php` its verifier strips.

    Upstream eval()s the rest, so it is PHP from its first byte. Our grader includes a file instead,
    which reads a leading BOM as not-code and `<?...` as an open tag; such code gets an explicit `<?php `
    in front so the grader parses what eval() parses (a BOM before `<?php` is a parse error there).
    """
    code = _LEADING_OPEN_TAG.sub("", strip_outer_fence(text), count=1)
    if code.startswith((_BOM, "<?")):
        code = "<?php " + code
    return Extraction(code=code)


def extract(text: str, artifact_kind: str, *, strict: bool = False) -> Extraction:
    if artifact_kind == "wp_plugin_files":
        return extract_files(text)
    return extract_strict(text) if strict else extract_php(text)


def extract_candidate(text: str, artifact_kind: str, label: str = "completion", *, strict: bool = False) -> Candidate:
    """A `Candidate` from a raw completion: code or files, or `extraction_error` saying why not.

    `strict` (the upstream profile) strips one outer fence and nothing else; see `extract_strict`.
    """
    found = extract(text, artifact_kind, strict=strict)
    return Candidate(code=found.code, files=found.files, raw=text, extraction_error=found.error, label=label)
