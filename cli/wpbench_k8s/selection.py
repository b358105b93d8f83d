"""Choose which tests a run grades: explicit ids, categories, type, then a seeded limit.

Two limit strategies, by profile: `wpbench` stratifies over category x difficulty across both test
types; `upstream` reproduces WP-Bench's own selection exactly (per test type: group by category,
shuffle each group in sorted-category order with one `random.Random(seed)`, drain round-robin from
the end of each group, then sort by id), so the same --limit/--seed grades the same tests.
"""

from __future__ import annotations

import random
from collections import defaultdict

from wpbench_k8s.config import RunConfig
from wpbench_k8s.dataset import AnyTest, Suite
from wpbench_k8s.errors import InputError
from wpbench_k8s.profiles import ProfileName, is_upstream


def _stratified(tests: list[AnyTest], limit: int, seed: int) -> list[AnyTest]:
    """Pick `limit` tests spread evenly over categories, and within each over difficulty.

    Categories are visited in a seeded random order (not alphabetical), so with a limit smaller
    than the number of categories no category is favoured by its name.
    """
    rng = random.Random(seed)
    by_category: dict[str, dict[str, list[AnyTest]]] = defaultdict(lambda: defaultdict(list))
    for test in tests:
        by_category[test.category][test.difficulty].append(test)
    queues: dict[str, list[AnyTest]] = {}
    for category in sorted(by_category):
        strata = by_category[category]
        for difficulty in sorted(strata):
            rng.shuffle(strata[difficulty])
        order = sorted(strata)
        rng.shuffle(order)
        queue: list[AnyTest] = []
        while any(strata[d] for d in order):
            for difficulty in order:
                if strata[difficulty]:
                    queue.append(strata[difficulty].pop())
        queues[category] = queue
    categories = sorted(queues)
    rng.shuffle(categories)
    chosen: list[AnyTest] = []
    while len(chosen) < limit and any(queues[c] for c in categories):
        for category in categories:
            if queues[category] and len(chosen) < limit:
                chosen.append(queues[category].pop(0))
    return chosen


def _upstream_round_robin(tests: list[AnyTest], limit: int, seed: int) -> list[AnyTest]:
    """WP-Bench's selection for one test type (the same calls on the same generator, so the same picks)."""
    groups: dict[str, list[AnyTest]] = defaultdict(list)
    for test in tests:
        groups[test.category].append(test)
    rng = random.Random(seed)
    keys = sorted(groups)
    for key in keys:
        rng.shuffle(groups[key])
    chosen: list[AnyTest] = []
    while len(chosen) < limit and any(groups[k] for k in keys):
        for key in keys:
            if len(chosen) >= limit:
                break
            if groups[key]:
                chosen.append(groups[key].pop())
    return chosen


def _limited(pool: list[AnyTest], run: RunConfig, profile: ProfileName) -> list[AnyTest]:
    if run.limit is None:
        return pool
    if is_upstream(profile):
        picked: set[str] = set()
        for kind in ("execution", "knowledge"):
            of_kind = [t for t in pool if t.test_type == kind]
            if run.limit < len(of_kind):
                picked.update(t.id for t in _upstream_round_robin(of_kind, run.limit, run.seed))
            else:
                picked.update(t.id for t in of_kind)
        return [t for t in pool if t.id in picked]
    if run.limit < len(pool):
        chosen = {t.id for t in _stratified(pool, run.limit, run.seed)}
        return [t for t in pool if t.id in chosen]
    return pool


def _check_categories(pool: list[AnyTest], categories: list[str], profile: ProfileName) -> None:
    """Unknown categories are InputErrors. Upstream WP-Bench filters each test type by the same list and
    refuses a category one type lacks, so under its profile a category must exist in every type present."""
    groups: dict[str, list[AnyTest]] = {"": pool}
    if is_upstream(profile):
        groups = {kind: [t for t in pool if t.test_type == kind] for kind in ("execution", "knowledge")}
    for kind, tests in groups.items():
        if not tests and kind:
            continue
        known = {t.category for t in tests}
        unknown = [c for c in categories if c not in known]
        if unknown:
            where = f" among the {kind} tests (upstream WP-Bench filters each test type alike)" if kind else ""
            raise InputError(
                f"--category: unknown categor{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)}{where}; "
                f"known: {', '.join(sorted(known))}"
            )


def select_tests(
    suite: Suite, run: RunConfig, *, execution_only: bool = False, profile: ProfileName = "wpbench"
) -> list[AnyTest]:
    """Apply the run's selection; the result keeps the suite's order.

    With the upstream profile, --limit applies to each test type separately (as upstream runs its
    knowledge and execution tracks), so `--limit 10` grades up to 10 of each.

    Explicit test ids win over categories and limit. Unknown ids or categories are InputErrors.
    """
    pool: list[AnyTest] = suite.all_tests()
    test_type = "execution" if execution_only else run.test_type
    if test_type != "all":
        pool = [t for t in pool if t.test_type == test_type]
    if run.test_ids:
        by_id = suite.by_id()
        unknown = [i for i in run.test_ids if i not in by_id]
        if unknown:
            raise InputError(f"--test-id: unknown test id(s) in suite {suite.name}: {', '.join(unknown)}")
        wanted = set(run.test_ids)
        chosen = [t for t in pool if t.id in wanted]
        skipped = wanted - {t.id for t in chosen}
        if skipped:
            raise InputError(f"--test-id: {', '.join(sorted(skipped))} not of the selected test type ({test_type})")
        return chosen
    if run.categories:
        _check_categories(pool, run.categories, profile)
        pool = [t for t in pool if t.category in set(run.categories)]
    return _limited(pool, run, profile)
