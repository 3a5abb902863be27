"""The Chinese names of kvdoctor's ids (issue 16): classes, causes, phases, remedy actions and the
figures of the budget, and of the descriptive values some facts hold (`oom_phase`,
`profiling_measure`, …). One table, so a sentence from a rule, the text report, markdown, Slack
and a ticket all call a phase the same thing. The words follow docs/zh-glossary.md.

JSON keeps the ids: they are the stable contract; only what a person reads is named here."""

from __future__ import annotations

from types import MappingProxyType

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal

    Kind = Literal["class", "cause", "phase", "action", "figure", "measure", "environment"]

_ZH: dict[str, dict[str, str]] = {
    "class": {
        "no_cache_blocks": "没有 KV 缓存块",
        "max_model_len_too_large": "max_model_len 过大",
        "insufficient_free_memory_at_startup": "启动时空闲显存不足",
        "cuda_oom": "CUDA 显存不足",
        "healthy": "启动正常",
        "other": "其他问题",
        "unknown": "无法判断",
    },
    "cause": {
        "utilization_too_low": "比例太低",
        "other_process": "其他进程占用显存",
        "model_too_large": "模型太大",
        "profile_overhead": "profile 开销",
    },
    "phase": {
        "weight_loading": "权重加载",
        "profile_run": "profile 运行",
        "cuda_graph_profile": "CUDA graph 显存分析",
        "cuda_graph_capture": "CUDA graph 捕获",
        "sampler_warmup": "采样器预热",
        "kv_cache_allocation": "KV 缓存分配",
        "kernel_warmup": "kernel 预热",
        "unknown": "未识别的启动步骤",
    },
    "action": {
        "raise_gpu_memory_utilization": "调高 gpu_memory_utilization",
        "lower_gpu_memory_utilization": "调低 gpu_memory_utilization",
        "free_gpu_memory": "释放显存",
        "lower_max_model_len": "降低 max_model_len",
        "max_model_len_auto": "自动选择 max_model_len",
        "enforce_eager": "改用 eager 模式",
        "reduce_max_num_seqs": "降低 max_num_seqs",
        "reduce_max_num_batched_tokens": "降低 max_num_batched_tokens",
        "increase_tensor_parallel_size": "增大张量并行（TP）",
        "use_quantized_checkpoint": "使用量化权重",
        "kv_cache_dtype_fp8": "KV 缓存改用 fp8",
        "set_kv_cache_memory_bytes": "设置 kv_cache_memory_bytes",
        "raise_cpu_kv_cache_space": "调大 VLLM_CPU_KVCACHE_SPACE",
        "lower_cpu_kv_cache_space": "调小 VLLM_CPU_KVCACHE_SPACE",
        "fix_environment": "修复环境",
        "fix_config": "修复配置",
        "upgrade_vllm": "升级 vLLM",
        "collect_more_log": "收集完整日志",
        # what a ticket may say it did, though kvdoctor never recommends it
        "raise_max_model_len": "调高 max_model_len",
        "raise_max_num_seqs": "调高 max_num_seqs",
        "raise_max_num_batched_tokens": "调高 max_num_batched_tokens",
    },
    "figure": {
        "weights_gib": "权重",
        "activation_peak_gib": "激活峰值",
        "non_torch_gib": "非 torch",
        "cuda_graph_gib": "CUDA graph",
        "kv_cache_gib": "KV 缓存",
    },
    # vLLM's "Error in memory profiling. Initial free memory …" / "Initial used memory …"
    "measure": {"free": "空闲", "used": "已用"},
    # the extractor's kinds of environment refusal (reader/extractors.py `_environment_error`)
    "environment": {
        "driver": "驱动",
        "disk": "磁盘",
        "shared memory": "共享内存（/dev/shm）",
        "host memory": "主机内存",
        "cluster": "集群",
        "network": "网络（网卡）",
        "port": "端口",
        "vGPU layer (HAMi)": "vGPU 层（HAMi）",
        "NCCL's CUDA call": "NCCL 的 CUDA 调用",
        "shared memory or a mapped file": "共享内存（/dev/shm）或映射的文件",
        "toolchain": "编译工具链（ptxas）",
        "kernel build": "内核构建（GPU 架构）",
        "operator package": "算子包（CANN）",
        "device visibility": "设备可见性（CUDA_VISIBLE_DEVICES）",
    },
}
ZH: MappingProxyType[str, dict[str, str]] = MappingProxyType(_ZH)

# facts whose (string) value is one of the ids above: a rule's zh sentence shows the zh name
FACT_KINDS: dict[str, Kind] = {
    "oom_phase": "phase",
    "oom_phase_inferred": "phase",
    "traceback_phase": "phase",
    "last_phase": "phase",
    "incomplete_at": "phase",
    "profiling_measure": "measure",
    "environment_kind": "environment",
}


# in English sentences a phase reads as words too ("during the profiling run", not "during
# profile_run"); the other ids are shown as written
_EN: dict[str, dict[str, str]] = {
    "phase": {
        "weight_loading": "weight loading",
        "profile_run": "the profiling run",
        "cuda_graph_profile": "CUDA graph profiling",
        "cuda_graph_capture": "CUDA graph capture",
        "sampler_warmup": "the sampler warm-up",
        "kv_cache_allocation": "KV cache allocation",
        "kernel_warmup": "the kernel warm-up",
        "unknown": "a start-up step the log does not name",
    },
}


def term(lang: str, kind: Kind, value: str) -> str:
    """What a reader of `lang` calls the id `value`: the zh name (or, for a phase, the English
    words), else the id as written."""
    table = _ZH if lang == "zh" else _EN
    return table.get(kind, {}).get(value, value)


def fact_value(lang: str, fact: str, value: str) -> str:
    """A fact's string value in `lang` when the fact holds an id (a phase, a measure)."""
    kind = FACT_KINDS.get(fact)
    return term(lang, kind, value) if kind is not None else value
