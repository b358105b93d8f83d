from collections import Counter

import pytest

from wpbench_k8s.config import RunConfig
from wpbench_k8s.dataset import ExecutionTest, Suite
from wpbench_k8s.errors import InputError
from wpbench_k8s.selection import select_tests

CATEGORIES = ["a-cat", "b-cat", "c-cat", "d-cat", "e-cat", "f-cat"]


def make_suite() -> Suite:
    tests = []
    for cat in CATEGORIES:
        for i, diff in enumerate(["basic", "basic", "intermediate", "intermediate", "hard", "hard"]):
            tests.append(
                ExecutionTest(id=f"{cat}-{i}", category=cat, difficulty=diff, prompt="p", reference_solution="")
            )
    return Suite(name="s", execution=tests, knowledge=[], digest="d", source="mem")


def test_same_seed_same_subset_and_different_seed_differs():
    suite = make_suite()
    a = [t.id for t in select_tests(suite, RunConfig(limit=10, seed=7))]
    b = [t.id for t in select_tests(suite, RunConfig(limit=10, seed=7))]
    c = [t.id for t in select_tests(suite, RunConfig(limit=10, seed=8))]
    assert a == b
    assert a != c
    assert len(a) == 10


def test_stratified_over_categories_and_difficulty():
    suite = make_suite()
    chosen = select_tests(suite, RunConfig(limit=12, seed=1))
    per_cat = Counter(t.category for t in chosen)
    assert set(per_cat.values()) == {2}, per_cat
    for cat in CATEGORIES:
        diffs = {t.difficulty for t in chosen if t.category == cat}
        assert len(diffs) == 2, (cat, diffs)


def test_small_limit_does_not_favour_alphabetically_early_categories():
    suite = make_suite()
    firsts = Counter()
    for seed in range(60):
        for t in select_tests(suite, RunConfig(limit=2, seed=seed)):
            firsts[t.category] += 1
    assert len(firsts) == len(CATEGORIES)
    assert max(firsts.values()) < 3 * min(firsts.values()), firsts


def test_explicit_ids_win_over_limit_and_categories():
    suite = make_suite()
    chosen = select_tests(suite, RunConfig(limit=1, categories=["a-cat"], test_ids=["f-cat-1", "b-cat-2"]))
    assert [t.id for t in chosen] == ["b-cat-2", "f-cat-1"]


def test_unknown_ids_and_categories_are_errors():
    suite = make_suite()
    with pytest.raises(InputError, match="unknown test id.*nope"):
        select_tests(suite, RunConfig(test_ids=["nope"]))
    with pytest.raises(InputError, match="unknown category zzz"):
        select_tests(suite, RunConfig(categories=["zzz"]))


def test_category_filter_then_limit():
    suite = make_suite()
    chosen = select_tests(suite, RunConfig(categories=["c-cat", "d-cat"], limit=4, seed=3))
    assert {t.category for t in chosen} == {"c-cat", "d-cat"}
    assert len(chosen) == 4
