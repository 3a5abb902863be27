"""Score kvdoctor on labelled corpora (default: tests/fixtures/corpus and every folder under
tests/fixtures/validation/).

Prints, per file, the verdict and first remedy against the labels, then the totals the issues
set as targets: figures recovered, verdict matches class, first remedy matches remedy_primary,
first remedies that point the opposite way (must be 0), healthy start-ups called failures (must
be 0), and how often each confidence level is right (a first remedy at `high` must be ≥ 97% right).

    python benchmarks/corpus_score.py [CORPUS_DIR ...]
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kvdoctor.api import diagnose
from kvdoctor.reader import facts as facts_module

ROOT = Path(__file__).resolve().parents[1]
FIGURES = facts_module.FIGURES
# remedy_primary label -> the action ids that satisfy it
REMEDY = {
    "lower_max_model_len": {"lower_max_model_len", "max_model_len_auto"},
    "reduce_batched_tokens_or_max_num_seqs": {
        "reduce_max_num_batched_tokens",
        "reduce_max_num_seqs",
    },
    # give the KV cache more memory: the fraction, or the CPU backend's KV space
    "raise_utilization": {"raise_gpu_memory_utilization", "raise_cpu_kv_cache_space"},
    "free_gpu_kill_other_process": {"free_gpu_memory"},
    "tensor_parallel_or_quantize": {"increase_tensor_parallel_size", "use_quantized_checkpoint"},
    "lower_utilization": {"lower_gpu_memory_utilization", "lower_cpu_kv_cache_space"},
    "enforce_eager": {"enforce_eager"},
    "fix_environment": {"fix_environment"},
    # (a flag set to a value that cannot work: --kv-cache-memory's own action is that flag's fix)
    "fix_config": {"fix_config", "set_kv_cache_memory_bytes"},
    "need_more_info": {"collect_more_log"},
    "none": {None},
}


def corpora(args: list[str]) -> list[Path]:
    if args:
        return [Path(a) for a in args]
    found = (ROOT / "tests" / "fixtures" / "validation").glob("*")
    validation = sorted(p for p in found if (p / "labels.yaml").exists())
    return [ROOT / "tests" / "fixtures" / "corpus", *validation]


def wanted(label: dict[str, Any]) -> str | None:
    """The remedy a label asks for: the thread's fix, else the direction its figures demand; None
    when the thread established neither (such a log scores its verdict only)."""
    value = label.get("remedy_primary") or label.get("expected_remedy_direction")
    return str(value) if value else None


def same(a: object, b: object) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return round(float(a), 2) == round(float(b), 2) or abs(float(a) - float(b)) < 0.006
    return a == b


CAUSE_LETTER = {"utilization_too_low": "a", "other_process": "b", "model_too_large": "c", "profile_overhead": "d"}


def opposite(label: dict[str, Any], action: str | None) -> bool:
    klass = label["class"]
    if wanted(label) is not None and action in REMEDY.get(str(wanted(label)), set()):
        return False  # (what the label itself asks for is never the opposite of it)
    # (the hand-built variants name the cause, the real logs its letter)
    sub = label.get("subcause") or label.get("subcause_inferred") or CAUSE_LETTER.get(label.get("cause") or "")
    if action == "raise_gpu_memory_utilization" and (klass == "insufficient_free_memory_at_startup" or sub == "b"):
        return True
    if action == "lower_gpu_memory_utilization" and klass == "max_model_len_too_large":
        return True
    # (a shorter length is right for zero blocks only where the profiling batch follows it: V0)
    return action == "lower_max_model_len" and klass == "no_cache_blocks" and sub != "d"


@dataclass
class Scored:
    """One file's result against its label."""

    file: str
    verdict: str
    first: str | None
    confidence: str | None
    verdict_ok: bool
    remedy_ok: bool | None  # None: the label names no remedy (the thread gave none)
    opposite: bool
    healthy_called_failure: bool
    figures_ok: int
    figures_all: int
    misses: list[str] = field(default_factory=list)


