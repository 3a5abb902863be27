"""Facts: the flat, documented namespace rules read (docs/facts.md lists every name)."""

from __future__ import annotations

from kvdoctor._record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


@record(slots=True)
class Fact:
    name: str
    value: Any
    line: int | None = None  # the line it came from (None for derived or external facts)
    text: str | None = None
    derived: bool = False  # computed from other facts, not printed by vLLM
    source: str = "log"  # log | derived | probe | estimate

    def as_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {"value": self.value, "source": self.source}
        if self.line is not None:
            record["line"] = self.line
        if self.derived:
            record["derived"] = True
        return record


Facts = dict[str, Fact]

# Facts that hold a figure printed by vLLM (units in the name), for docs and the text table.
FIGURES = (
    "weights_gib",
    "total_gpu_gib",
    "gpu_memory_utilization",
    "activation_peak_gib",
    "non_torch_gib",
    "cuda_graph_gib",
    "kv_cache_gib",
    "gpu_blocks",
    "kv_cache_tokens",
    "max_concurrency",
    "max_model_len",
    "max_tokens_in_kv_cache",
    "estimated_max_model_len",
    "free_gpu_gib_at_startup",
    "requested_gib",
)


def values(facts: Facts) -> dict[str, Any]:
    return {name: fact.value for name, fact in facts.items()}


