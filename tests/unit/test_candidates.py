import json

import pytest

from wpbench_k8s.candidates import exploit_battery, load_completions, reference_candidate
from wpbench_k8s.dataset import ExecutionTest, ExploitSolution
from wpbench_k8s.errors import InputError


def snippet_test(**kw) -> ExecutionTest:
    base = dict(
        id="t-1",
        category="c",
        prompt="p",
        reference_solution="function f() {}",
        test_function="wpk_sum( int $a, int $b ): int",
    )
    base.update(kw)
    return ExecutionTest(**base)


def test_battery_stubs_the_test_function_with_every_trivial_return():
    battery = exploit_battery(
        snippet_test(
            exploit_solutions=[ExploitSolution(description="off by one", code="function wpk_sum($a,$b){return $a;}")]
        )
    )
    labels = [c.label for c in battery]
    assert labels[0] == "exploit:empty" and battery[0].code == ""
    assert "exploit:return-true" in labels and "exploit:return-empty-array" in labels
    assert labels[-1] == "exploit:authored-1 (off by one)"
    stub = next(c for c in battery if c.label == "exploit:return-null")
    assert stub.code == "function wpk_sum( ...$args ) { return null; }\n"


def test_battery_for_plugin_tests_is_a_valid_plugin_map():
    test = snippet_test(
        artifact_kind="wp_plugin_files",
        reference_solution=None,
        reference_files={"p.php": "<?php\n/* Plugin Name: P */"},
    )
    for cand in exploit_battery(test):
        assert cand.files is not None and "Plugin Name:" in next(iter(cand.files.values()))
    assert reference_candidate(test).files == {"p.php": "<?php\n/* Plugin Name: P */"}


def test_completions_file_errors_name_the_line(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text(
        json.dumps({"test_id": "t-1", "model": "m", "code": "x"})
        + "\n"
        + json.dumps({"test_id": "ghost", "model": "m", "code": "x"})
        + "\n"
    )
    with pytest.raises(InputError, match="line 2: unknown test id ghost"):
        load_completions(p, {"t-1": "php_snippet"})
    p.write_text('{"test_id": "t-1", "model": "m"}\n')
    with pytest.raises(InputError, match="line 1: needs one of code, files, completion"):
        load_completions(p, {"t-1": "php_snippet"})
    p.write_text('{"test_id": "t-1", "code": 5}\n')
    with pytest.raises(InputError, match="line 1, field code"):
        load_completions(p, {"t-1": "php_snippet"})


def test_a_completion_of_the_wrong_kind_is_an_input_error(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text(json.dumps({"test_id": "t-1", "model": "m", "code": "<?php"}) + "\n")
    with pytest.raises(InputError, match=r"c.jsonl: line 1, field code: test t-1 is a wp_plugin_files test"):
        load_completions(p, {"t-1": "wp_plugin_files"})
    p.write_text(json.dumps({"test_id": "t-1", "model": "m", "files": {"a.php": "<?php"}}) + "\n")
    with pytest.raises(InputError, match=r"line 1, field files: test t-1 is a php_snippet test"):
        load_completions(p, {"t-1": "php_snippet"})


def test_line_separators_inside_a_completion_do_not_split_its_line(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text(json.dumps({"test_id": "t-1", "model": "m", "code": "echo '\u2028';"}, ensure_ascii=False) + "\n")
    (line,) = load_completions(p, {"t-1": "php_snippet"})
    assert line.code == "echo '\u2028';"


def test_upstream_exploit_strings_load_and_run_as_snippets_even_for_plugin_tests():
    """Upstream's later suites give exploit_solutions as bare PHP strings; each is graded as a snippet,
    also on a wp_plugin_files test (a string is no plugin: it must not get the candidate directory)."""
    from wpbench_k8s.manifest import ManifestItem
    from wpbench_runtime.contract import GradeTask

    test = snippet_test(
        artifact_kind="wp_plugin_files",
        reference_solution=None,
        reference_files={"p.php": "<?php\n/* Plugin Name: P */"},
        exploit_solutions=[
            "add_action( 'init', '__return_true' );",
            {"files": {"x.php": "<?php /* Plugin Name: X */"}},
        ],
    )
    assert [e.code for e in test.exploit_solutions] == ["add_action( 'init', '__return_true' );", None]
    *_, snippet, plugin = exploit_battery(test)
    assert (snippet.label, snippet.code, snippet.artifact_kind) == (
        "exploit:authored-1",
        "add_action( 'init', '__return_true' );",
        "php_snippet",
    )
    assert plugin.artifact_kind == "wp_plugin_files" and plugin.files
    item = ManifestItem(
        test_id=test.id,
        test_type="execution",
        task=GradeTask(test_id=test.id, artifact_kind="wp_plugin_files"),
        item_id="i",
        model="m",
    )
    assert item.with_candidate(snippet).task.artifact_kind == "php_snippet"
    assert item.with_candidate(plugin).task.artifact_kind == "wp_plugin_files"
    # A model's completion keeps the test's kind: code for a plugin test is an invalid files map, as before.
    assert (
        item.with_candidate(
            reference_candidate(test).model_copy(update={"files": None, "code": "x"})
        ).task.artifact_kind
        == "wp_plugin_files"
    )
    with pytest.raises(ValueError):
        ExecutionTest(**{**test.model_dump(), "exploit_solutions": [7]})


# Hostile completions files: each ends as an input error naming the file and line, before anything runs.
@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"test_id": "t-1", "model": "m", "code": "x"}\n{"test_id": "t-1", "code": "\xff\xfe"}\n',
         r"c.jsonl: line 2: column 29: not UTF-8 text \(byte 0xff\)"),
        (b'{"test_id": "t-1", "code": ' + b"[" * 100_000 + b"\n", r"c.jsonl: line 1: JSON nested too deeply"),
        (b'{"test_id": "t-1", "code": "x"\n', r"c.jsonl: line 1: malformed JSON at line 1 column 31"),
        (b'{"test_id": "t-1\\ud83d", "code": "x"}\n', r"line 1, field test_id: holds a lone UTF-16 surrogate"),
        (b'{"test_id": "t-1", "model": "m\\udc00", "code": "x"}\n', r"line 1, field model: holds a lone UTF-16"),
        (b"\x00\x01\x02binary\n", r"c.jsonl: line 1: malformed JSON"),
    ],
)  # fmt: skip
def test_hostile_completions_files_are_input_errors_naming_the_line(tmp_path, content, message):
    p = tmp_path / "c.jsonl"
    p.write_bytes(content)
    with pytest.raises(InputError, match=message):
        load_completions(p, {"t-1": "php_snippet"})


