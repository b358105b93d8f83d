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
        (short("exact", "esc_attr"), "esc_attr()", 1.0),  # a call's empty parentheses are ignored
        (short("exact", "esc_attr"), "esc_attr( $x )", 0.0),
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


# Only the final answer counts, and it must name one answer (issue 15).


@pytest.mark.parametrize(
    ("test", "reply", "score"),
    [
        # regex and contains read the answer line, not the reasoning before it
        (short("regex", r"\besc_attr\b"), "esc_attr would be wrong here.\nAnswer: esc_html", 0.0),
        (short("contains", "esc_attr"), "Not esc_html: that is for text.\n\nAnswer: esc_attr", 1.0),
        (short("contains", "esc_attr"), "Answer: esc_html\n(esc_attr is for attributes)", 0.0),
        (short("regex", r"\besc_attr\b"), "esc_html\n\nesc_attr is the other option", 0.0),  # first line, no label
        # contains matches a whole name, not a part of a longer one
        (short("contains", "register_setting"), "unregister_setting", 0.0),
        (short("contains", "register_setting"), "register_settings", 0.0),
        (short("contains", "register_setting"), "register_setting()", 1.0),
    ],
)
def test_short_answer_reads_only_the_answer_line(test: KnowledgeTest, reply: str, score: float) -> None:
    assert score_answer(test, reply) == score


@pytest.mark.parametrize(
    ("test", "reply"),
    [
        (short("regex", r"\bwp_unschedule_hook\b"), "Answer: wp_clear_scheduled_hook (wp_unschedule_hook is similar)"),
        (short("regex", r"\bwp_unschedule_hook\b"), "Answer: wp_unschedule_hook (wp_clear_scheduled_hook is similar)"),
        (short("regex", r"\besc_url\b"), "esc_attr (esc_url is for storage)"),
        (short("regex", r"\besc_url\b"), "esc_url or esc_url_raw"),
        (short("contains", "esc_attr"), "esc_attr / esc_html"),
        (short("regex", r"\b20\b"), "32 (taxonomy keys; post types 20)"),
        (short("regex", r"\b20\b"), "20 or 32"),
        (short("regex", r"\$wpdb->insert_id\b"), "$wpdb->insert_id or $wpdb->last_id"),
    ],
)
def test_an_answer_naming_several_alternatives_is_wrong(test: KnowledgeTest, reply: str) -> None:
    result = score_knowledge(test, reply)
    assert result.score == 0.0 and "several answers" in result.reason, result


@pytest.mark.parametrize(
    ("test", "reply"),
    [
        (short("regex", r"\bdid_action\b"), "did_action( 'init' )"),  # the call's own arguments are no rival
        (short("regex", r"\bDISABLE_WP_CRON\b"), "define( 'DISABLE_WP_CRON', true );"),
        (short("regex", r"\b405\b"), "405 (Method Not Allowed)"),
        (short("regex", r"\b405\b"), "HTTP/1.1 405"),
        (short("regex", r"\b172\b"), "172 characters"),
        (
            short("contains", "wp_set_object_terms", ["wp_set_post_terms"]),
            "wp_set_object_terms (wp_set_post_terms too)",
        ),
        (short("regex", r"\bwp_enqueue_scripts\b"), "The wp_enqueue_scripts action hook."),
    ],
)
def test_one_answer_with_context_is_right(test: KnowledgeTest, reply: str) -> None:
    assert score_knowledge(test, reply).score == 1.0


@pytest.mark.parametrize(
    "reply",
    [
        "Answer: B or C",
        "Answer: A, B, C, D",
        "B or C",
        "B/C",
        "Answer: B (C also works)",
        "**B** or **C**",
        "Answer: (B) and (C)",
        "init runs too late.\nSo the answer is B or C.",  # no label: the line the letter is read from
        "Thinking it over.\nB or C\n",
    ],
)
def test_multiple_choice_hedge_scores_zero(reply: str) -> None:
    result = score_knowledge(MC, reply)
    assert result.score == 0.0, result


@pytest.mark.parametrize("reply", ["B or C", "C or B", "I'd say B or C.", "Thinking it over.\nB or C", "A, B, C or D"])
def test_a_hedge_including_the_key_scores_zero_in_either_order(reply: str) -> None:
    for key in ("B", "C"):
        test = MC.model_copy(update={"correct_answer": key})
        assert score_knowledge(test, reply).score == 0.0, (key, reply)