# Every fact name a rule may use. Families: `seen.<event kind>` (an event of that kind occurred
# in the attempt) and `gpu.<name>` (from a probe or a pasted nvidia-smi). docs/facts.md explains each.
KNOWN_FACTS = frozenset(
    {
        # configuration (banner, args dumps, launch command)
        "model",
        "served_model_name",
        "dtype",
        "max_model_len",
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "data_parallel_size",
        "quantization",
        "enforce_eager",
        "kv_cache_dtype",
        "gpu_memory_utilization",
        "max_num_seqs",
        "max_num_batched_tokens",
        "block_size",
        "kv_cache_memory_bytes",
        "num_gpu_blocks_override",
        "swap_space",
        "device",
        "enable_chunked_prefill",
        "cpu_offload_gb",
        "disable_hybrid_kv_cache_manager",
        "enable_lora",
        "max_loras",
        "max_lora_rank",
        "omni_pipeline",
        "mig_profile",
        "cuda_visible_devices",
        "hub_repo_not_found",
        "mixed_gpus",
        "no_length_fits",
        "total_gpu_gib_at_least",
        "utilization_to_fit_bound",
        "vllm_version",
        "vllm_version_min",
        "vllm_version_max",
        "vllm_version_clues",
        "engine",
        "platform",
        # figures vLLM prints
        "weights_gib",
        "total_gpu_gib",
        "activation_peak_gib",
        "non_torch_gib",
        "cuda_graph_gib",
        "cuda_graph_estimate_gib",
        "kv_cache_gib",
        "gpu_blocks",
        "kv_cache_tokens",
        "max_concurrency",
        "max_tokens_in_kv_cache",
        "estimated_max_model_len",
        "free_gpu_gib_at_startup",
        "requested_gib",
        "external_weights_gib",
        "budget_gib",
        "consumed_gib",
        "needed_kv_gib",
        "initial_memory_usage_gib",
        "torch_peak_gib",
        "others_before_profile_gib",
        "mamba_blocks",
        "suggested_utilization",
        "equivalent_utilization",
        "kv_cache_memory_bytes_to_fit",
        "kv_cache_memory_bytes_full",
        "kv_cache_memory_bytes_reserved",
        "kv_cache_memory_bytes_to_fit_estimate",
        # out-of-memory
        "oom_phase",
        "oom_phase_inferred",
        "oom_reported_as",
        "oom_in_graph_profile",
        "oom_tried_gib",
        "oom_total_gib",
        "oom_free_gib",
        "oom_this_process_gib",
        "oom_other_process_gib",
        "oom_allocated_gib",
        "oom_private_pools_gib",
        "oom_allowed_gib",
        "oom_reserved_unallocated_gib",
        "oom_other_pids",
        "oom_gpu_index",
        "warmup_dummy_requests",
        "warmup_of",
        "traceback_phase",
        "traceback_phase_from_step",
        "oom_in_device_setup",
        "sampler_in_profile",
        "oom_cpu_swap",
        "oom_while_serving",
        "traceback_function",
        "traceback_distributed_setup",
        "network_frame",
        "capture_frame",
        "compile_frame",
        "last_phase",
        "incomplete_at",
        "trainer_oom_file",
        "cotenant_loading",
        "cotenant_weights_gib",
        "oom_past_weights",
        # outcome
        "started",
        "failed",
        "failing_file",
        "failing_function",
        "error_type",
        "error_message",
        "profiling_measure",
        "profiling_initial_gib",
        "profiling_current_gib",
        # derived (derive.py) and estimated (kvmath.py)
        "non_kv_gib",
        "kv_reconstructed_gib",
        "budget_shortfall_gib",
        "other_process_gib",
        "max_safe_utilization",
        "max_model_len_that_fits",
        "kv_bytes_per_token",
        "kv_tokens_estimate",
        "one_request_kv_gib_estimate",
        "one_request_kv_gib_hybrid",
        "lora_slots_gib_estimate",
        "max_loras_that_fits",
        "max_model_len_estimate",
        "weights_gib_estimate",
        "weights_estimate_basis",
        "gpu_name",
        "gpu_count",
        "others_charged_possible",
        "others_not_charged_note",
        "cotenant_raise_note",
        "min_utilization_for_model",
        "min_utilization_for_weights",
        "length_overflows_card",
        "max_model_len_at_safe_utilization",
        "min_total_gib_to_fit_by_raising",
        "default_max_num_batched_tokens",
        "gpus_listed",
        "tried_utilization_failed",
        "reported_free_gib",
        "wrapper_saw_little_free",
        "transformers_fallback",
        "wrapper_length_cut",
        "swap_space_host_gib",
        "length_needed",
        "docker_gpu_devices",
        "gpu_shared_by",
        "gpu_listing",
        "larger_card_gib",
        "larger_card_name",
        "larger_card_index",
        "profile_overhead_gib",
        "batch_activation_ratio",
        "batch_reduction_frees_gib",
        "default_seqs_1024_possible",
        "total_gpu_gib_basis",
        "smallest_card_gib",
        "unified_memory_device",
        "graphs_in_budget",
        "accelerator",
        "process_list_command",
        "batch_follows_length",
        "batch_floor_length",
        "encoder_decoder",
        "multimodal",
        "batch_follows_long_length",
        "kv_cache_absent",
        "utilization_default_shown",
        "no_gpu_reason",
        "max_model_len_kernel_limit",
        "oom_cumem_allocator",
        "rl_colocated",
        "test_suite",
        "trainer_held_gib",
        "check_kv_gib",
        "derived_max_model_len",
        "gpu_blocks_measured",
        "oom_holder_earlier_start",
        "cpu_offload_host_gib",
        "host_ram_total_gib",
        "host_ram_available_gib",
        "kv_smallest_rank_gib",
        "utilization_default_value",
        "max_model_len_at_default_utilization",
        "weights_repack",
        "error_is_wrapper",
        "memory_error_seen",
        "environment_reason",
        "oom_device",
        "environment_kind",
        "failed_while_serving",
        "smallest_card_name",
        "tp_size_that_fits",
        "weights_gib_int4",
        "weights_already_4bit",
        "weights_gib_fp8",
        "kv_cache_tokens_fp8",
        "needed_kv_gib_fp8",
        "model_catalog_id",
        "budget_shortfall_estimate_gib",
        "utilization_default",
        "earlier_instance_running",
        "earlier_weights_gib",
        "earlier_attempt_failed",
        "server_said_serving",
        "crash_after_start",
        "other_server_exiting",
        "stalled_minutes",
        "stall_message",
        "graph_profiling_enabled",
        "kv_cache_gib_rank_spread",
        "gpu_memory_utilization_note",
    }
)
FACT_FAMILIES = ("seen.", "gpu.")


def is_known(name: str) -> bool:
    return name in KNOWN_FACTS or name.startswith(FACT_FAMILIES)
