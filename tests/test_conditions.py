"""The condition language: three-valued logic, units, versions, regexes."""

from __future__ import annotations

from typing import Any

import pytest

from kvdoctor.diagnosis.conditions import ConditionError, build, evaluate


def ev(expr: str, **facts: Any) -> Any:
    def lookup(name: str) -> Any:
        if facts.get(name) is None:
            raise KeyError(name)
        return facts[name]

    return evaluate(build(expr), lookup)


@pytest.mark.parametrize(
    ("expr", "facts", "expected"),
    [
        ("a > 1", {}, None),  # a missing fact is unknown, not false
        ("not (a > 1)", {}, None),
        ("a > 1 and b > 1", {"b": 0}, False),  # false wins over unknown in `and`
        ("a > 1 or b > 1", {"b": 2}, True),  # true wins over unknown in `or`
        ("exists(a)", {}, False),
        ("not exists(a) or a > 3", {}, True),
        ("a * 2 + 1 >= 7", {"a": 3}, True),
        ("a / 0 > 1", {"a": 3}, None),
        ("-a < 0", {"a": 3}, True),
        ("w > 2GiB", {"w": 2.5}, True),
        ("w > 512MiB", {"w": 0.25}, False),
        ('x in ["a", "b"]', {"x": "b"}, True),
        ("x not in [1, 2]", {"x": 3}, True),
        ('s matches "NCCL|EADDRINUSE"', {"s": "NCCL error: unhandled"}, True),
        ("min(a, b) == 2", {"a": 2, "b": 5}, True),
        ("coalesce(a, 80) * 2 == 160", {}, True),
        ("coalesce(a, 80) == 3", {"a": 3}, True),
        ("round(a, 1) == 0.3", {"a": 0.31}, True),
        ('vllm_version >= "0.9.1"', {"vllm_version": "0.10.2"}, True),
        ('vllm_version < "0.9.1"', {"vllm_version": "0.6.4.post1"}, True),
        (
            'vllm_version >= "0.9.1"',
            {"vllm_version_min": "0.10.2"},
            True,
        ),  # range from wording clues
        ('vllm_version < "0.8"', {"vllm_version_min": "0.1.4", "vllm_version_max": "0.7.3"}, True),
        (
            'vllm_version >= "0.8"',
            {"vllm_version_min": "0.1.4", "vllm_version_max": "0.7.3"},
            False,
        ),
        ('vllm_version >= "0.5"', {"vllm_version_min": "0.1.4", "vllm_version_max": "0.7.3"}, None),
        ('s == "auto"', {"s": "auto"}, True),
        ("s > 1", {"s": "auto"}, None),
    ],
)
def test_evaluation(expr: str, facts: dict[str, Any], expected: Any) -> None:
    assert ev(expr, **facts) == expected


@pytest.mark.parametrize(
    ("expr", "line", "column"),
    [
        ("a > ", 1, 5),
        ("a >> 1", 1, 4),
        ("exists(1)", 1, 1),
        ("(a > 1", 1, 7),
    ],
)
def test_syntax_errors_have_positions(expr: str, line: int, column: int) -> None:
    with pytest.raises(ConditionError) as info:
        build(expr)
    assert (info.value.line, info.value.column) == (line, column) or info.value.line == line


def test_bad_regex_is_a_load_error() -> None:
    with pytest.raises(ConditionError):
        build('s matches "(unclosed"')


def test_no_python_evaluation() -> None:
    with pytest.raises(ConditionError):
        build("__import__('os').system('true')")
