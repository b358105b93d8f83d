"""Scoring knowledge answers 0/1, under a named set of rules (the one place knowledge is scored).

`score_knowledge(test, reply, rules=...)` picks the rules from `RULES`; an execution profile that
wants other semantics (upstream WP-Bench's `answer_type`, say) registers its own function there.

Our rules ("wpbench"): only the final answer counts, and it must name one answer.

Multiple choice: the chosen letter is read from the reply ("B", "**B**", "(B)", "B) plugins_loaded",
"The answer is B", "Answer: B") or, failing that, from the text of exactly one choice quoted in it.
The line the letter is read from, and the answer line (the text after the last "Answer:" label, else
the first non-empty line), must name no other choice: "B or C", "A, B, C, D", "B (C also works)" and
"... so the answer is B or C" score 0.

Short answer: only the answer line is matched, against `correct_answer` and every `accepted_answers`
entry with the test's `match`: `exact` (case-insensitive, ignoring surrounding quotes, backticks,
bold marks, a final period and a trailing `()`), `contains` (the expected text occurs in the answer
line as a whole token, so `register_setting` is not found in `unregister_setting`) or `regex`
(Python `re.search`, case-insensitive, on the answer line). A match scores 0 when the answer line
also names a rival of the same kind: another code identifier (a name with `_`, `$`, `::` or `->`)
when the match is one, another number when it is a number. Arguments inside the parentheses of the
matched call (`did_action( 'init' )`) are not rivals; names that themselves match are not either, nor
a call whose first argument is the quoted match (`add_action( 'rest_api_init', 'my_routes' )`,
`get_option( 'rewrite_rules' )`: the callee and its other arguments). A rival must be a code name or
a number: "rest_api_init or init" still scores 1, since "init" reads as a word.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from wpbench_k8s.dataset import KnowledgeTest
from wpbench_k8s.upstream_compat import upstream_answer


@dataclass(frozen=True)
class KnowledgeScore:
    score: float  # 1.0 or 0.0
    answer: str  # what was read from the completion (the letter, or the normalised answer line)
    reason: str


ScoreRules = Callable[[KnowledgeTest, str], KnowledgeScore]

# Emphasis and quote marks around an answer; not "_", which starts real identifiers (`_x`, `_fields`).
_QUOTES = "*`'\"\u201c\u201d\u2018\u2019"
_LABEL = re.compile(r"(?im)^\s*(?:\*\*)?(?:final\s+)?answer(?:\*\*)?\s*[:\-]\s*(?:\*\*)?\s*(.+)$")
# A call written around a quoted name as its first argument: `add_action( '` before the match.
_CALL_AROUND = re.compile(r"(?<![\w$>:])[A-Za-z_]\w*\s*(\()\s*['\"`]$")
# Tokens an answer line can name: code identifiers (with `$`, `::`, `->`) and numbers.
_TOKEN = re.compile(r"\$?[A-Za-z_]\w*(?:(?:::|->)\$?\w+)*|(?<![\w./])\d+(?:\.\d+)*(?![\w.]*\w)")


def _normalise(text: str) -> str:
    text = text.strip()
    text = re.sub(rf"^[{_QUOTES}\s]+|[{_QUOTES}\s]+$", "", text)
    text = text.rstrip(".").strip()
    text = re.sub(rf"[{_QUOTES}\s]+$", "", text)
    return re.sub(r"\s+", " ", text).casefold()


def final_answer(text: str) -> str:
    """The text after the last "Answer:" label, or the first non-empty line."""
    labelled = _LABEL.findall(text)
    if labelled:
        return str(labelled[-1]).strip()
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def read_choice(answer: str, keys: list[str], texts: dict[str, str] | None = None) -> tuple[str | None, str]:
    """(the choice key the answer picks or None, the line it was read from)."""
    text = answer.strip()
    if not text:
        return None, ""
    alt = "|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True))
    key_token = rf"[\s*_`'\"(\[]*({alt})(?![A-Za-z0-9])"
    patterns = [
        rf"^{key_token}[\s*_`'\")\].:]*$",  # the whole answer is the letter
        rf"(?i:answer|choice|option)(?:\s+is)?\s*[:=\-]?\s*(?:\*\*)?{key_token}",  # "Answer: B", "answer is **B**"
        rf"^{key_token}\s*[).:\-]",  # "B) ...", "B. ...", "B: ..."
    ]
    for pattern in patterns:
        matches = list(re.finditer(pattern, text, re.MULTILINE))
        if matches:
            last = matches[-1]
            start = text.rfind("\n", 0, last.start()) + 1
            end = text.find("\n", last.end())
            return last.group(1), text[start : end if end >= 0 else len(text)].strip()
    # A lone key token somewhere ("I'd go with (C)."), not the start of a sentence ("A hook ..."):
    # only when exactly one distinct key appears so.
    sentence = r"(?!\s+(?!(?:or|and|nor)\b)[a-z])"  # "A hook ..." starts a sentence; "B or C" names two
    lone: set[str] = set(re.findall(rf"(?<![\w'\u2019])[(\[*]*({alt})[)\]*]*(?![\w'\u2019]){sentence}", text))
    if len(lone) == 1:
        return lone.pop(), final_answer(text)
    if texts:
        norm = _normalise(text)
        hits = [k for k, t in texts.items() if _normalise(t) and _normalise(t) in norm]
        if len(hits) == 1:
            return hits[0], final_answer(text)
    return None, final_answer(text)


def choice_letter(answer: str, keys: list[str], texts: dict[str, str] | None = None) -> str | None:
    """The choice key the answer picks, or None when it cannot be told."""
    return read_choice(answer, keys, texts)[0]


def named_choices(line: str, keys: list[str]) -> set[str]:
    """Choice keys a line names as choices: the line's own letter ("B) ...", "Answer: B") and any key
    set off as a choice reference ("B or C", "A, B", "(C)", "(C also works)"), not a capital starting a
    sentence ("B. A hook that ...")."""
    alt = "|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True))
    found = set(re.findall(rf"^[\s*_`'\"(\[]*({alt})(?![\w'\u2019])(?:[\s*_`'\")\].:\-]|$)", line))
    decorated = rf"[(\[*`]+({alt})[)\]*`]+"  # (C), **C**, `C`
    separated = (
        rf"(?<![\w'\u2019])({alt})(?=\s*(?:$|[,;/)\].:]|\s(?:or|and|nor|vs\.?)\b))"  # "B or", "A,", "C."
        rf"|(?:\b(?:or|and|nor|vs\.?)\s+|[,;/(]\s*)({alt})(?![\w'\u2019])"  # "or C", ", D", "(C also"
    )
    for match in re.finditer(rf"{decorated}|{separated}", line):
        found.update(g for g in match.groups() if g)
    return found


def _score_multiple_choice(test: KnowledgeTest, reply: str) -> KnowledgeScore:
    keys = [c.key for c in test.choices]
    letter, line = read_choice(reply, keys, {c.key: c.text for c in test.choices})
    if letter is None:
        return KnowledgeScore(0.0, "", "no choice letter in the answer")
    # The line the letter was read from, and the answer line, must name no other choice.
    others = (named_choices(line, keys) | named_choices(final_answer(reply), keys)) - {letter}
    if others:
        return KnowledgeScore(0.0, letter, f"names several choices ({', '.join(sorted({letter, *others}))})")
    ok = letter == test.correct_answer
    return KnowledgeScore(1.0 if ok else 0.0, letter, "correct" if ok else f"chose {letter}")


def token_kind(token: str) -> str | None:
    """The kind of a token: number, identifier (a code name with `_`, `$`, `::` or `->`), or None (a word)."""
    if not token:
        return None
    if token[0].isdigit():
        return "number"
    if "_" in token or token.startswith("$") or "::" in token or "->" in token:
        return "identifier"
    return None


def _call_arguments_end(line: str, end: int) -> int:
    """Where the argument list of a call written right after `end` ("name( ... )") closes, else `end`."""
    if end >= len(line) or line[end] != "(":
        return end
    depth = 0
    for i in range(end, len(line)):
        depth += {"(": 1, ")": -1}.get(line[i], 0)
        if depth == 0:
            return i + 1
    return len(line)


def _hit_spans(test: KnowledgeTest, line: str) -> list[tuple[int, int]]:
    expected = [test.correct_answer, *test.accepted_answers]
    spans: list[tuple[int, int]] = []
    for want in expected:
        # contains: the expected text as a whole token, not inside a longer name
        pattern = want if test.match == "regex" else rf"(?<![\w$]){re.escape(want.strip())}(?!\w)"
        spans.extend(m.span() for m in re.finditer(pattern, line, re.IGNORECASE) if m.end() > m.start())
    return spans


def rivals(test: KnowledgeTest, line: str) -> list[str]:
    """Tokens of the answer line that name another answer of the matched kind (see module doc)."""
    spans = _hit_spans(test, line)
    tokens = list(_TOKEN.finditer(line))
    hit_tokens = [t for t in tokens if any(t.start() < e and s < t.end() for s, e in spans)]
    kinds = {token_kind(t.group()) for t in hit_tokens} - {None}
    if not kinds:
        return []
    covered = list(spans)
    for t in hit_tokens:
        covered.append((t.start(), _call_arguments_end(line, t.end())))
        call = _CALL_AROUND.search(line, 0, t.start())
        if call:
            covered.append((call.start(), _call_arguments_end(line, call.start(1))))
    hit_names = {t.group().casefold() for t in hit_tokens}
    out = []
    for t in tokens:
        inside = any(s <= t.start() and t.end() <= e for s, e in covered)
        if inside or t.group().casefold() in hit_names or token_kind(t.group()) not in kinds:
            continue
        out.append(t.group())
    return out


def _matches(test: KnowledgeTest, line: str) -> bool:
    expected = [test.correct_answer, *test.accepted_answers]
    if test.match == "exact":
        given = _normalise(line)
        given = given[:-2].rstrip() if given.endswith("()") else given
        return any(given == _normalise(w) for w in expected)
    return bool(_hit_spans(test, line))


def _score_short_answer(test: KnowledgeTest, reply: str) -> KnowledgeScore:
    line = final_answer(reply)
    shown = _normalise(line)
    if not _matches(test, line):
        return KnowledgeScore(0.0, shown, f"no {test.match} match in the answer line")
    others = rivals(test, line)
    if others:
        return KnowledgeScore(0.0, shown, f"names several answers (also {', '.join(others)})")
    return KnowledgeScore(1.0, shown, f"{test.match} match")


def score_wpbench(test: KnowledgeTest, reply: str) -> KnowledgeScore:
    """Our rules: the final answer, naming one answer (module docstring)."""
    if not reply.strip():
        return KnowledgeScore(0.0, "", "empty answer")
    if test.type == "multiple_choice":
        return _score_multiple_choice(test, reply)
    return _score_short_answer(test, reply)


# Named scoring rules; a profile chooses one by name. "wpbench" is the default.
RULES: dict[str, ScoreRules] = {"wpbench": score_wpbench}
DEFAULT_RULES = "wpbench"


def score_knowledge(test: KnowledgeTest, answer: str, rules: str = DEFAULT_RULES) -> KnowledgeScore:
    try:
        scorer = RULES[rules]
    except KeyError:
        raise ValueError(f"unknown knowledge scoring rules {rules!r} (known: {', '.join(sorted(RULES))})") from None
    return scorer(test, answer)


def score_answer(test: KnowledgeTest, answer: str, rules: str = DEFAULT_RULES) -> float:
    """1.0 or 0.0 (what `Record.scores.correctness` holds for a knowledge test)."""
    return score_knowledge(test, answer, rules).score


# --- upstream profile: WP-Bench's own knowledge scoring ------------------------------------------
# Multiple choice: a leading letter (optionally "The correct answer is", "Option:", brackets) decides;
# without one, the correct choice's text anywhere in the answer scores 1. Short answer: after one
# outer code fence is stripped, trimmed, casefolded and whitespace-collapsed, equality or (for both
# answer_type exact and contains) the expected text as a substring scores 1.
_UPSTREAM_CHOICE = re.compile(
    r"^\s*(?:(?:the\s+)?(?:correct\s+)?(?:answer|option|choice)\s*(?:is|:)\s*)?[\(\[]?([A-Z])(?:[\)\].:\-,\s]|$)",
    re.IGNORECASE,
)


def _upstream_normalise(text: str) -> str:
    return re.sub(r"\s+", " ", upstream_answer(text).casefold())


def score_knowledge_upstream(test: KnowledgeTest, answer: str) -> KnowledgeScore:
    # Upstream strips the fence once when it stores the answer and again inside its scorer.
    given = upstream_answer(answer)
    if not test.correct_answer:
        return KnowledgeScore(0.0, given, "no correct_answer")
    if test.choices:
        key_text = upstream_answer(given)
        match = _UPSTREAM_CHOICE.match(key_text) if key_text else None
        if match:
            letter = match.group(1).upper()
            ok = letter == test.correct_answer.upper()
            return KnowledgeScore(1.0 if ok else 0.0, letter, "correct" if ok else f"chose {letter}")
        text = next((c.text for c in test.choices if c.key.upper() == test.correct_answer.upper()), "")
        want = _upstream_normalise(text)
        ok = bool(want) and want in _upstream_normalise(given)
        return KnowledgeScore(1.0 if ok else 0.0, given, "correct choice text quoted" if ok else "no choice letter")
    expected, actual = _upstream_normalise(test.correct_answer), _upstream_normalise(given)
    if not expected or not actual:
        return KnowledgeScore(0.0, given, "empty answer")
    if actual == expected:
        return KnowledgeScore(1.0, given, "exact match")
    if (test.answer_type or "exact") in ("exact", "contains") and expected in actual:
        return KnowledgeScore(1.0, given, "expected text contained")
    return KnowledgeScore(0.0, given, "no match")


RULES["upstream"] = RULES["upstream-v2"] = score_knowledge_upstream


def score_for_profile(test: KnowledgeTest, answer: str, profile: str) -> KnowledgeScore:
    """The knowledge rules a run's execution profile names (`RULES`: "upstream", "upstream-v2" or "wpbench")."""
    return score_knowledge(test, answer, profile)
