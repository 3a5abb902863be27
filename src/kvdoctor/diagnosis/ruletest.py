"""Run a rule's examples: `fires` must make the rule fire on its example, `silent` must not."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvdoctor.diagnosis.engine import evaluate_attempt, fire
from kvdoctor.diagnosis.rules import Example, Rule
from kvdoctor.reader.facts import Fact
from kvdoctor.reader.lines import iter_raw_lines, open_source
from kvdoctor.reader.pipeline import analyse_lines


@dataclass(frozen=True)
class ExampleResult:
    rule: str
    example: Example
    ok: bool
    detail: str

    def describe(self) -> str:
        where = str(self.example.path) if self.example.path else "inline log"
        return f"{self.example.expect}: {where}: {self.detail}"


def _analysis(example: Example):  # type: ignore[no-untyped-def]
    if example.path is not None:
        return analyse_lines(str(example.path), iter_raw_lines(open_source(str(example.path))))
    return analyse_lines("<inline>", (example.log or "").splitlines())


def run_examples(
    rule: Rule,
    all_rules: list[Rule],
    extra: Callable[[Any], Mapping[str, Fact]] | None = None,
) -> list[ExampleResult]:
    """Each example's verdict; `extra` gives the facts the caller adds beside the log's own (the
    `gpu.*` facts of an nvidia-smi listing in the log, as `kvdoctor diagnose` does)."""
    results = []
    for example in rule.examples:
        if example.path is not None and not Path(example.path).exists():
            results.append(ExampleResult(rule.id, example, False, "fixture not found"))
            continue
        analysis = _analysis(example)
        added = dict(extra(analysis)) if extra is not None else {}
        fired = fire(rule, {**analysis.last.facts, **added})
        ok = fired if example.expect == "fires" else not fired
        detail = "fired" if fired else "did not fire"
        if ok and fired and example.wins:
            # firing is not enough: the example is the situation the rule is the verdict for
            report = evaluate_attempt(analysis.last, all_rules, extra_facts=added or None)
            winner = report.diagnoses[0].rule if report.diagnoses else None
            if winner != rule.id:
                ok, detail = False, f"fired, but {winner} is the verdict"
        results.append(ExampleResult(rule.id, example, ok, detail))
    return results


__all__ = ["ExampleResult", "run_examples"]
