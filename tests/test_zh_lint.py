"""`kvdoctor rules lint` checks that each text's zh says what its en says (issue 16): the same
`{figures}` (and their format), the same number of `[[ ]]` segments, the same --flags and the
same literal numbers. A mismatch is a `path:line:col:` error like every other lint error; loading
the rule for `diagnose` does not stop on it (a translation that drifted is not a broken rule)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvdoctor.cli import main
from kvdoctor.diagnosis.rules import RuleLoadError, builtin_rules_dir, load_rules, parity_problems

RULE = """\
id: {id}
title:
  en: "Out of memory with {{oom_tried_gib:.2f}} GiB asked"
  zh: {title_zh}
class: cuda_oom
severity: error
when: seen.cuda_oom
explain:
  en: >-
    The fraction[[ ({{gpu_memory_utilization}})]] leaves too little; 0.95 is the ceiling.
  zh: >-
    {explain_zh}
remedies:
  - action: lower_gpu_memory_utilization
    value: 0.85
    text:
      en: "Use --gpu-memory-utilization {{value}} (0.9 is the default)."
      zh: {remedy_zh}
examples:
  fires: [{{log: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."}}]
  silent: [{{log: "INFO ready"}}]
"""
GOOD = {
    "title_zh": '"显存不足（OOM）：请求了 {oom_tried_gib:.2f} GiB"',
    "explain_zh": "比例[[（{gpu_memory_utilization}）]]留下的太少；0.95 是上限。",
    "remedy_zh": '"使用 --gpu-memory-utilization {value}（0.9 是默认值）。"',
}


def _write(tmp_path: Path, **zh: str) -> Path:
    path = tmp_path / "zh-parity.yaml"
    path.write_text(RULE.format(id="zh-parity", **{**GOOD, **zh}), encoding="utf-8")
    return path


def _lint(tmp_path: Path) -> list[str]:
    try:
        load_rules([tmp_path], lint=True)
    except RuleLoadError as exc:
        return [str(e) for e in exc.errors]
    return []


def test_every_builtin_rule_passes_the_parity_lint() -> None:
    load_rules([builtin_rules_dir()], lint=True)


def test_a_rule_whose_zh_says_the_same_passes(tmp_path: Path) -> None:
    _write(tmp_path)
    assert _lint(tmp_path) == []


@pytest.mark.parametrize(
    ("field", "zh", "line", "problem"),
    [
        ("title_zh", '"显存不足（OOM）"', 4, "placeholder {oom_tried_gib:.2f} only in en"),
        ("title_zh", '"显存不足：请求了 {oom_tried_gib:.1f} GiB"', 4, "placeholder {oom_tried_gib:.2f} only in en"),
        (
            "explain_zh",
            "比例（{gpu_memory_utilization}）留下的太少；0.95 是上限。",
            11,
            "1 [[ ]] segment(s) in en, 0 in zh",
        ),
        ("explain_zh", "比例[[（{gpu_memory_utilization}）]]留下的太少。", 11, "number 0.95 only in en"),
        ("remedy_zh", '"使用 --gpu-memory-utilization {value}（0.85 → 0.90）。"', 18, "number 0.85 only in zh"),
        ("remedy_zh", '"调低比例到 {value}（0.9 是默认值）。"', 18, "flag --gpu-memory-utilization only in en"),
    ],
)
def test_a_zh_text_that_drops_or_adds_a_figure_is_a_positioned_error(
    tmp_path: Path, field: str, zh: str, line: int, problem: str
) -> None:
    path = _write(tmp_path, **{field: zh})
    [error] = _lint(tmp_path)
    head = error.splitlines()[0]
    assert head.startswith(f"{path}:{line}:") and problem in head
    assert "the zh text does not say what the en text says" in head


def test_the_lint_command_reports_it_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, remedy_zh='"调低比例。"')
    assert main(["rules", "lint", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:18:" in err and "remedies[0].text" in err and "placeholder {value} only in en" in err


def test_diagnose_still_loads_a_rule_whose_translation_drifted(tmp_path: Path) -> None:
    _write(tmp_path, remedy_zh='"调低比例。"')
    assert [r.id for r in load_rules([tmp_path])] == ["zh-parity"]


def test_parity_ignores_digits_inside_names_and_counts_numbers_next_to_chinese() -> None:
    assert parity_problems("V1 on fp8 H100 cards", "V1 在 fp8 的 H100 卡上") == []
    assert parity_problems("raise to 0.95", "调到0.95") == []
    assert parity_problems("raise to 0.95", "调到0.9") == ["number 0.95 only in en", "number 0.9 only in zh"]