@pytest.mark.parametrize(
    "reply",
    [
        "Answer: B",
        "B. A hook that fires after plugins load.",  # "A" starting a sentence is not a choice
        "I considered A, but plugins_loaded is right.\nAnswer: B",  # only the answer line is read
        "Answer: B) plugins_loaded",
    ],
)
def test_multiple_choice_single_answer_with_prose(reply: str) -> None:
    assert score_knowledge(MC, reply).score == 1.0


def test_unknown_rules_name_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown knowledge scoring rules 'nope'"):
        score_knowledge(MC, "B", rules="nope")


def _suite_tests() -> dict[str, KnowledgeTest]:
    from pathlib import Path

    from wpbench_k8s.dataset import load_suite

    suite = Path(__file__).resolve().parents[2] / "datasets" / "suites" / "wpk-core-v1"
    return {t.id: t for t in load_suite(suite).knowledge}


@pytest.mark.parametrize(
    ("test_id", "reply", "score"),
    [
        # right answers phrased naturally (were scored 0 before issue 15)
        ("wpk-ka-hooks-003", "did_action()", 1.0),
        ("wpk-ka-transients-cache-003", "wp_cache_add()", 1.0),
        ("wpk-ka-queries-001", "'no_found_rows' => true", 1.0),
        ("wpk-ka-rest-api-001", "rest_api_init action", 1.0),
        ("wpk-ka-cron-002", "define( 'DISABLE_WP_CRON', true );", 1.0),
        ("wpk-ka-options-001", "bool(false)", 1.0),
        ("wpk-ka-options-001", "`false`", 1.0),
        ("wpk-ka-hooks-004", "'all' hook", 1.0),
        ("wpk-ka-hooks-004", "all", 1.0),
        ("wpk-kb-abilities-api-006", "405 (Method Not Allowed)", 1.0),
        # wrong answers the old matchers let through
        ("wpk-ka-options-004", "unregister_setting", 0.0),
        ("wpk-ka-options-004", "register_settings", 0.0),
        ("wpk-ka-options-001", "false (or null)", 0.0),
        ("wpk-ka-hooks-004", "all actions", 0.0),
        ("wpk-ka-cron-004", "Answer: wp_clear_scheduled_hook (wp_unschedule_hook is similar)", 0.0),
        ("wpk-kb-security-002", "esc_attr (esc_url is for storage)", 0.0),
        ("wpk-ka-post-types-taxonomies-002", "32 (taxonomy keys; post types 20)", 0.0),
    ],
)
def test_suite_matchers_after_issue_15(test_id: str, reply: str, score: float) -> None:
    assert score_answer(_suite_tests()[test_id], reply) == score


@pytest.mark.parametrize(
    ("test_id", "reply", "score"),
    [
        # right answers the matchers refused (issue 28)
        ("wpk-kb-scripts-styles-004", "script_module_data_{$module_id}", 1.0),
        ("wpk-kb-scripts-styles-004", "script_module_data_{module_id}", 1.0),
        ("wpk-kb-scripts-styles-004", "script_module_data_{$id}", 1.0),
        ("wpk-ka-shortcodes-002", "The shortcode_atts_gallery filter", 1.0),
        ("wpk-ka-options-001", "(bool) false", 1.0),
        ("wpk-ka-hooks-004", "add_action( 'all', 'my_cb' )", 1.0),
        ("wpk-ka-queries-004", "'search_columns' => array( 'post_title' )", 1.0),
        ("wpk-kb-mail-004", "do_action( 'wp_mail_failed', $error )", 1.0),
        # wrong answers one of them took
        ("wpk-kb-scripts-styles-004", "print_script_module_data_", 0.0),
        ("wpk-kb-scripts-styles-004", "print_script_module_data_{$module_id}", 0.0),
        ("wpk-ka-queries-004", "'search_fields' => array( 'post_title' )", 0.0),
        ("wpk-ka-hooks-004", "add_action( 'init', 'all' )", 0.0),
    ],
)
def test_suite_matchers_after_issue_28(test_id: str, reply: str, score: float) -> None:
    assert score_answer(_suite_tests()[test_id], reply) == score