def test_a_lone_surrogate_in_an_answer_is_that_candidates_failure_not_an_input_error(tmp_path):
    from wpbench_k8s.manifest import Candidate, ManifestItem
    from wpbench_runtime.contract import GradeTask

    p = tmp_path / "c.jsonl"
    p.write_text('{"test_id": "t-1", "model": "m", "code": "echo 1; // \\ud83d"}\n')
    (line,) = load_completions(p, {"t-1": "php_snippet"})
    assert line.code == "echo 1; // \ud83d"  # loaded as written: the answer's content is the candidate's
    item = ManifestItem(item_id="i", test_id="t-1", model="m", task=GradeTask(test_id="t-1"))
    held = item.with_candidate(Candidate(code=line.code))
    assert held.candidate is not None and held.task is not None
    assert held.candidate.code == held.task.code == "echo 1; // \ufffd"
    assert "code holds a lone UTF-16 surrogate" in (held.candidate.extraction_error or "")
    assert not held.needs_grader  # scored as failed without a grader
    held.model_dump_json()  # writable as UTF-8 JSON
    plugin = item.with_candidate(Candidate(files={"a\udc00.php": "<?php"}))
    assert plugin.candidate is not None and plugin.candidate.files == {"a\ufffd.php": "<?php"}
    assert "files.a" in (plugin.candidate.extraction_error or "")


def test_a_completions_line_without_model_warns(tmp_path, capsys):
    p = tmp_path / "c.jsonl"
    p.write_text('{"test_id": "t-1", "code": "x"}\n{"test_id": "t-2", "model": "m", "code": "x"}\n')
    load_completions(p, {"t-1": "php_snippet", "t-2": "php_snippet"})
    assert "warning: " in capsys.readouterr().err
    p.write_text('{"test_id": "t-1", "model": "m", "code": "x"}\n')
    load_completions(p, {"t-1": "php_snippet"})
    assert capsys.readouterr().err == ""


def test_a_record_with_a_lone_surrogate_is_still_written_as_utf8_json():
    from pydantic import BaseModel

    from wpbench_k8s.records import json_line

    class Doc(BaseModel):
        text: str

    line = json_line(Doc(text="a\ud83db"))
    assert json.loads(line.encode("utf-8").decode("utf-8")) == {"text": "a\ufffdb"}
