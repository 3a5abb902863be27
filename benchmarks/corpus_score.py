"""Score kvdoctor on a labelled corpus (default: tests/fixtures/corpus).

Prints, per file, the verdict and first remedy against the labels, then the totals the issues
set as targets: figures recovered (≥95%), verdict matches class (≥95%), first remedy matches
remedy_primary (≥85%), and first remedies that point the opposite way (must be 0).

    python benchmarks/corpus_score.py [CORPUS_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from kvdoctor.api import diagnose
from kvdoctor.reader import facts as facts_module
from kvdoctor.reader.lines import iter_raw_lines, open_source
from kvdoctor.reader.pipeline import analyse_lines

ROOT = Path(__file__).resolve().parents[1]
FIGURES = facts_module.FIGURES
# remedy_primary label -> the action ids that satisfy it
REMEDY = {
    "lower_max_model_len": {"lower_max_model_len", "max_model_len_auto"},
    "reduce_batched_tokens_or_max_num_seqs": {
        "reduce_max_num_batched_tokens",
        "reduce_max_num_seqs",
    },
    "raise_utilization": {"raise_gpu_memory_utilization"},
    "free_gpu_kill_other_process": {"free_gpu_memory"},
    "tensor_parallel_or_quantize": {"increase_tensor_parallel_size", "use_quantized_checkpoint"},
    "lower_utilization": {"lower_gpu_memory_utilization"},
    "enforce_eager": {"enforce_eager"},
    "fix_environment": {"fix_environment"},
    "fix_config": {"fix_config"},
    "need_more_info": {"collect_more_log"},
    "none": {None},
}


def same(a: object, b: object) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return round(float(a), 2) == round(float(b), 2) or abs(float(a) - float(b)) < 0.006
    return a == b


def opposite(label: dict, action: str | None) -> bool:
    klass, sub = label["class"], label.get("subcause") or label.get("subcause_inferred")
    if action == "raise_gpu_memory_utilization" and (klass == "insufficient_free_memory_at_startup" or sub == "b"):
        return True
    if action == "lower_gpu_memory_utilization" and klass == "max_model_len_too_large":
        return True
    return action == "lower_max_model_len" and klass == "no_cache_blocks"


def main(corpus: Path) -> int:
    labels = yaml.safe_load((corpus / "labels.yaml").read_text())
    fig_ok = fig_all = verdict_ok = remedy_ok = wrong_way = 0
    for label in labels:
        path = corpus / label["file"]
        analysis = analyse_lines(str(path), iter_raw_lines(open_source(str(path))))
        facts = {k: f.value for k, f in analysis.last.facts.items() if f.source != "estimate"}
        misses = []
        for name in FIGURES:
            if label.get(name) is None:
                continue
            fig_all += 1
            if same(facts.get(name), label[name]):
                fig_ok += 1
            else:
                misses.append(f"{name}={facts.get(name)}≠{label[name]}")
        report = diagnose(path)
        first = report.diagnoses[0].remedies[0].action if report.diagnoses and report.diagnoses[0].remedies else None
        v_ok = report.verdict == label["class"]
        r_ok = first in REMEDY.get(label["remedy_primary"], {label["remedy_primary"]})
        bad = opposite(label, first)
        verdict_ok += v_ok
        remedy_ok += r_ok
        wrong_way += bad
        mark = "ok " if v_ok and r_ok and not misses else "XX "
        print(
            f"{mark}{label['file'][:58]:<58} {report.verdict:<34} {str(first):<30}"
            f"{'' if v_ok else ' want ' + label['class']}{'' if r_ok else ' want ' + label['remedy_primary']}"
            f"{' OPPOSITE' if bad else ''} {' '.join(misses)}"
        )
    n = len(labels)
    print(
        f"\nfigures {fig_ok}/{fig_all} ({100 * fig_ok / max(fig_all, 1):.1f}%)  verdict {verdict_ok}/{n} "
        f"({100 * verdict_ok / n:.1f}%)  first remedy {remedy_ok}/{n} ({100 * remedy_ok / n:.1f}%)  "
        f"opposite {wrong_way}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "tests" / "fixtures" / "corpus"))
