"""Untrusted text in, valid UTF-8 JSON out: the one place input bytes become text and JSON values.

Input files (suites, completions, configs) may hold bytes that are not UTF-8, JSON nested deeper than
Python's parser recurses, or a lone UTF-16 surrogate (`"\\ud83d"`): JSON allows the escape, Python keeps
it in the string, and no UTF-8 encoder can write it back. Each is an `InputError` naming the file and
line here, or (for an answer's content) something the caller turns into that candidate's scored failure;
`scrub` makes any text encodable, so every record written stays valid UTF-8 JSON.
"""

from __future__ import annotations

import json
import re
from typing import Any

from wpbench_k8s.errors import InputError

# A str from strict UTF-8 never holds a surrogate, and json.loads joins an escaped pair into one
# character: any surrogate code point left in a str is a lone one.
_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def decode_utf8(data: bytes, where: str) -> str:
    """`data` as text; invalid UTF-8 is an InputError naming the line and column of the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        at = f"line {line} column {column}" if b"\n" in data else f"column {column}"
        raise InputError(f"{where}: {at}: not UTF-8 text (byte 0x{data[exc.start]:02x})") from exc


def loads(text: str, where: str) -> Any:
    """json.loads with the failures of hostile input as InputErrors naming `where` (a file and line)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from exc
    except RecursionError as exc:
        raise InputError(f"{where}: JSON nested too deeply to read") from exc


def lone_surrogate(value: Any, path: str = "") -> str | None:
    """The dotted path of the first string (or key) in `value` holding a lone UTF-16 surrogate, else None
    ("" for `value` itself)."""
    if isinstance(value, str):
        return path if _SURROGATE.search(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and _SURROGATE.search(key):
                return here
            found = lone_surrogate(item, here)
            if found is not None:
                return found
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = lone_surrogate(item, f"{path}.{i}" if path else str(i))
            if found is not None:
                return found
    return None


def refuse_lone_surrogates(value: Any, where: str) -> None:
    """An InputError naming the field of `value` that holds a lone surrogate, if any."""
    found = lone_surrogate(value)
    if found is not None:
        field = f", field {found}" if found else ""
        raise InputError(f"{where}{field}: holds a lone UTF-16 surrogate (not a Unicode character)")


def scrub(value: Any) -> Any:
    """`value` with every lone surrogate replaced by U+FFFD (strings, dict keys and values, lists)."""
    if isinstance(value, str):
        return _SURROGATE.sub(REPLACEMENT, value)
    if isinstance(value, dict):
        return {scrub(k): scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(v) for v in value]
    return value
