"""The verifier's PHP calls every global function and constant fully qualified.

In namespaced code an unqualified `fwrite(...)` first looks for `<namespace>\\fwrite`, which candidate
code could declare. runtime/php/tools/qualify.php tokenizes the verifier with the grader image's own
PHP and lists every unqualified global name (`--fix` qualifies them)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker

PHP_DIR = Path(__file__).resolve().parents[2] / "runtime" / "php"


def qualify(image: str, *paths: str) -> subprocess.CompletedProcess[str]:
    argv = ["docker", "run", "--rm", "--network", "none", "-v", f"{PHP_DIR}:/src:ro", "--entrypoint", "php", image]
    argv += ["-n", "-d", "extension=tokenizer", "/src/tools/qualify.php", *paths]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def test_no_unqualified_global_name_in_the_verifier(grader_image: str) -> None:
    proc = qualify(grader_image, "/src/verifier")
    assert proc.returncode == 0, "unqualified global names in verifier PHP:\n" + proc.stdout + proc.stderr


def test_the_check_finds_what_it_must(grader_image: str, tmp_path: Path) -> None:
    """The checker is not vacuous: it flags unqualified calls and constants, and nothing else."""
    sample = PHP_DIR / "tools" / "qualify-sample.php"
    proc = qualify(grader_image, "/src/tools/qualify-sample.php")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    found = sorted(line.split()[-1] for line in proc.stdout.splitlines())
    assert found == ["E_ALL", "STDERR", "fwrite()", "strlen()"], (sample, proc.stdout)
