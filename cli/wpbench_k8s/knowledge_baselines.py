"""Answers that know nothing about WordPress, and whether a suite lets them score.

Position-only baselines answer every multiple-choice test the same way: always A (B, C, D), the
longest option, or the shortest (a suite that over-corrects "the key is the longest" leaks the other
way). Were keys placed independently of position and length, each would score 1/k on a
test with k choices. Two more answer with several options at once: every letter ("Answer: A, B, C,
D"), and a hedge naming the key and one wrong answer ("Answer: B or C"; for a short answer, the
test's sample answer and another test's). Our scoring rules make an answer naming several options
wrong, so the chance level of these two is 0.

A baseline is flagged when its total is far above chance: the one-sided exact p-value of its score,
under the null hypothesis that each test is an independent Bernoulli trial with the baseline's
chance level (a Poisson-binomial distribution), is below `ALPHA` (0.001). With the six position
baselines checked at 0.001 each, a suite whose keys were drawn at random is flagged less than 1 time
in 150; on the 59 four-option tests of wpk-core-v1 the flag needs 27 or more right (46 % against
25 %; p = 0.0011 at 26). A baseline whose chance is 0 is flagged by a single test it scores on.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from wpbench_k8s.dataset import KnowledgeTest
from wpbench_k8s.models.knowledge import DEFAULT_RULES, score_knowledge, token_kind

ALPHA = 0.001
POSITION_KEYS = ("A", "B", "C", "D")
BASELINES = (
    *(f"always-{k}" for k in POSITION_KEYS),
    "longest-option",
    "shortest-option",
    "all-letters",
    "hedge",
)


def sample_answer(test: KnowledgeTest) -> str | None:
    """A right short answer as a model would write it: `metadata.sample_answer`; without one, the
    expected text of an `exact` or `contains` test. A regex is never read as an answer: a matcher that
    rejects its own key must show up here, not be hidden by the pattern's literal text."""
    given = test.metadata.sample_answer
    if given and given.strip():
        return given.strip()
    return test.correct_answer if test.match != "regex" else None


def longest_key(test: KnowledgeTest) -> str:
    """The key of the longest option (the first of equally long ones)."""
    return max(test.choices, key=lambda c: len(c.text.strip())).key


def shortest_key(test: KnowledgeTest) -> str:
    """The key of the shortest option (the first of equally short ones)."""
    return min(test.choices, key=lambda c: len(c.text.strip())).key


def length_rank(test: KnowledgeTest) -> int:
    """Where the keyed option falls when options are sorted longest first (1 = longest; ties in order)."""
    ordered = sorted(test.choices, key=lambda c: -len(c.text.strip()))
    return [c.key for c in ordered].index(test.correct_answer) + 1


def _hedge_mc(test: KnowledgeTest, index: int) -> str:
    keys = [c.key for c in test.choices]
    other = keys[(keys.index(test.correct_answer) + 1) % len(keys)]
    first, second = (test.correct_answer, other) if index % 2 == 0 else (other, test.correct_answer)
    return f"Answer: {first} or {second}"


def _short_rival(test: KnowledgeTest, samples: dict[str, str], categories: dict[str, str]) -> str | None:
    """A wrong answer of the same kind (number, code name, word): another test's sample answer, from the
    same category when one fits."""
    mine = samples.get(test.id)
    if mine is None:
        return None
    kind = token_kind(mine)
    for other_id in sorted(samples, key=lambda i: (categories[i] != test.category, i)):
        other = samples[other_id]
        if other_id != test.id and token_kind(other) == kind and score_knowledge(test, other).score == 0.0:
            return other
    return None


