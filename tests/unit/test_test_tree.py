"""The test tree itself: every module under tests/ has a basename of its own.

Test folders are not packages, so pytest imports each test module by its basename (and helpers such as
fake_provider are imported by name after a sys.path insert): two files with one name abort the whole
collection ("import file mismatch"), which a run of one folder never shows.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def same_named(root: Path) -> dict[str, list[str]]:
    seen: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        if path.name not in ("conftest.py", "__init__.py"):
            seen[path.name].append(str(path.relative_to(root)))
    return {name: paths for name, paths in seen.items() if len(paths) > 1}


def test_no_two_modules_under_tests_share_a_basename():
    assert same_named(TESTS) == {}


def test_the_check_sees_a_name_used_in_two_folders(tmp_path):
    for folder in ("unit", "runtime"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "test_gate.py").write_text("")
    (tmp_path / "unit" / "conftest.py").write_text("")
    (tmp_path / "runtime" / "conftest.py").write_text("")
    assert same_named(tmp_path) == {"test_gate.py": ["runtime/test_gate.py", "unit/test_gate.py"]}