def score_file(corpus: Path, label: dict[str, Any]) -> Scored:
    path = corpus / label["file"]
    report = diagnose(path)
    # the figures of the start-up the verdict is about (a relaunch that shows no outcome yet is
    # not it), as read: kvdoctor's estimates are not figures
    shown = report.primary.facts if report.primary else {}
    facts = {k: v["value"] for k, v in shown.items() if v.get("source") != "estimate"}
    misses, ok, total = [], 0, 0
    for name in FIGURES:
        if label.get(name) is None:
            continue
        total += 1
        if same(facts.get(name), label[name]):
            ok += 1
        else:
            misses.append(f"{name}={facts.get(name)}≠{label[name]}")
    top = report.diagnoses[0] if report.diagnoses else None
    first = top.remedies[0].action if top and top.remedies else None
    return Scored(
        file=label["file"],
        verdict=report.verdict,
        first=first,
        confidence=top.confidence if top else None,
        verdict_ok=report.verdict == label["class"],
        remedy_ok=None if wanted(label) is None else first in REMEDY.get(wanted(label), {wanted(label)}),
        opposite=opposite(label, first),
        healthy_called_failure=label["class"] == "healthy" and report.verdict not in ("healthy", "unknown"),
        figures_ok=ok,
        figures_all=total,
        misses=misses,
    )


def score_corpus(corpus: Path) -> list[tuple[dict[str, Any], Scored]]:
    labels = yaml.safe_load((corpus / "labels.yaml").read_text(encoding="utf-8"))
    return [(label, score_file(corpus, label)) for label in labels]


def summary(results: list[Scored]) -> str:
    n = max(len(results), 1)
    fig_ok = sum(r.figures_ok for r in results)
    fig_all = max(sum(r.figures_all for r in results), 1)
    verdict = sum(r.verdict_ok for r in results)
    remedy = sum(bool(r.remedy_ok) for r in results)
    scored = max(sum(r.remedy_ok is not None for r in results), 1)
    by_conf: Counter[str] = Counter()
    right: Counter[str] = Counter()
    for r in results:
        level = r.confidence or "none"
        by_conf[level] += 1
        right[level] += r.verdict_ok and r.remedy_ok is not False
    levels = "  ".join(
        f"{level} {right[level]}/{by_conf[level]} ({100 * right[level] / by_conf[level]:.0f}%)"
        for level in ("high", "medium", "low", "none")
        if by_conf[level]
    )
    return (
        f"logs {len(results)}  figures {fig_ok}/{fig_all} ({100 * fig_ok / fig_all:.1f}%)  "
        f"verdict {verdict}/{n} ({100 * verdict / n:.1f}%)  "
        f"first remedy {remedy}/{scored} ({100 * remedy / scored:.1f}%)  "
        f"opposite {sum(r.opposite for r in results)}  healthy called failure "
        f"{sum(r.healthy_called_failure for r in results)}\n"
        f"right (verdict and first remedy) by confidence: {levels}"
    )


def main(args: list[str]) -> int:
    everything: list[Scored] = []
    for corpus in corpora(args):
        results = score_corpus(corpus)
        print(f"== {corpus.relative_to(ROOT) if corpus.is_relative_to(ROOT) else corpus}")
        for label, r in results:
            mark = "ok " if r.verdict_ok and r.remedy_ok is not False and not r.misses else "XX "
            print(
                f"{mark}{r.file[:58]:<58} {r.verdict:<34} {str(r.first):<30} {r.confidence or '-':<6}"
                f"{'' if r.verdict_ok else ' want ' + label['class']}"
                f"{'' if r.remedy_ok is not False else ' want ' + str(wanted(label))}"
                f"{' OPPOSITE' if r.opposite else ''} {' '.join(r.misses)}"
            )
        scored = [r for _, r in results]
        print(summary(scored) + "\n")
        everything.extend(scored)
    if len(everything) > 0:
        print("== all\n" + summary(everything))
    return 0


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpora", nargs="*", metavar="CORPUS_DIR", help="folders with labels.yaml (default: all)")
    sys.exit(main(parser.parse_args().corpora))
