"""Rule files: every built-in example runs; broken files are reported with file:line:col."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvdoctor.api import diagnose, log_probe_facts
from kvdoctor.cli import main
from kvdoctor.diagnosis import conditions
from kvdoctor.diagnosis.rules import RuleLoadError, builtin_rules_dir, load_rules
from kvdoctor.diagnosis.ruletest import run_examples

FIXTURES = Path(__file__).parent / "fixtures"
RULES = load_rules([builtin_rules_dir()])


def _examples() -> list[tuple[str, int]]:
    return [(rule.id, i) for rule in RULES for i in range(len(rule.examples))]


@pytest.mark.parametrize(("rule_id", "index"), _examples())
def test_builtin_rule_example(rule_id: str, index: int) -> None:
    rule = next(r for r in RULES if r.id == rule_id)
    result = run_examples(rule, RULES, log_probe_facts)[index]
    assert result.ok, result.describe()


def test_every_rule_has_firing_and_silent_examples_and_both_languages() -> None:
    for rule in RULES:
        kinds = {e.expect for e in rule.examples}
        assert kinds == {"fires", "silent"}, rule.id
        assert {"en", "zh"} <= set(rule.title) and {"en", "zh"} <= set(rule.explain), rule.id


def test_builtin_rules_cover_every_class_and_cause() -> None:
    classes = {r.klass for r in RULES}
    causes = {r.cause for r in RULES if r.klass == "no_cache_blocks"}
    assert classes == {
        "no_cache_blocks",
        "max_model_len_too_large",
        "insufficient_free_memory_at_startup",
        "cuda_oom",
        "healthy",
        "other",
        "unknown",  # start-up-incomplete: the log stops before serving or failing
    }
    # None: the differential (no-cache-blocks-unmeasured) when the log does not show the cause
    assert causes == {"utilization_too_low", "other_process", "model_too_large", "profile_overhead", None}


def test_broken_rule_files_are_all_reported_with_positions() -> None:
    with pytest.raises(RuleLoadError) as info:
        load_rules([FIXTURES / "rules-broken"])
    text = str(info.value)
    files = {Path(e.path).name for e in info.value.errors}
    assert files == {"syntax-error.yaml", "unknown-name.yaml", "bad-fields.yaml", "not-yaml.yaml"}
    assert "syntax-error.yaml:5:" in text and "^" in text
    assert "unknown name 'weights_gb'" in text
    assert "define.unused_one: defined but never used" in text
    assert "unknown fact 'not_a_fact'" in text
    assert "class 'memory_problem' is not one of" in text
    assert "id 'wrong-id' must equal the file name 'bad-fields'" in text
    assert "unknown field 'colour'" in text
    assert "bad version bound '>=zero'" in text
    assert "invalid YAML" in text


def test_syntax_error_column_points_at_the_token() -> None:
    with pytest.raises(RuleLoadError) as info:
        load_rules([FIXTURES / "rules-broken"])
    err = next(e for e in info.value.errors if e.path.endswith("syntax-error.yaml"))
    assert err.line == 5
    assert err.source_line[err.column - 1 :].startswith("and")


def test_cli_lint_broken_dir_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "lint", str(FIXTURES / "rules-broken")]) == 2
    err = capsys.readouterr().err
    assert "rules-broken/unknown-name.yaml:" in err


def test_cli_diagnose_with_broken_extra_rules_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "diagnose",
            "--rules",
            str(FIXTURES / "rules-broken"),
            str(FIXTURES / "corpus" / "027-v1-laptop-4gb-free-memory-322of40.log"),
        ]
    )
    assert code == 2
    assert "problem(s) in rule files" in capsys.readouterr().err


def test_catastrophic_regex_is_cut_by_its_timeout() -> None:
    rules = load_rules([builtin_rules_dir(), FIXTURES / "rules-extra"])
    log = "ValueError: " + "a" * 60 + "b"  # exponential backtracking for ^(a|aa)+$
    timeouts: list[float] = []
    real = conditions.REGEX_TIMEOUT_S

    class Recording:
        # the compiled pattern, wrapped: the evaluator must pass its timeout, and the search times out
        def __init__(self, pattern: Any) -> None:
            self.pattern = pattern

        def search(self, text: str, timeout: float) -> Any:
            timeouts.append(timeout)
            return self.pattern.search(text, timeout=timeout)

    slow = next(r for r in rules if r.id == "slow-regex")
    node = slow.when
    pattern = node.extra
    object.__setattr__(node, "extra", Recording(pattern))  # a frozen node of this test's own rule set
    try:
        report = diagnose(log, rules=rules)
    finally:
        object.__setattr__(node, "extra", pattern)
    assert timeouts and all(t == real for t in timeouts)
    assert "slow-regex" not in [d.rule for d in report.diagnoses]  # timed out: unknown, so it does not fire


def test_extra_rules_dir_overrides_by_id(tmp_path: Path) -> None:
    source = (builtin_rules_dir() / "healthy.yaml").read_text(encoding="utf-8")
    (tmp_path / "healthy.yaml").write_text(source.replace("priority: 10", "priority: 99"), encoding="utf-8")
    rules = load_rules([builtin_rules_dir(), tmp_path])
    assert next(r for r in rules if r.id == "healthy").priority == 99


def test_rules_list_and_test_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "list"]) == 0
    assert "no-cache-blocks-other-process" in capsys.readouterr().out
    assert main(["rules", "test"]) == 0
    assert "FAIL" not in capsys.readouterr().out


def test_a_fires_example_must_make_the_rule_the_verdict(tmp_path: Path) -> None:
    source = (builtin_rules_dir() / "healthy.yaml").read_text(encoding="utf-8")
    source = source.replace("id: healthy", "id: outranked").replace("priority: 10", "priority: 2")
    source = source.replace("../tests/", str(builtin_rules_dir().parent / "tests") + "/")
    (tmp_path / "outranked.yaml").write_text(source, encoding="utf-8")
    rules = load_rules([builtin_rules_dir(), tmp_path])
    results = run_examples(next(r for r in rules if r.id == "outranked"), rules)
    fires = [r for r in results if r.example.expect == "fires"]
    assert fires and all(not r.ok and r.detail == "fired, but healthy is the verdict" for r in fires)
