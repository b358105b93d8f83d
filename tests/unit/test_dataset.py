import json
import shutil
from pathlib import Path

import pytest

from wpbench_k8s.dataset import export_rows, load_suite
from wpbench_k8s.errors import InputError


def copy_suite(mini_suite: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "mini"
    shutil.copytree(mini_suite, dst)
    return dst


def test_loads_array_and_object_files(mini_suite):
    suite = load_suite(mini_suite)
    assert [t.id for t in suite.execution] == ["mini-hooks-001", "mini-shortcodes-001"]
    assert len(suite.knowledge) == 2
    assert suite.digest.startswith("sha256:")


def test_malformed_json_names_file(mini_suite, tmp_path):
    root = copy_suite(mini_suite, tmp_path)
    (root / "execution" / "broken.json").write_text('[{"id": "x",]')
    with pytest.raises(InputError, match=r"broken.json: malformed JSON at line 1"):
        load_suite(root)


def test_bad_field_names_file_test_and_field(mini_suite, tmp_path):
    root = copy_suite(mini_suite, tmp_path)
    data = json.loads((root / "execution" / "hooks.json").read_text())
    data[0]["runtime_checks"]["assertions"][0]["weight"] = "heavy"
    (root / "execution" / "hooks.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"hooks.json, test mini-hooks-001, field runtime_checks.assertions.0.weight"):
        load_suite(root)


def test_duplicate_ids_are_rejected(mini_suite, tmp_path):
    root = copy_suite(mini_suite, tmp_path)
    shutil.copy(root / "execution" / "hooks.json", root / "execution" / "hooks-copy.json")
    with pytest.raises(InputError, match="duplicate test id mini-hooks-001"):
        load_suite(root)


def test_unknown_assertion_type_is_an_authoring_error(mini_suite, tmp_path):
    root = copy_suite(mini_suite, tmp_path)
    data = json.loads((root / "execution" / "hooks.json").read_text())
    data[0]["runtime_checks"]["assertions"][0]["type"] = "vibes_ok"
    (root / "execution" / "hooks.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match="unknown assertion type 'vibes_ok'"):
        load_suite(root)


def test_missing_folder(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        load_suite(tmp_path / "nowhere")


def test_jsonl_export_round_trips(mini_suite, tmp_path):
    suite = load_suite(mini_suite)
    rows = export_rows(suite)
    assert {type(v) for r in rows for v in r.values()} <= {str, int, float, bool, list}
    path = tmp_path / "mini.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    again = load_suite(path)
    assert again.name == "mini"
    assert [t.model_dump() for t in again.all_tests()] == [t.model_dump() for t in suite.all_tests()]


def test_lint_reads_patterns_the_way_the_verifier_does():
    from wpbench_k8s.lint import pcre_to_python

    assert pcre_to_python("/add_action/i") == ("add_action", 2)  # re.I
    assert pcre_to_python(r"(?<![A-Za-z_])__\s*\(") == (r"(?<![A-Za-z_])__\s*\(", 0)  # not delimited
    assert pcre_to_python("[ab]x[") == ("[ab]x[", 0)
    assert pcre_to_python("/a/b/") == ("/a/b/", 0)  # unescaped delimiter inside: wrapped, not split
    assert pcre_to_python(r"#a\#b#s") == (r"a\#b", 16)  # re.S
