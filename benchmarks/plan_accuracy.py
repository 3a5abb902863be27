"""Predicted vs logged KV GiB and tokens, per case (run: .venv/bin/python benchmarks/plan_accuracy.py).

Two predictions per case: `log act` takes the activation peak (and the other terms) from the log,
`estimated` lets kvdoctor estimate every term the log would only print after the fact.
Cases are the worked examples of reference/kv-math.md, reference/vllm-log-formats.examples.txt
(synthetic but internally consistent) and the corpus logs that print enough figures.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvdoctor.memory.catalog import find_model
from kvdoctor.memory.kvmath import PlanRequest, kv_capacity, kv_layout, make_plan


@dataclass(frozen=True)
class Case:
    name: str
    model: str
    total: float
    util: float
    version: str
    mml: int
    logged_gib: float
    logged_tokens: int | None
    tp: int = 1
    act: float | None = None  # the log's activation peak
    weights: float | None = None


CASES = [
    Case(
        "vllm#10517 RTX 3090 (real)",
        "Llama-3.1-8B-Instruct",
        23.58,
        0.9,
        "0.6.4.post1",
        29000,
        2.89,
        23_648,
        act=2.99,
    ),
    Case(
        "0.20.0 H100 Qwen3-8B (examples)",
        "Qwen3-8B",
        79.19,
        0.92,
        "0.20.0",
        40960,
        55.25,
        402_352,
        act=1.37,
    ),
    Case(
        "0.33.0 2xH200 Qwen3-32B TP2 (examples)",
        "Qwen3-32B",
        139.72,
        0.92,
        "0.33.0",
        40960,
        95.28,
        780_544,
        tp=2,
        act=1.18,
    ),
    Case(
        "0.5.4 2xL4 Llama-3.1-8B TP2 (examples)",
        "Llama-3.1-8B-Instruct",
        22.03,
        0.9,
        "0.5.4",
        131072,
        10.92,
        178_864,
        tp=2,
    ),
    Case("corpus 051 Qwen3-14B (real, KV only)", "Qwen3-14B", 0.0, 0.9, "0.11.0", 32768, 6.51, 42_656),
]


def _kv_only(case: Case) -> tuple[float, int]:
    entry = find_model(case.model)
    assert entry is not None
    from kvdoctor.memory.kvmath import era_for

    cap = kv_capacity(
        kv_layout(entry.config, tp=case.tp),
        case.logged_gib,
        era=era_for(case.version),
        max_model_len=case.mml,
        max_num_batched_tokens=2048,
        version=case.version,
    )
    return case.logged_gib, cap.kv_cache_tokens


def _plan(case: Case, *, with_log: bool) -> tuple[float, int]:
    entry = find_model(case.model)
    assert entry is not None
    if case.total == 0.0:
        return _kv_only(case)
    plan = make_plan(
        PlanRequest(
            model=entry,
            total_gib=case.total,
            gpu_name="h100" if case.total > 70 else "",
            utilization=case.util,
            max_model_len=case.mml,
            tensor_parallel_size=case.tp,
            vllm_version=case.version,
            activation_gib=case.act if with_log else None,
        )
    )
    return plan.budget.kv_cache_gib, plan.capacity.kv_cache_tokens


def _err(pred: float, logged: float) -> str:
    return f"{(pred - logged) / logged * 100:+6.1f}%" if logged else "   n/a"


def main() -> None:
    head = f"{'case':42} {'logged GiB':>10} {'tokens':>9} | {'log act GiB':>11} {'tokens':>9} {'err':>7}"
    head += f" | {'est. GiB':>8} {'tokens':>9} {'err':>7}"
    print(head)
    print("-" * len(head))
    for case in CASES:
        g1, t1 = _plan(case, with_log=True)
        g2, t2 = _plan(case, with_log=False)
        logged_t = case.logged_tokens or 0
        print(
            f"{case.name:42} {case.logged_gib:10.2f} {logged_t:9,} | {g1:11.2f} {t1:9,} {_err(t1, logged_t)}"
            f" | {g2:8.2f} {t2:9,} {_err(t2, logged_t)}"
        )


if __name__ == "__main__":
    main()
