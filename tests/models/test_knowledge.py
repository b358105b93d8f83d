"""Knowledge answers scored 0/1: multiple-choice letters and short answers (exact/regex/contains)."""

from __future__ import annotations

import pytest

from wpbench_k8s.dataset import KnowledgeTest
from wpbench_k8s.models.knowledge import choice_letter, score_answer, score_knowledge

MC = KnowledgeTest(
    id="k1", category="hooks", type="multiple_choice", prompt="Which hook fires once all plugins are loaded?",
    choices=[{"key": "A", "text": "init"}, {"key": "B", "text": "plugins_loaded"}, {"key": "C", "text": "wp_head"},
             {"key": "D", "text": "admin_init"}],
    correct_answer="B",
)  # fmt: skip


@pytest.mark.parametrize(
    "answer",
    [
        "B",
        "**B**",
        "(B)",
        "B)",
        "B.",
        "B) plugins_loaded",
        "B. plugins_loaded fires after all active plugins are included.",
        "The answer is B.",
        "The correct answer is **B** because plugins_loaded runs after plugins load.",
        "Answer: B",
        "Let me think. init runs later. So the hook is plugins_loaded.\n\nAnswer: B",
        "I'd go with (B).",
        "plugins_loaded",  # the choice text itself
        "`plugins_loaded`",
    ],
)
def test_multiple_choice_correct(answer: str) -> None:
    result = score_knowledge(MC, answer)
    assert (result.score, result.answer) == (1.0, "B"), result.reason


@pytest.mark.parametrize(
    ("answer", "letter"),
    [
        ("A", "A"),
        ("Answer: C", "C"),
        ("A hook like init is wrong; the answer is D", "D"),
        ("wp_head", "C"),
    ],
)
def test_multiple_choice_wrong(answer: str, letter: str) -> None:
    result = score_knowledge(MC, answer)
    assert (result.score, result.answer) == (0.0, letter)


@pytest.mark.parametrize("answer", ["", "I am not sure.", "Either A or B could be right."])
def test_multiple_choice_unreadable_scores_zero(answer: str) -> None:
    assert score_answer(MC, answer) == 0.0


def test_choice_letter_without_texts() -> None:
    assert choice_letter("A good question. My pick: C", ["A", "B", "C"]) == "C"
    assert choice_letter("nothing", ["A", "B"]) is None


def short(match: str, correct: str, accepted: list[str] | None = None) -> KnowledgeTest:
    return KnowledgeTest(
        id="k2", category="security", type="short_answer", prompt="Which function escapes an HTML attribute?",
        correct_answer=correct, accepted_answers=accepted or [], match=match,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("test", "answer", "score"),
    [
        (short("exact", "esc_attr"), "esc_attr", 1.0),
        (short("exact", "esc_attr"), "`esc_attr`", 1.0),
        (short("exact", "esc_attr"), "  ESC_ATTR. ", 1.0),
        (short("exact", "esc_attr"), "**esc_attr**", 1.0),
        (short("exact", "esc_attr"), "esc_attr()", 0.0),
        (short("exact", "esc_attr", ["esc_attr()"]), "esc_attr()", 1.0),
        (short("exact", "esc_attr"), "Use esc_attr", 0.0),
        (short("exact", "esc_attr"), "Reasoning first.\nAnswer: esc_attr", 1.0),
        (short("contains", "esc_attr"), "You should use esc_attr() for attributes.", 1.0),
        (short("contains", "esc_attr"), "Use esc_html.", 0.0),
        (short("regex", r"^esc_attr(\(\))?$"), "esc_attr()", 1.0),
        (short("regex", r"\besc_attr\b"), "Call ESC_ATTR on it", 1.0),
        (short("regex", r"^esc_attr$", [r"^wp_kses"]), "wp_kses_post", 1.0),
        (short("regex", r"^esc_attr$"), "esc_html", 0.0),
        (short("contains", "esc_attr"), "", 0.0),
    ],
)
def test_short_answers(test: KnowledgeTest, answer: str, score: float) -> None:
    assert score_answer(test, answer) == score