def baseline_completions(tests: Sequence[KnowledgeTest]) -> dict[str, dict[str, str]]:
    """baseline name -> test id -> the reply it gives (tests a baseline does not apply to are absent)."""
    samples = {t.id: s for t in tests if t.type == "short_answer" and (s := sample_answer(t))}
    categories = {t.id: t.category for t in tests}
    out: dict[str, dict[str, str]] = {name: {} for name in BASELINES}
    for index, test in enumerate(tests):
        if test.type == "multiple_choice":
            keys = [c.key for c in test.choices]
            for key in POSITION_KEYS:
                if key in keys:
                    out[f"always-{key}"][test.id] = f"Answer: {key}"
            out["longest-option"][test.id] = f"Answer: {longest_key(test)}"
            out["shortest-option"][test.id] = f"Answer: {shortest_key(test)}"
            out["all-letters"][test.id] = "Answer: " + ", ".join(keys)
            out["hedge"][test.id] = _hedge_mc(test, index)
        else:
            rival = _short_rival(test, samples, categories)
            if rival is not None:
                out["hedge"][test.id] = f"Answer: {samples[test.id]} ({rival} also works)"
    return out


def chance(baseline: str, test: KnowledgeTest) -> float:
    """What a baseline scores on one test when keys are placed at random and hedges are refused."""
    if baseline in ("all-letters", "hedge") or test.type != "multiple_choice":
        return 0.0
    return 1.0 / len(test.choices)


def upper_tail(probabilities: Sequence[float], observed: int) -> float:
    """P(X >= observed) for X the number of successes of independent trials (Poisson-binomial)."""
    dist = [1.0]
    for p in probabilities:
        nxt = [0.0] * (len(dist) + 1)
        for k, mass in enumerate(dist):
            nxt[k] += mass * (1 - p)
            nxt[k + 1] += mass * p
        dist = nxt
    return min(1.0, sum(dist[observed:])) if observed < len(dist) else 0.0


@dataclass(frozen=True)
class BaselineResult:
    name: str
    tests: int
    correct: int
    expected: float  # the sum of chance levels: what the baseline scores by luck alone
    p_value: float
    correct_ids: tuple[str, ...]

    @property
    def score(self) -> float:
        return self.correct / self.tests if self.tests else 0.0

    @property
    def chance_rate(self) -> float:
        return self.expected / self.tests if self.tests else 0.0

    @property
    def flagged(self) -> bool:
        return self.tests > 0 and self.p_value < ALPHA

    def as_dict(self) -> dict[str, object]:
        return {
            "tests": self.tests,
            "correct": self.correct,
            "score": round(self.score, 4),
            "chance": round(self.chance_rate, 4),
            "p_value": float(f"{self.p_value:.3g}"),
            "flagged": self.flagged,
        }


def evaluate(name: str, outcomes: Sequence[tuple[KnowledgeTest, float]]) -> BaselineResult:
    """One baseline's total over (test, score) pairs, against chance."""
    correct = [t.id for t, s in outcomes if s >= 1.0]
    chances = [chance(name, t) for t, _ in outcomes]
    return BaselineResult(
        name=name,
        tests=len(outcomes),
        correct=len(correct),
        expected=sum(chances),
        p_value=upper_tail(chances, len(correct)),
        correct_ids=tuple(correct),
    )


def run_baselines(
    tests: Sequence[KnowledgeTest],
    score: Callable[[KnowledgeTest, str], float] | None = None,
) -> list[BaselineResult]:
    """Score every baseline's replies with the real scorer and compare each total with chance."""

    def default_score(test: KnowledgeTest, reply: str) -> float:
        return score_knowledge(test, reply, DEFAULT_RULES).score

    scorer = score or default_score
    by_id = {t.id: t for t in tests}
    results = []
    for name, replies in baseline_completions(tests).items():
        outcomes = [(by_id[test_id], scorer(by_id[test_id], reply)) for test_id, reply in replies.items()]
        results.append(evaluate(name, outcomes))
    return results


def key_distribution(tests: Sequence[KnowledgeTest]) -> dict[str, int]:
    """How often each letter is the key among the multiple-choice tests."""
    counts = Counter(t.correct_answer for t in tests if t.type == "multiple_choice")
    return {k: counts[k] for k in sorted(counts)}


def length_rank_distribution(tests: Sequence[KnowledgeTest]) -> dict[int, int]:
    """How often the keyed option is the longest (1), second longest (2), ... among the options."""
    counts = Counter(length_rank(t) for t in tests if t.type == "multiple_choice")
    return {r: counts[r] for r in sorted(counts)}
