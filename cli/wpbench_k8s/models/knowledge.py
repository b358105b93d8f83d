"""Scoring knowledge answers 0/1.

Multiple choice: the chosen letter is read from the answer ("B", "**B**", "(B)", "B) plugins_loaded",
"The answer is B", "Answer: B") or, failing that, from the text of exactly one choice quoted in
the answer; the score is 1 when it equals `correct_answer`.

Short answer: the answer (the text after a final "Answer:" label when there is one) is matched
against `correct_answer` and every `accepted_answers` entry with the test's `match`:
`exact` (case-insensitive, ignoring surrounding quotes, backticks, bold marks and a final period),
`contains` (the normalised expected text occurs in the normalised answer) or `regex` (Python
`re.search`, case-insensitive, on the whole answer).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from wpbench_k8s.dataset import KnowledgeTest


@dataclass(frozen=True)
class KnowledgeScore:
    score: float  # 1.0 or 0.0
    answer: str  # what was read from the completion (the letter, or the normalised answer)
    reason: str


# Decorations stripped from answers: markdown emphasis, backticks, straight and curly quotes.
# Emphasis and quote marks around an answer; not "_", which starts real identifiers (`_x`, `_fields`).
_QUOTES = "*`'\"\u201c\u201d\u2018\u2019"


def _normalise(text: str) -> str:
    text = text.strip()
    text = re.sub(rf"^[{_QUOTES}\s]+|[{_QUOTES}\s]+$", "", text)
    text = text.rstrip(".").strip()
    return re.sub(r"\s+", " ", text).casefold()


def choice_letter(answer: str, keys: list[str], texts: dict[str, str] | None = None) -> str | None:
    """The choice key the answer picks, or None when it cannot be told."""
    if not answer.strip():
        return None
    alt = "|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True))
    key_token = rf"[\s*_`'\"(\[]*({alt})(?![A-Za-z0-9])"
    patterns = [
        rf"^{key_token}[\s*_`'\")\].:]*$",  # the whole answer is the letter
        rf"(?i:answer|choice|option)(?:\s+is)?\s*[:=\-]?\s*(?:\*\*)?{key_token}",  # "Answer: B", "answer is **B**"
        rf"^{key_token}\s*[).:\-]",  # "B) ...", "B. ...", "B: ..."
    ]
    text = answer.strip()
    for pattern in patterns:
        matches = re.findall(pattern, text, re.MULTILINE)
        if matches:
            return str(matches[-1]) if isinstance(matches[-1], str) else None
    # A lone key token somewhere ("I'd go with (C)."), not the start of a sentence ("A hook ..."):
    # only when exactly one distinct key appears so.
    lone: set[str] = set(re.findall(rf"(?<![\w'\u2019])[(\[*]*({alt})[)\]*]*(?![\w'\u2019])(?!\s+[a-z])", text))
    if len(lone) == 1:
        return lone.pop()
    if texts:
        norm = _normalise(text)
        hits = [k for k, t in texts.items() if _normalise(t) and _normalise(t) in norm]
        if len(hits) == 1:
            return hits[0]
    return None


def final_answer(text: str) -> str:
    """The text after the last "Answer:" label, or the first non-empty line."""
    labelled = re.findall(r"(?im)^\s*(?:\*\*)?(?:final\s+)?answer(?:\*\*)?\s*[:\-]\s*(?:\*\*)?\s*(.+)$", text)
    if labelled:
        return str(labelled[-1]).strip()
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def score_knowledge(test: KnowledgeTest, answer: str) -> KnowledgeScore:
    if not answer.strip():
        return KnowledgeScore(0.0, "", "empty answer")
    if test.type == "multiple_choice":
        keys = [c.key for c in test.choices]
        letter = choice_letter(answer, keys, {c.key: c.text for c in test.choices})
        if letter is None:
            return KnowledgeScore(0.0, "", "no choice letter in the answer")
        ok = letter == test.correct_answer
        return KnowledgeScore(1.0 if ok else 0.0, letter, "correct" if ok else f"chose {letter}")
    expected = [test.correct_answer, *test.accepted_answers]
    if test.match == "regex":
        for pattern in expected:
            if re.search(pattern, answer, re.IGNORECASE):
                return KnowledgeScore(1.0, final_answer(answer), f"matches /{pattern}/")
        return KnowledgeScore(0.0, final_answer(answer), "no accepted pattern matches")
    given = _normalise(final_answer(answer))
    for want in expected:
        w = _normalise(want)
        if (test.match == "exact" and given == w) or (test.match == "contains" and w and w in _normalise(answer)):
            return KnowledgeScore(1.0, given, f"{test.match} match")
    return KnowledgeScore(0.0, given, f"no {test.match} match")


def score_answer(test: KnowledgeTest, answer: str) -> float:
    """1.0 or 0.0 (what `Record.scores.correctness` holds for a knowledge test)."""
    return score_knowledge(test, answer).score
