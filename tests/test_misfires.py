"""Hand-built logs on which a new reading once misfired (reviews of rounds 27-29's, 30-31's,
32-33's and 34's readings, and realistic variants of round 35's real logs): each holds the answer a user should see, so the reading cannot widen again unnoticed."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvdoctor.api import diagnose

HERE = Path(__file__).parent / "fixtures" / "misfires"

CASES = {
    # a --max-num-batched-tokens 16x this card's default beside a negative V1 KV figure: the
    # budget's rest is the batch's activations, and going back to the default is the lever
    "raised_batch_a10g_llama8b_negative_kv.log": (
        "no_cache_blocks",
        "no-cache-blocks-profile-overhead",
        "reduce_max_num_batched_tokens",
    ),
    # a ticket's title quoting the error, then the launch and a traceback cut before its exception
    # line: the title is that start-up's error (one start-up, not an earlier one); an OOM line
    # whose traceback (the same worker, a later clock, quoted below it) runs the sampler's dummy
    # batch is that step's, not the weights'
    "title_quote_then_cut_traceback_no_kernel_image.md": ("other", "other-environment-refused", "fix_environment"),
    "oom_then_same_worker_frames_quoted_later.log": ("cuda_oom", "cuda-oom-sampler-warmup", "reduce_max_num_seqs"),
    # round 39's variants: the engine dumped its batch, then the worker's OOM arrived wrapped
    # ("Worker failed with error 'CUDA out of memory …'") after hours of serving: a healthy start-up;
    # V1's KV check cut at a terminal's width before its available figure is still the length;
    # 0.9.2 (checks free memory first) with jq's argv and a node label: the model at 0.85, not a
    # tenant, leads
    "healthy_then_dumped_batch_oom_tp2.log": ("healthy", "healthy", None),
    # kubelet killing the container on its startup probe while torch.compile still ran: the probe
    "k8s_startup_probe_kills_during_compile.txt": ("other", "other-probe-killed", "fix_config"),
    # 0.11's max-len error for a hybrid (Mamba) model printed whole without its estimate: no
    # length fits, so a shorter one is not the fix; more memory for the KV cache is
    "v011_hybrid_maxlen_no_estimate_no_length_fits.log": (
        "max_model_len_too_large",
        "max-model-len-too-large",
        "raise_gpu_memory_utilization",
    ),
    # a max-len failure 0.13 GiB short beside a --max-num-batched-tokens 65536 the user set: the
    # batch is the lever that keeps the model's own 8K context
    "maxlen_user_batched_65536_hybrid_a_little_short.log": (
        "max_model_len_too_large",
        "max-model-len-too-large",
        "reduce_max_num_batched_tokens",
    ),
    # a hub 401 chained to "Repository Not Found" is the id typed; a KeyError naming PEFT's wrapper
    # keys is an adapter checkpoint not merged; a layout refused with CUDA_VISIBLE_DEVICES set is
    # the variable
    "hub_401_then_repository_not_found.log": ("other", "other-non-memory-failure", "fix_config"),
    "peft_adapter_keys_keyerror_ray.log": ("other", "other-non-memory-failure", "fix_config"),
    "cuda_visible_devices_missing_index_layout.log": ("other", "other-non-memory-failure", "fix_environment"),
    # settings where serving templates keep them (RunPod's environment variables, a Helm chart's
    # camelCase values) and a GGUF file's block format (Q4_K_M: 4.83 bits a weight, not 16)
    "runpod_env_settings_no_cache_blocks.txt": (
        "no_cache_blocks",
        "no-cache-blocks-model-too-large",
        "increase_tensor_parallel_size",
    ),
    "helm_camelcase_values_no_cache_blocks.txt": (
        "no_cache_blocks",
        "no-cache-blocks-unmeasured",
        "raise_gpu_memory_utilization",
    ),
    "gguf_q4km_4090_util08_no_cache_blocks.txt": (
        "no_cache_blocks",
        "no-cache-blocks-unmeasured",
        "raise_gpu_memory_utilization",
    ),
    # the free-memory check on a card shared by plan (a fraction of 0.6 or less, an explicit
    # --kv-cache-memory that leaves the fraction only this check to pass): the fraction that fits
    # what is free leads
    "free_check_kv_cache_memory_set_fraction_gates.md": (
        "insufficient_free_memory_at_startup",
        "free-memory-at-startup-held",
        "lower_gpu_memory_utilization",
    ),
    "free_check_time_sliced_replicas_util05.txt": (
        "insufficient_free_memory_at_startup",
        "free-memory-at-startup-held",
        "lower_gpu_memory_utilization",
    ),
    # cuBLAS's "CUBLAS_STATUS_ALLOC_FAILED" and Gaudi's "MODULE:PT_DEVMEM Allocation failed" are
    # out-of-memory errors under other names; a NCCL "unhandled cuda error" inside the capture at
    # 0.97 (graphs outside the fraction) is most often one too
    "v063_cublas_error_in_capture_util099.log": (
        "cuda_oom",
        "cuda-oom-graph-capture",
        "lower_gpu_memory_utilization",
    ),
    "hpu_pt_devmem_allocation_failed_weights.log": (
        "cuda_oom",
        "cuda-oom-weight-loading",
        "increase_tensor_parallel_size",
    ),
    # an exception named without the "Error" suffix (Triton's OutOfResources, a bare Exception) is
    # the root cause; argparse refusing a relaunch's flags after a failed start-up is that relaunch
    "triton_out_of_resources_shared_memory.log": ("other", "other-non-memory-failure", "fix_environment"),
    "tokenizers_untagged_enum_bare_exception.md": ("other", "other-non-memory-failure", "fix_environment"),
    "no_cache_blocks_then_misspelt_flag_relaunch.log": ("other", "other-non-memory-failure", "fix_config"),
    "v011_nccl_error_in_capture_util097.log": (
        "cuda_oom",
        "cuda-oom-capture-squeezed",
        "lower_gpu_memory_utilization",
    ),
    "v1_maxlen_error_cut_before_available.log": (
        "max_model_len_too_large",
        "max-model-len-too-large",
        "lower_max_model_len",
    ),
    "v092_jq_argv_node_label_no_cache_blocks.txt": (
        "no_cache_blocks",
        "no-cache-blocks-unmeasured",
        "raise_gpu_memory_utilization",
    ),
    # variants of round 37's readings: 0.10's DEBUG "Requested memory: 0.90 (util), 71.30 GiB"
    # gives the total the budget needs (no rule spoke without it); a V0 batch set above the length
    # is the user's, and the batch is the lever; 0.21's graph estimate larger than the shortfall is
    # eager mode's to win back; requests served, then an OOM whose traceback the excerpt cut
    "v1_debug_requested_memory_implies_total.log": (
        "no_cache_blocks",
        "no-cache-blocks-profile-overhead",
        "reduce_max_num_batched_tokens",
    ),
    "v0_batch_set_above_length.log": (
        "no_cache_blocks",
        "no-cache-blocks-profile-overhead",
        "reduce_max_num_batched_tokens",
    ),
    "v021_graph_estimate_covers_shortfall.log": (
        "no_cache_blocks",
        "no-cache-blocks-profile-overhead",
        "enforce_eager",
    ),
    "served_then_oom_traceback_cut.log": ("healthy", "healthy-served", None),
    # variants of round 37's readings (free-memory checks, a V0 no-KV raise, a pasted per-GPU
    # query): 0.32's "engine's budget after excluding external process's weights" counts the weights
    # held for this engine as its own; the check's ValueError cut mid-figure is still the check
    "free_check_engine_budget_external_weights.log": (
        "insufficient_free_memory_at_startup",
        "free-memory-at-startup-held",
        "lower_gpu_memory_utilization",
    ),
    "free_check_cut_mid_figure.log": (
        "insufficient_free_memory_at_startup",
        "free-memory-at-startup-held",
        "free_gpu_memory",
    ),
    # an 8B model at its own 131072 tokens beside 5.75 GiB held: the model fits once freed, the
    # length does not (not "the model never fits this card")
    "free_check_long_default_length_held.log": (
        "insufficient_free_memory_at_startup",
        "free-memory-at-startup-fraction-too-high",
        "free_gpu_memory",
    ),
    # requests served (200 OK, stats), then the running batch ran out of memory: the start-up was
    # healthy, and the OOM is not the capture's
    "healthy_then_runtime_oom.log": ("healthy", "healthy", None),
    # an autotuner's OOM for one candidate (FlashInfer's "Skipping tactic", Inductor's "[0/0] … Ignoring
    # this choice") on a start-up that went on to serve: healthy
    "flashinfer_autotune_oom_warning_healthy.log": ("healthy", "healthy", None),
    "inductor_autotune_oom_warning_healthy.log": ("healthy", "healthy", None),
    # a compose stack's other service (a web UI, an embedder) failing beside a healthy vLLM
    "compose_other_service_oom_healthy.log": ("healthy", "healthy", None),
    "compose_other_service_error_healthy.log": ("healthy", "healthy", None),
    # V0's CPU swap space is pinned host RAM: "CUDA error: out of memory" under allocate_cpu_cache
    "v0_cpu_swap_pinned_oom.log": ("cuda_oom", "cuda-oom-cpu-swap", "fix_config"),
    # a review of round 36's readings: an NCCL OOM and a custom all-reduce frame inside the capture
    # are the capture's, not the device's set-up; a gap of 17.7 GiB is not one 0.95 closes; 0.6.4's
    # non-torch memory at TP 2 holds the instance's own NCCL and all-reduce buffers
    "nccl_capture_oom_excerpt.log": ("cuda_oom", "cuda-oom-graph-capture", "lower_gpu_memory_utilization"),
    "capture_custom_allreduce_oom_excerpt.log": ("cuda_oom", "cuda-oom-graph-capture", "lower_gpu_memory_utilization"),
    "max_len_gap_beyond_a_raise.log": ("max_model_len_too_large", "max-model-len-too-large", "lower_max_model_len"),
    "v064_tp2_own_buffers_not_cotenant.log": (
        "no_cache_blocks",
        "no-cache-blocks-utilization-too-low",
        "raise_gpu_memory_utilization",
    ),
    # an OOM raised setting up the device (torch.cuda.set_device) or NCCL's communicator before any
    # weights: the card was full already, not too small for the model
    "set_device_cuda_error_oom.log": ("cuda_oom", "cuda-oom-device-setup", "free_gpu_memory"),
    "nccl_init_cuda_failure_oom_lines.log": ("cuda_oom", "cuda-oom-device-setup", "free_gpu_memory"),
    # torch's DistBackendError printing NCCL's "Last error:" and "Cuda failure 'out of memory'" on
    # lines of their own, inside the capture: an OOM there, not a non-memory failure
    "nccl_capture_cuda_failure_oom_lines.log": ("cuda_oom", "cuda-oom-graph-capture", "enforce_eager"),
    # a wrapper's own spelling of the fraction: TRL's `--gpu_memory_utilization 0.2` (vLLM takes the
    # underscore form too) and LLaMA-Factory's `--vllm_gpu_util 0.5`; the weights exceed what the
    # fraction leaves on any card of 80 GiB or less, so it is the fraction, not a planned co-tenant
    "trl_vllm_serve_underscore_fraction.log": (
        "no_cache_blocks",
        "no-cache-blocks-utilization-too-low",
        "raise_gpu_memory_utilization",
    ),
    "llamafactory_vllm_gpu_util.log": (
        "no_cache_blocks",
        "no-cache-blocks-utilization-too-low",
        "raise_gpu_memory_utilization",
    ),
    # 0.6.4 measures non-torch memory device-wide: 60 GiB of it beside 75.6 GiB in use before the
    # profile is another process, not a model too large for the card (vllm#10451)
    "v064_cotenant_in_non_torch_and_initial.log": (
        "no_cache_blocks",
        "no-cache-blocks-other-process",
        "free_gpu_memory",
    ),
    # Llama-2-7B on a T4: a step below 0.9 no longer holds the weights, so no lower fraction
    "other_phase_step_below_weights.log": ("cuda_oom", "cuda-oom-other-phase", "increase_tensor_parallel_size"),
    # round 36's variant tests: an OOM line alone whose process holds GiBs past the catalog's
    # weights per GPU (and under its fraction) is past the weights: the profiling pass, a guess
    "oom_line_past_catalog_weights.log": ("cuda_oom", "cuda-oom-profile-run", "reduce_max_num_batched_tokens"),
    # Ray's "[repeated 7x across cluster]" hides the failing rank's own weights line; it holds GiBs
    # past the other ranks' weights, so it was past them too
    "ray_repeated_rank_oom_past_weights.log": ("cuda_oom", "cuda-oom-profile-run", "reduce_max_num_batched_tokens"),
    # V0 without chunked prefill at 16K: the batch is the length, and a smaller one is refused
    "v0_16k_profile_oom.log": ("cuda_oom", "cuda-oom-profile-run", "lower_max_model_len"),
    "max_len_small_gap_card_unknown.log": ("max_model_len_too_large", "max-model-len-too-large", "lower_max_model_len"),
    "max_len_fp8_keeps_length.log": ("max_model_len_too_large", "max-model-len-too-large", "lower_max_model_len"),
    "no_kv_eager_already_on.log": (
        "no_cache_blocks",
        "no-cache-blocks-utilization-too-low",
        "raise_gpu_memory_utilization",
    ),
    "dp_free_memory_other_engines_weights.log": (
        "insufficient_free_memory_at_startup",
        "free-memory-at-startup-held",
        "free_gpu_memory",
    ),
    # the OpenAI handler's own ERROR line for a request too long, after the server said it serves
    "request_too_long_logged_by_handler.log": ("healthy", "healthy", None),
    # weights 77% of the card at 0.78, the profile printed: at 0.9 the KV cache has 8 GiB
    "v0_weights_77pct_profile_printed.log": (
        "no_cache_blocks",
        "no-cache-blocks-utilization-too-low",
        "raise_gpu_memory_utilization",
    ),
    # 0.45 on 0.7.3 with 9.86 GiB of non-torch memory printed: 0.6.5+ counts there what another
    # process allocates meanwhile, so the co-tenant stays the reading
    "v073_util045_cotenant_in_non_torch.log": ("no_cache_blocks", "no-cache-blocks-other-process", "free_gpu_memory"),
    # 0.10.1's engine core is "EngineCore_0": a new pid of it loading again is a relaunch
    "relaunch_enginecore_0.log": ("healthy", "healthy", None),
    # a handler's cause printed above the start-up traceback it caused (raise … from e), with its
    # own header: before the server said it serves, not a request
    "chained_handler_init_at_startup.log": ("other", "other-unrecognised-failure", "collect_more_log"),
    # 0.6.4 at 0.1: the weights alone exceed the fraction's budget; 0.59 GiB in use before is a
    # CUDA context, no co-tenant is needed to explain it
    "v064_util010_weights_over_budget.log": (
        "no_cache_blocks",
        "no-cache-blocks-utilization-too-low",
        "raise_gpu_memory_utilization",
    ),
    # a sibling V0 worker (one name for every rank) loads after another rank's OOM: one start-up
    "v0_tp4_sibling_loads_after_oom.log": ("cuda_oom", "cuda-oom-weight-loading", "increase_tensor_parallel_size"),
    # a request's chat-template error, then Ctrl-C through run_server_worker: the server had served
    "request_error_then_ctrl_c.log": ("healthy", "healthy", None),
    # a manifest's argv as YAML items or a JSON array: the 0.95 it sets is read, and is no call to raise
    "k8s_yaml_argv.log": ("no_cache_blocks", "no-cache-blocks-model-too-large", "increase_tensor_parallel_size"),
    "json_argv.log": ("no_cache_blocks", "no-cache-blocks-model-too-large", "increase_tensor_parallel_size"),
    # a fraction of 0.35 on 0.7.3, the budget printed and short by its own figures: the fraction,
    # not a co-tenant (0.7 charges no other process to the budget)
    "v0_util035_budget_printed.log": (
        "no_cache_blocks",
        "no-cache-blocks-utilization-too-low",
        "raise_gpu_memory_utilization",
    ),
    # a rope_scaling dict the user wrote without its `type` is a setting; Llama 3.1's own `llama3`
    # dict refused by an old transformers is the environment (validation 5650)
    "rope_scaling_user_dict.log": ("other", "other-non-memory-failure", "fix_config"),
    # the engine's "init engine … took" comes before the API server builds its handlers and loads
    # the chat template: a failure there is the start-up's
    "chat_template_after_init_engine.log": ("other", "other-unrecognised-failure", "collect_more_log"),
    # an OpenAI handler built by init_app_state (serving_responses.py __init__) at start-up
    "serving_handler_init_at_startup.log": ("other", "other-non-memory-failure", "fix_environment"),
    # the tiny model's profiling lines cut away: no card it fills, so no call to shard it
    "tiny_model_no_profile_lines.log": ("no_cache_blocks", "no-cache-blocks-unmeasured", "free_gpu_memory"),
    # a relaunch pasted without its banner: a new pid of the process that failed, loading again
    "relaunch_new_pid_no_banner.log": ("healthy", "healthy", None),
    # the chat template is loaded at start-up too (a docker mount made a directory): before the
    # server says it serves, a chat_utils.py traceback is the start-up's, not a request's
    "chat_template_at_startup.log": ("other", "other-unrecognised-failure", "collect_more_log"),
    # the allocator's other NVML asserts on its OOM path are an OOM in disguise, as `== r` is
    "nvml_pcibusid_assert_oom.log": ("cuda_oom", "cuda-oom-other-phase", "lower_gpu_memory_utilization"),
    "nvml_init_assert_oom.log": ("cuda_oom", "cuda-oom-other-phase", "lower_gpu_memory_utilization"),
    # a negative KV figure is a profile that finished short, whatever a peer's Gloo error says
    "negative_kv_beside_gloo.log": (
        "no_cache_blocks",
        "no-cache-blocks-utilization-too-low",
        "raise_gpu_memory_utilization",
    ),
    # a Bus error while reading the weights from a network disk: a mapped file, not only /dev/shm
    "sigbus_weights_nfs.log": ("other", "other-environment-refused", "fix_environment"),
    # docker's json-file log: vLLM on stdout, uvicorn on stderr; the stream names no service
    "docker_json_stop.log": ("healthy", "healthy", None),
    # vLLM's own ZeroMQ socket is not the network; `KeyboardInterrupt: terminated` is a SIGTERM,
    # here while the weights load: a start-up timeout to lengthen (round 48's liveness probe)
    "zmq_sigterm.log": ("other", "other-interrupted", "fix_config"),
    # HAMi prints routine ERROR lines: only its refusal of a device is the environment
    "hami_incomplete.log": ("healthy", "healthy", None),
    # rank 0's weights are in; rank 1's OOM is its own weight loading
    "v0_tp2_rank1_load_oom.log": ("cuda_oom", "cuda-oom-weight-loading", "increase_tensor_parallel_size"),
    # a bare error above a start-up that then stalls is not that start-up's failure
    "fold_stall2.log": ("other", "start-up-stalled", "collect_more_log"),
    # a misspelt vLLM argument is a setting, not the environment
    "kwarg.log": ("other", "other-non-memory-failure", "fix_config"),
    # a Tenstorrent L1 (on-chip SRAM) buffer is not the card's memory
    "tt_l1.log": ("other", "other-unrecognised-failure", "collect_more_log"),
    # NCCL's failed CUDA call and torch's rendezvous retrying are warnings the run got past
    "nccl_warn_recovered.log": ("healthy", "healthy", None),
    "tcpstore_retry_recovered.log": ("healthy", "healthy", None),
    # ... but NCCL's own buffers out of memory at 0.98 is memory
    "nccl_warn_oom.log": ("cuda_oom", "cuda-oom-other-phase", "lower_gpu_memory_utilization"),
    # the API server polling while the engine core downloads or compiles is slow, not stalled
    "core_poll_downloading.log": ("unknown", "start-up-incomplete", "collect_more_log"),
    "core_poll_compiling.log": ("unknown", "start-up-incomplete", "collect_more_log"),
    # a fraction set low on a card another process half fills: raising it is no way out
    "max_len_low_fraction_cotenant.log": ("max_model_len_too_large", "max-model-len-too-large", "lower_max_model_len"),
    # "-step-1431k" in a model name is a training step, not a context length
    "name_step_count.log": ("cuda_oom", "cuda-oom-profile-run", "reduce_max_num_batched_tokens"),
    # a NotImplementedError naming an operator the build lacks is the install, not a setting
    "notimplemented_operator.log": ("other", "other-non-memory-failure", "fix_environment"),
    # an error the model's own code raises below a compile frame fails eager mode too: an
    # assertion in the code is versions that do not match, not the compiler
    "compile_frame_model_error.log": ("other", "other-non-memory-failure", "fix_environment"),
    # after vLLM started: vLLM's own "Engine core initialization failed" is a failure, and so is a
    # traceback of library frames only (uvicorn's bind); only the caller's own code is the caller's
    "wrapper_error_after_start.log": ("other", "other-unrecognised-failure", "collect_more_log"),
    "bind_error_after_startup_complete.log": ("other", "other-non-memory-failure", "fix_environment"),
    # a JSON record's exc_info below ERROR is a handled exception; an ERROR record's is the failure
    "json_exc_info_warning_healthy.log": ("healthy", "healthy", None),
    "json_exc_info_warning_then_error.log": ("other", "other-non-memory-failure", "fix_config"),
    # V0 with chunked prefill off (an MLA model keeps it off past 0.5.3): the length is the batch
    "v0_mla_chunked_off_profile_oom.log": ("cuda_oom", "cuda-oom-profile-run", "lower_max_model_len"),
    # a fraction set at 0.45: the weights "fill" only the share the user gave, no call to shard
    "max_len_weights_fill_low_fraction.log": (
        "max_model_len_too_large",
        "max-model-len-too-large",
        "lower_max_model_len",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_reading_does_not_misfire(name: str) -> None:
    report = diagnose(HERE / name)
    top = report.diagnoses[0]
    first = top.remedies[0].action if top.remedies else None
    assert (report.verdict, top.rule, first) == CASES[name]


def test_a_raised_fraction_leaves_room_for_one_request_at_the_length() -> None:
    # clearing the shortfall alone (0.75) leaves 12K tokens for a 32K model: the next start fails
    # on the max-len check; one request's KV at the model's own length is planned in
    top = diagnose(HERE / "raise_covers_one_request.log").diagnoses[0]
    assert (top.remedies[0].action, top.remedies[0].value) == ("raise_gpu_memory_utilization", 0.8)


def test_a_guessed_phase_rules_no_flag_out() -> None:
    # one OOM line with no step named: the weights are the likelier step (low), but a fraction is
    # not ruled out on a guess
    top = diagnose(HERE / "lone_oom_line.log").diagnoses[0]
    assert (top.rule, top.confidence) == ("cuda-oom-weight-loading", "low")
    assert "lower_gpu_memory_utilization" not in [a.action for a in top.avoid]


def test_a_raise_that_cannot_hold_one_request_leads_to_a_shorter_length_too() -> None:
    # Llama-3.1-8B at its own 131072 tokens needs ≈16 GiB of KV for one request, more than 0.95 of
    # a 24 GiB card leaves: clear the shortfall, then shorten the length (not "do not lower it")
    top = diagnose(HERE / "raise_cannot_hold_one_request.log").diagnoses[0]
    assert [(r.action, r.value) for r in top.remedies[:2]] == [
        ("raise_gpu_memory_utilization", 0.72),
        ("lower_max_model_len", None),
    ]
    assert "lower_max_model_len" not in [a.action for a in top.avoid]


def test_v0_that_refuses_a_batch_below_the_length_is_not_told_to_lower_the_batch() -> None:
    # vLLM 0.2 without chunked prefill profiles one batch of --max-model-len tokens and rejects a
    # smaller --max-num-batched-tokens: the length is the lever, not the batch
    top = diagnose(HERE / "v0_02x_batch_follows_length.log").diagnoses[0]
    actions = [r.action for r in top.remedies]
    assert "lower_max_model_len" in actions and "reduce_max_num_batched_tokens" not in actions


def test_one_request_on_v1_keeps_only_a_sliding_layers_window() -> None:
    # Gemma-3-27B at 131072 tokens: 10 full-attention layers keep the length, 52 sliding ones their
    # window; one request fits at 0.85, so no shorter length is called for
    report = diagnose(HERE / "gemma3_sliding_one_request.log")
    assert report.facts["one_request_kv_gib_estimate"] < 15
    top = report.diagnoses[0]
    assert top.remedies[0].action == "raise_gpu_memory_utilization"
    assert "lower_max_model_len" not in [r.action for r in top.remedies]


def test_a_lower_fraction_is_lower_than_the_one_set() -> None:
    # a graph-capture OOM at 0.3 (a co-located RL rollout): "lower" never means 0.5
    top = diagnose(HERE / "graph_oom_at_util03.log").diagnoses[0]
    lower = [r.value for r in top.remedies if r.action == "lower_gpu_memory_utilization"]
    assert lower and all(v < 0.3 for v in lower)


def test_max_num_seqs_already_8_is_not_halved_to_8() -> None:
    top = diagnose(HERE / "sampler_oom_max_seqs_8.log").diagnoses[0]
    assert "reduce_max_num_seqs" not in [r.action for r in top.remedies]
    assert top.remedies[0].action == "lower_gpu_memory_utilization"


def test_a_small_gap_on_a_card_whose_total_is_unprinted_keeps_raising_open() -> None:
    # 8.0 GiB needed, 6.47 GiB there at 0.92: a few points of fraction may close it on an empty
    # card, so raising is offered second and not ruled out, and the verdict is not `high`
    top = diagnose(HERE / "max_len_small_gap_card_unknown.log").diagnoses[0]
    assert top.confidence == "medium"
    assert (top.remedies[1].action, top.remedies[1].value) == ("raise_gpu_memory_utilization", 0.95)
    assert "raise_gpu_memory_utilization" not in [a.action for a in top.avoid]


def test_an_fp8_cache_that_keeps_the_length_says_so_from_the_checks_own_figure() -> None:
    # Gemma 3 27B: 13.66 GiB needed for one request, 10.41 GiB there; fp8 halves it to 6.83, and no
    # token count from a catalog that misses the sliding window is shown
    top = diagnose(HERE / "max_len_fp8_keeps_length.log").diagnoses[0]
    fp8 = next(r for r in top.remedies if r.action == "kv_cache_dtype_fp8")
    assert fp8.value is None and "6.83 GiB of the 10.41 GiB" in fp8.text
    assert "≈10.41 GiB of KV cache per GPU" not in top.explanation


def test_eager_mode_is_not_offered_where_it_is_already_on() -> None:
    top = diagnose(HERE / "no_kv_eager_already_on.log").diagnoses[0]
    assert "enforce_eager" not in [r.action for r in top.remedies]


def test_weights_loaded_by_other_data_parallel_engines_are_not_a_co_tenant_on_this_card() -> None:
    top = diagnose(HERE / "dp_free_memory_other_engines_weights.log").diagnoses[0]
    assert "starting on the same card" not in top.explanation


def test_collect_envs_absent_rocm_lines_do_not_name_amds_tool() -> None:
    # "HIP runtime version: N/A" / "ROCM used to build PyTorch: N/A" on an NVIDIA machine
    top = diagnose(HERE / "collect_env_nvidia_hip_na.log").diagnoses[0]
    text = " ".join(r.text for r in top.remedies)
    assert "nvidia-smi" in text and "amd-smi" not in text


def test_weights_held_for_the_engine_elsewhere_are_its_own_not_a_co_tenants() -> None:
    # 0.32: "(0.9, 40.1 GiB)" is the engine's budget after 31.17 GiB of externally held weights;
    # what another tenant holds is the rest (27.92 GiB), and a fraction up to the free memory and
    # those weights passes the check
    report = diagnose(HERE / "free_check_engine_budget_external_weights.log")
    top = report.diagnoses[0]
    # (weights held for this engine by its trainer: the card is shared by design, so the fraction
    # that fits leads)
    assert [(r.action, r.value) for r in top.remedies] == [
        ("lower_gpu_memory_utilization", 0.63),
        ("free_gpu_memory", 27.92),
    ]
    assert report.facts["requested_gib"] == 71.27 and report.facts["external_weights_gib"] == 31.17


def test_a_freed_card_still_needs_a_shorter_length_where_one_request_overflows_it() -> None:
    top = diagnose(HERE / "free_check_long_default_length_held.log").diagnoses[0]
    assert [(r.action, r.value) for r in top.remedies] == [("free_gpu_memory", 5.75), ("lower_max_model_len", 34064)]


def test_a_raise_on_an_old_release_plans_the_profile_the_log_does_not_print() -> None:
    # 0.4.0 prints weights and blocks only: 0.65 clears the weights' shortfall, not the profile
    # and one 4096-token request of Llama-2-7B (2 GiB of KV) beside them
    top = diagnose(HERE / "v040_util05_raise_holds_one_request.log").diagnoses[0]
    assert (top.rule, top.remedies[0].action, top.remedies[0].value) == (
        "no-cache-blocks-utilization-too-low",
        "raise_gpu_memory_utilization",
        0.71,
    )


def test_a_quotient_in_a_warning_is_not_the_max_num_seqs_setting() -> None:
    report = diagnose(HERE / "v0_mm_quotient_not_max_num_seqs.log")
    assert report.facts.get("max_num_seqs") != 32768


def test_a_per_gpu_query_with_memory_in_use_does_not_contradict_a_co_tenant() -> None:
    report = diagnose(HERE / "free_check_per_gpu_query_no_process_rows.log")
    assert not any("contradicts" in n for n in report.notes)
    assert any("names no process, but shows 19.4 GiB in use" in n for n in report.notes)
    assert "()" not in report.diagnoses[0].remedies[0].text


def test_an_oom_after_the_blocks_line_is_the_kv_allocation_not_the_profile() -> None:
    # V0's multiprocessing engine logs the OOM's message above its frames; "Memory profiling
    # takes …" began the profile, "# cuda blocks" ended it: the frames name the cache allocation
    top = diagnose(HERE / "v0_mp_engine_oom_header_kv_allocation.log").diagnoses[0]
    assert (top.klass, top.phase) == ("cuda_oom", "kv_cache_allocation")


def test_weights_that_fit_at_a_higher_fraction_are_not_told_to_shard() -> None:
    # 70B bf16 over two H100s (≈65.7 GiB per GPU, an estimate) at 0.85: 0.94 holds the weights,
    # the profile and one request; sharding to four GPUs is not the way
    top = diagnose(HERE / "unmeasured_70b_tp2_fits_at_higher_fraction.log").diagnoses[0]
    actions = [(r.action, r.value) for r in top.remedies]
    # (three points above the estimated minimum, 0.94, at most 0.95)
    assert ("raise_gpu_memory_utilization", 0.95) in actions
    assert "increase_tensor_parallel_size" not in [a for a, _ in actions]


def test_a_manifests_flow_sequence_argv_and_node_label_are_read() -> None:
    report = diagnose(HERE / "k8s_yaml_flow_args_h200_label.log")
    assert (report.facts["model"], report.facts["gpu_name"]) == ("Qwen/Qwen2.5-72B-Instruct", "H200")
    top = report.diagnoses[0]
    assert (top.rule, top.remedies[0].action, top.remedies[0].value) == (
        "no-cache-blocks-model-too-large",
        "increase_tensor_parallel_size",
        2,
    )


def test_a_compose_folded_command_and_collect_envs_version_are_read() -> None:
    facts = diagnose(HERE / "compose_folded_command_collect_env_version.log").facts
    assert (facts["model"], facts["tensor_parallel_size"], facts["vllm_version"]) == (
        "meta-llama/Llama-3.1-70B-Instruct",
        2,
        "0.11.0",
    )


def test_a_tickets_gpu_colon_line_names_the_card() -> None:
    assert diagnose(HERE / "slack_gpu_colon_name.log").facts["total_gpu_gib"] == 79.15


def test_a_healthy_start_up_is_high_only_on_the_servers_own_word_with_nothing_before_it() -> None:
    # "Application startup complete" from the server, the KV cache sized, nothing failed: high
    assert diagnose(HERE / "healthy_served_not_enough_sms.log").diagnoses[0].confidence == "high"
    # a relaunch after a failed start-up: the failure may be what the reader came with
    relaunch = diagnose(HERE / "healthy_relaunch_after_max_len.log")
    assert (relaunch.verdict, relaunch.diagnoses[0].confidence) == ("healthy", "medium")


def test_a_4bit_checkpoint_is_not_told_to_serve_a_4bit_checkpoint() -> None:
    top = diagnose(HERE / "awq_model_too_large_no_awq_suggestion.log").diagnoses[0]
    assert top.rule == "no-cache-blocks-model-too-large"
    # (a smaller checkpoint is still named, as a smaller model or a bigger card: never 4-bit again)
    smaller = [r.text for r in top.remedies if r.action == "use_quantized_checkpoint"]
    assert all("already 4-bit" in t and "AWQ/GPTQ" not in t for t in smaller)


def test_a_v0_length_cut_below_32k_keeps_chunked_prefill_on() -> None:
    top = diagnose(HERE / "v0_len_below_32k_keeps_chunked_prefill.log").diagnoses[0]
    assert (top.remedies[0].action, top.remedies[0].value) == ("lower_max_model_len", 31488)
    assert "--enable-chunked-prefill" in top.remedies[0].text


def test_an_indented_nvidia_smi_table_is_read() -> None:
    # a markdown code block indents the table: its borders are not a container's prefix
    top = diagnose(HERE / "indented_nvidia_smi_table_cotenant.log").diagnoses[0]
    assert (top.rule, top.remedies[0].action, top.remedies[0].value) == (
        "no-cache-blocks-other-process",
        "free_gpu_memory",
        7.06,
    )


def test_jq_argv_and_a_node_labels_value_are_read() -> None:
    # `kubectl … -o jsonpath='{…args}' | jq .` prints the argv one item per line; the node
    # label's value stands alone on its line
    facts = diagnose(HERE / "v092_jq_argv_node_label_no_cache_blocks.txt").facts
    assert (facts["model"], facts["tensor_parallel_size"], facts["gpu_memory_utilization"]) == (
        "mistralai/Mixtral-8x22B-Instruct-v0.1",
        4,
        0.85,
    )
    assert facts["gpu_name"] == "A100-SXM4-80GB"
    top = diagnose(HERE / "v092_jq_argv_node_label_no_cache_blocks.txt").diagnoses[0]
    # (a tenant comes after the arithmetic, and only as one that started during profiling)
    actions = [r.action for r in top.remedies]
    assert actions.index("raise_gpu_memory_utilization") < actions.index("free_gpu_memory")
    assert "while vLLM profiled" in top.explanation


def test_a_mig_slice_is_the_total_and_no_remedy_shards_it() -> None:
    # `nvidia-smi -L` lists "MIG 1g.10gb Device 0": one process sees one slice
    top = diagnose(HERE / "mig_1g10gb_weights_oom_no_tp.log").diagnoses[0]
    assert [r.action for r in top.remedies][0] == "use_quantized_checkpoint"
    assert "increase_tensor_parallel_size" not in [r.action for r in top.remedies]
    report = diagnose(HERE / "mig_3g40gb_no_cache_blocks_slice_total.log")
    assert report.facts["total_gpu_gib"] == 39.25
    # (0.40 of the 80 GB card's total leaves the request short on the 39 GiB slice)
    assert report.diagnoses[0].remedies[0].value >= 0.42


def test_a_release_that_charges_co_tenants_may_raise_the_fraction_for_both() -> None:
    # 0.6.4.post1 counts the desktop's 3 GiB inside the fraction the user set to 0.8 to share the
    # card: raising it to the share plus the desktop's is no OOM risk there, and keeps both (the
    # desktop's share is what nvidia-smi showed in use before the launch: 3287 MiB, 3.21 GiB)
    top = diagnose(HERE / "v0641_desktop_charged_raise_is_safe.log").diagnoses[0]
    assert [(r.action, r.value) for r in top.remedies][:2] == [
        ("raise_gpu_memory_utilization", 0.94),
        ("free_gpu_memory", 3.21),
    ]
    assert "raise_gpu_memory_utilization" not in [a.action for a in top.avoid]


def test_the_cpu_backends_kv_space_is_its_own_action_in_gib() -> None:
    # a JSON client must not read VLLM_CPU_KVCACHE_SPACE=11 as --gpu-memory-utilization 11
    top = diagnose(HERE / "cpu_node_kv_space_action.log").diagnoses[0]
    assert (top.remedies[0].action, top.remedies[0].value) == ("lower_cpu_kv_cache_space", 11)


def test_a_gguf_files_block_format_sets_its_weights() -> None:
    from kvdoctor.memory.catalog import quantization_from_name

    assert quantization_from_name("/models/gguf/Qwen2.5-32B-Instruct-Q4_K_M.gguf") == "gguf_q4_k_m"
    assert quantization_from_name("TheBloke/Mixtral-8x7B-v0.1-GGUF:Q5_K_S") == "gguf_q5_k_s"
    facts = diagnose(HERE / "gguf_q4km_4090_util08_no_cache_blocks.txt").facts
    # (32.8B parameters at 4.83 bits: the 19.85 GB file, ≈18 GiB, not 61 GiB of bf16)
    assert 17 < facts["weights_gib_estimate"] < 19.5
    assert facts["total_gpu_gib"] == 23.64  # "my 4090 box"


def test_one_card_named_two_ways_is_not_two_cards() -> None:
    # "V100" beside "V100 32GB", "RTX3090" beside "RTX 3090": one card, and no total from a mix
    validation = HERE.parent / "validation"
    for log in (
        validation / "round32-c" / "4900-v0-083-slurm-v100-opt-6.7b-draft-spec-decode-healthy.log",
        validation / "round34-j" / "5385-v1-027-qwen38-27b-w4a16-rtx3090-wsl-marlin-weights-oom.log",
    ):
        assert "mixed_gpus" not in diagnose(log).facts, log.name


def test_no_remedy_repeats_a_step_or_suggests_the_tp_already_running() -> None:
    # the hybrid max-len log: two of the rule's raise entries apply with the same value (shown
    # once); the big-batch one runs at TP 1, where "tensor parallel 1" is no change
    for name in (
        "v011_hybrid_maxlen_no_estimate_no_length_fits.log",
        "maxlen_user_batched_65536_hybrid_a_little_short.log",
    ):
        top = diagnose(HERE / name).diagnoses[0]
        steps = [(r.action, r.value) for r in top.remedies]
        assert len(steps) == len(set(steps)), name
        assert ("increase_tensor_parallel_size", 1) not in steps, name


def test_an_fp8_checkpoint_is_told_the_4bit_size() -> None:
    # DeepSeek-R1 is FP8 already: the smaller checkpoint is a 4-bit one, and its size is named
    variants = HERE.parent / "variants" / "round40-i"
    top = diagnose(variants / "i05-v1-092-8xh100-deepseek-r1-fp8-tp8-weights-exceed-node-load-oom.log").diagnoses[0]
    smaller = next(r for r in top.remedies if r.action == "use_quantized_checkpoint")
    assert "4-bit ≈" in smaller.text and "fp8 ≈" not in smaller.text


def test_two_different_cards_are_not_read_as_a_co_tenant() -> None:
    # "Box: RTX 4090 (GPU 0) + RTX 3080 10GB (GPU 1)": ranks 12 GiB apart are the cards' sizes
    report = diagnose(
        HERE.parent
        / "variants"
        / "round39-b"
        / "b15-v1-0110-forum-tp2-4090-plus-3080-10g-qwen25-32b-awq-smallest-rank-negative.txt"
    )
    assert report.facts["mixed_gpus"] == "3080, 4090"
    assert report.diagnoses[0].cause != "other_process"
    # (the 3080 is not in the catalog: no total is taken from the larger card)
    assert "total_gpu_gib" not in report.facts


def test_a_negative_kv_with_printed_weights_bounds_the_card_and_the_fraction() -> None:
    # 61.03 GiB of weights and -0.47 GiB of KV at 0.8, no total: the card has at least 75.7 GiB,
    # and over that bound 0.92 clears the shortfall and one 32768-token request (8 GiB); vLLM's
    # default 0.9 would not
    report = diagnose(HERE / "v011_negative_kv_weights_no_total_raise_bound.log")
    assert report.facts["total_gpu_gib_at_least"] == 75.7
    top = report.diagnoses[0]
    assert (top.remedies[0].action, top.remedies[0].value) == ("raise_gpu_memory_utilization", 0.92)


def test_a_kv_size_copied_from_a_bigger_card_is_told_a_size_that_fits_this_one() -> None:
    # --kv-cache-memory-bytes 58212392894 (an H100's suggestion) on a 44.42 GiB L40S at 0.85:
    # vLLM skipped the profile that prints the size that fits, so kvdoctor estimates it from the
    # fraction in force less the 15.27 GiB of weights and the overheads, and says it estimated
    variants = HERE.parent / "variants" / "round42-t"
    top = diagnose(
        variants / "t01-v1-0120-issue-kv-cache-memory-bytes-copied-from-h100-onto-l40s-kv-alloc-oom.md"
    ).diagnoses[0]
    assert "58212392894 bytes" in top.explanation  # (the flag's own value, not the rounded GiB)
    first = top.remedies[0]
    assert first.action == "set_kv_cache_memory_bytes" and "estimate" in first.text
    # what fits by the log's own figures: below 0.85 × 44.42 − 15.27 = 22.49 GiB, above half of it
    assert 11 * 2**30 < float(first.value) < (0.85 * 44.42 - 15.27) * 2**30
    assert "lower_gpu_memory_utilization" in [a.action for a in top.avoid]


VARIANTS = HERE.parent / "variants"
S01 = "s01-v1-0111-lora-8-slots-rank128-l4-weights-line-inflated-no-cache.log"
S04 = "s04-v1-0130-ticket-gemma3-27b-disable-hybrid-kv-manager-all-layers-full-maxlen.md"
S08 = "s08-v1-0110-k8s-qwen3-next-80b-fp8-hybrid-block544-one-h100-negative-kv.log"
S10 = "s10-v0-064p1-mllama-11b-vision-h100-256-seqs-image-profile-peak-no-blocks.log"
S12 = "s12-v1-01011-qwen3-embedding-8b-h100-util098-pooler-warmup-oom.log"
U02 = "u02-v1-01011-ticket-a6000x2-plus-a4000-cuda-device-order-rank1-lands-on-16g-weights-oom.md"
P09 = "p09-v0-0641p1-4090-desktop-llama31-8b-lora-16x-rank64-no-blocks-xorg-580mib-nvidia-smi.txt"
V07 = "v07-v1-0130-compose-2x3090-qwen25-32b-bf16-tp2-oom-no-phase.md"


def test_a_co_tenant_on_one_of_several_gpus_is_told_the_idle_ones() -> None:
    # nvidia-smi before the launch: GPU 2 holds a 30.5 GiB trainer, GPUs 4-7 hold nothing; the
    # launch pins TP 4 to 0-3 and the OOM names GPU 2: the snapshot is read for GPU 2, and the
    # four idle GPUs (those the launch named first) are where the server can run at its fraction
    report = diagnose(
        VARIANTS
        / "round43-u"
        / "u07-v0-0631p1-8xa100-80-cvd-0-3-tp4-llama31-70b-gpu2-trainer-uncounted-kv-alloc-oom.log"
    )
    assert report.facts["gpu.device_index"] == 2
    assert "gpu_name" not in report.facts  # (the CSV query had no name column: "unknown" is no card)
    first = report.diagnoses[0].remedies[0]
    assert (first.action, first.value) == ("fix_config", "0,1,3,4")
    assert "CUDA_VISIBLE_DEVICES=0,1,3,4" in first.text


def test_nvidia_smi_run_before_the_launch_shows_the_co_tenant_it_lists_by_bus_id() -> None:
    # 0.2.7, TP 4 on four 40 GB cards, GPU 1 at 2687 MiB before the launch, 0 blocks; the
    # headerless query and its row must not be glued together, nor the next shell prompt read as
    # a CSV row: the notebook kernel (pid 58231) is named and freeing it leads
    report = diagnose(
        VARIANTS / "round43-u" / "u09-v0-027-ray-tp4-4xa100-40-llama2-70b-gpu1-kernel-2g6-global-budget-zero-blocks.log"
    )
    top = report.diagnoses[0]
    assert (top.rule, top.confidence) == ("no-cache-blocks-other-process", "high")
    assert top.remedies[0].action == "free_gpu_memory" and "58231" in top.remedies[0].text


def test_a_max_len_failure_beside_a_charged_co_tenant_frees_the_card_before_shortening() -> None:
    # V1 0.8.5 charges other processes: a 27.4 GiB notebook on GPU 3 is what rank 3's cache
    # lacks (10.0 GiB needed, 8.92 there), so freeing it keeps the 131072 tokens asked for
    report = diagnose(
        VARIANTS / "round43-u" / "u01-v1-085-tp4-4xa100-80-llama33-70b-gpu3-notebook-counted-rank3-maxlen.log"
    )
    top = report.diagnoses[0]
    assert top.klass == "max_model_len_too_large" and top.confidence == "medium"
    assert [r.action for r in top.remedies[:2]] == ["free_gpu_memory", "lower_max_model_len"]
    assert "2290417" in top.remedies[0].text


def test_a_test_that_fails_on_a_reply_after_the_server_served_is_not_a_start_up_failure() -> None:
    # a CI job: the server reached "Application startup complete." and answered /health, then
    # pytest's assertion on a reply failed ("E   AssertionError: …", "FAILED tests/…::test_x - …")
    report = diagnose(
        VARIANTS / "round43-v" / "v11-v1-0240-gha-l4-llama32-3b-tail15-healthy-then-test-assert-fails.log"
    )
    assert report.verdict == "healthy"
    assert report.facts["failed_while_serving"] == "a test run against the server"


def test_ipython7_frames_name_the_step_of_a_chained_traceback() -> None:
    # "…/gpu_model_runner.py in _dummy_sampler_run(self, hidden_states)": the OOM's own frames put
    # it in the sampler warm-up, after "Graph capturing finished", not in the capture
    report = diagnose(
        VARIANTS / "round43-r" / "r10-v1-01011-jupyter-ipython7-h100-qwen3-8b-util097-sampler-warmup-oom-chained.txt"
    )
    top = report.diagnoses[0]
    assert (top.rule, top.phase) == ("cuda-oom-sampler-warmup", "sampler_warmup")


def test_lora_slots_that_take_the_kv_cache_are_cut_before_any_sharding() -> None:
    # 8 slots × rank 128 on Llama-3.1-8B: ≈5.0 GiB of adapter slots per GPU (V1's weights line
    # reads 19.99 GiB against 14.99 of weights); two slots leave one request its KV cache
    top = diagnose(VARIANTS / "round43-s" / S01).diagnoses[0]
    first = top.remedies[0]
    assert (first.action, first.value) == ("fix_config", 2)
    assert "--max-loras 2" in first.text and "5.0 GiB" in first.text


def test_v0_lora_slots_are_this_instances_memory_not_a_co_tenants() -> None:
    # 0.6.4 measures the memory in use after the LoRA slots are made: 6.5 GiB "before the profile"
    # is the slots' 5 GiB and a desktop's half GiB, not another process to stop
    top = diagnose(HERE.parent / "variants" / "round41-p" / P09).diagnoses[0]
    assert top.cause != "other_process"
    assert top.remedies[0].action == "fix_config" and "--max-loras" in top.remedies[0].text


def test_the_hybrid_managers_flag_that_keeps_sliding_layers_whole_is_named() -> None:
    # Gemma-3-27B with --disable-hybrid-kv-cache-manager: 62 GiB for one 131072-token request, the
    # sliding layers' window only with the manager back, which fits the 16.97 GiB there
    top = diagnose(VARIANTS / "round43-s" / S04).diagnoses[0]
    assert top.remedies[0].action == "fix_config"
    assert "--disable-hybrid-kv-cache-manager" in top.remedies[0].text
    assert top.remedies[1].action == "lower_max_model_len"


def test_an_encoder_decoder_v0_profile_is_cut_by_its_sequences_not_a_refused_batch() -> None:
    # mllama on V0 0.6.4 at --max-model-len 8192, chunked prefill off: a batch of 2048 is refused
    # below the length (and encoder-decoder models have no chunked prefill), so fewer sequences lead
    top = diagnose(VARIANTS / "round43-s" / S10).diagnoses[0]
    assert top.remedies[0].action == "reduce_max_num_seqs"
    assert not any("--max-num-batched-tokens 2048" in r.text for r in top.remedies)


def test_a_fraction_the_reporter_only_plans_or_asks_about_is_not_this_runs() -> None:
    # "Plan was to set --gpu-memory-utilization 0.99 next." below the log; "Should I set
    # gpu_memory_utilization=0.99?" below another: the fraction in force is vLLM's default
    assert diagnose(VARIANTS / "round43-s" / S08).facts["gpu_memory_utilization"] == 0.9
    f03 = (
        HERE.parent
        / "variants"
        / "round39-f"
        / "f03-v1-085-forum-a100-40-llama33-70b-bnb4bit-llm-already-4bit-no-cache.md"
    )
    report = diagnose(f03)
    assert report.facts["gpu_memory_utilization"] == 0.9
    # (the LLM( call's keyword arguments, one per line, name the model: its 4-bit 70B fills the card)
    assert report.facts["model"] == "unsloth/Llama-3.3-70B-Instruct-bnb-4bit"
    assert report.diagnoses[0].remedies[0].action == "increase_tensor_parallel_size"


def test_a_compose_command_written_as_a_flow_sequence_is_read() -> None:
    # command: ["--model", "Qwen/Qwen2.5-32B-Instruct", "--tensor-parallel-size", "2", …] over
    # four lines, and a question below the log ("or use `--max-model-len 8192`?") that is not the run
    report = diagnose(VARIANTS / "round43-v" / V07)
    facts = report.facts
    assert (facts["model"], facts["tensor_parallel_size"], facts["max_model_len"]) == (
        "Qwen/Qwen2.5-32B-Instruct",
        2,
        16384,
    )


def test_an_embedding_models_pooler_warm_up_at_098_gives_the_fraction_back() -> None:
    # "CUDA out of memory occurred when warming up pooler (task='embed') with 1024 dummy requests"
    # at 0.98: no sampler logits to cut; the fraction left almost nothing outside the budget
    top = diagnose(VARIANTS / "round43-s" / S12).diagnoses[0]
    assert "pooler" in top.title and "sampler" not in top.title
    assert (top.remedies[0].action, top.remedies[0].value) == ("lower_gpu_memory_utilization", 0.9)


def test_an_oom_on_a_card_the_launch_did_not_name_is_cudas_device_order() -> None:
    # CUDA_VISIBLE_DEVICES=1,2 meant the two 48 GB A6000s nvidia-smi lists as 1 and 2; the OOM's
    # "total capacity of 15.61 GiB" is the A4000 (GPU 0 by PCI bus): CUDA numbered fastest first
    top = diagnose(VARIANTS / "round43-u" / U02).diagnoses[0]
    assert top.rule == "cuda-oom-device-order"
    assert top.remedies[0].action == "fix_environment" and "CUDA_DEVICE_ORDER=PCI_BUS_ID" in top.remedies[0].text
    assert "RTX A4000" in top.explanation


CUT_FRAME_027 = """\
I cannot load the model, the error message is below:
vllm-0.2.7+cu123-py3.10-linux-x86_64.egg/vllm/model_executor/layers/activation.py", line 35, in forward
    out = torch.empty(output_shape, dtype=x.dtype, device=x.device)
torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB. GPU 0 has a total capacty of 23.64 GiB of which 950.44 MiB is free. Including non-PyTorch memory, this process has 22.30 GiB memory in use. Of the allocated memory 19.44 GiB is allocated by PyTorch, and 2.51 GiB is reserved by PyTorch but unallocated.
"""


def test_a_frame_cut_before_file_names_the_forward_pass_and_its_release() -> None:
    # the paste starts mid-line: the layer's forward is the profiling pass, and the egg's folder
    # dates it to 0.2.7, before chunked prefill: V0 profiles the whole length and refuses a
    # smaller batch, so the length is what shrinks the pass
    report = diagnose(CUT_FRAME_027)
    assert report.facts["vllm_version"] == "0.2.7+cu123" and report.facts["engine"] == "v0"
    top = report.diagnoses[0]
    assert (top.rule, top.phase) == ("cuda-oom-profile-run", "profile_run")
    assert top.remedies[0].action == "lower_max_model_len"


def test_one_allocation_of_gibs_is_not_read_as_a_weight_tensor() -> None:
    # nothing after the weights was reached, but 9.25 GiB in one request is no layer's weights:
    # the step stays unknown, and sharding is not the answer
    text = (
        "python -m vllm.entrypoints.openai.api_server --model /model/Qwen2-7B\n"
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 9.25 GiB. GPU 0 has a total "
        "capacity of 23.64 GiB of which 3.1 GiB is free. Including non-PyTorch memory, this process has "
        "20.5 GiB memory in use.\n"
    )
    top = diagnose(text).diagnoses[0]
    assert top.phase != "weight_loading"
    assert top.remedies[0].action != "increase_tensor_parallel_size"


def test_zero_bytes_in_use_beside_gibs_allocated_is_not_an_empty_process() -> None:
    # inside a container NVML cannot see the process: "this process has 0 bytes memory in use"
    # while PyTorch allocated 77.67 GiB of it
    text = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 896.00 MiB. GPU 4 has a total capacity "
        "of 79.25 GiB of which 768.00 KiB is free. Including non-PyTorch memory, this process has 0 bytes "
        "memory in use. Of the allocated memory 77.67 GiB is allocated by PyTorch, and 150.52 MiB is "
        "reserved by PyTorch but unallocated.\n"
    )
    facts = diagnose(text).facts
    assert "oom_this_process_gib" not in facts and facts["oom_allocated_gib"] == 77.67


def test_a_launch_written_as_a_comment_below_the_log_is_that_runs_note() -> None:
    # "# ExecStart=… vllm serve … --gpu-memory-utilization 0.95" under a journal: no second
    # start-up, and its fraction is the run's (0.95 before 0.20 leaves the graphs ~1 GiB)
    report = diagnose(
        VARIANTS
        / "round45-w"
        / "w07-v0-063p1-journalctl-4090-llama31-8b-util095-capture-oom-lines-chopped-at-width.log"
    )
    assert len(report.attempts) == 1
    assert report.facts["gpu_memory_utilization"] == 0.95
    assert report.diagnoses[0].remedies[0].action == "lower_gpu_memory_utilization"


def test_an_argument_dump_with_elisions_is_read_past_them() -> None:
    # "args: Namespace(…, max_model_len=65536, … enable_chunked_prefill=False, …)": V0 profiles
    # the whole 65536 tokens and refuses a smaller batch, so the length comes first
    report = diagnose(
        VARIANTS / "round45-x" / "x09-v0-063p1-journald-a10g-llama31-8b-len65536-no-chunked-profile-oom.log"
    )
    assert report.facts["enable_chunked_prefill"] is False and report.facts["max_num_seqs"] == 256
    assert report.diagnoses[0].remedies[0].action == "lower_max_model_len"


def test_memory_held_at_start_up_inside_a_test_session_is_a_leaked_engine() -> None:
    # "FAILED tests/…::test_x - ValueError: Free memory on device cuda:0 (4.51/22.05 GiB) …" at
    # 0.47: not two tenants sharing by plan, an earlier test's engine still on the card
    text = (
        "FAILED v1/kv_connector/unit/test_nixl_connector_hma.py::test_fewer_blocks_with_hma[m] - ValueError: "
        "Free memory on device cuda:0 (4.51/22.05 GiB) on startup is less than desired GPU memory utilization "
        "(0.47, 10.36 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.\n"
    )
    top = diagnose(text).diagnoses[0]
    assert top.remedies[0].action == "free_gpu_memory" and "test session" in top.remedies[0].text


def test_rays_dedup_echo_of_a_sibling_engine_is_not_a_relaunch() -> None:
    # "(EngineCore pid=40793) … Available KV cache memory: -2.84 GiB [repeated 3x across cluster]":
    # the other actors' engines at the same step, so the run's own fraction (0.3) stays in force
    report = diagnose(
        VARIANTS / "round45-u" / "u10-v1-0220-skyrl-colocate-all-l40s-qwen25-7b-generator-util03-negative-kv.log"
    )
    assert len(report.attempts) == 1
    assert report.facts["gpu_memory_utilization"] == 0.3
    assert report.diagnoses[0].remedies[0].action == "raise_gpu_memory_utilization"


def test_a_trainer_holding_the_card_as_verls_rollout_is_built_is_offloaded_first() -> None:
    # "Before building vllm rollout, memory allocated (GB): 41.31, memory reserved (GB): 42.12" on
    # 0.8.4, which counts the process's own tensors against the rollout's fraction
    report = diagnose(
        VARIANTS
        / "round45-u"
        / "u04-v1-084-verl-grpo-2xh100-qwen25-14b-fsdp-no-offload-in-process-counted-no-cache.log"
    )
    assert report.facts["trainer_held_gib"] == 42.12
    first = report.diagnoses[0].remedies[0]
    assert first.action == "fix_config" and "param_offload=True" in first.text


def test_a_length_that_fits_fits_the_smallest_pipeline_stage() -> None:
    # the check quotes the first stage (5.51 GiB, estimate 72208); the second printed 5.08 GiB
    report = diagnose(
        VARIANTS
        / "round45-y"
        / "y07-v1-0141-lws-2pods-2xl40s-tp2-pp2-llama31-70b-maxlen-error-cites-pp0-but-pp1-smaller.txt"
    )
    first = report.diagnoses[0].remedies[0]
    assert first.action == "lower_max_model_len" and first.value <= int(72208 * 5.08 / 5.51)


def test_metals_insufficient_memory_is_an_out_of_memory_error() -> None:
    text = (
        "libc++abi: terminating due to uncaught exception of type std::runtime_error: [METAL] Command buffer "
        "execution failed: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)\n"
    )
    assert diagnose(text).verdict == "cuda_oom"


def test_the_driver_apis_out_of_memory_is_an_out_of_memory_error() -> None:
    # "RuntimeError: CUDA driver error: out of memory" from a custom op, not a driver to fix
    text = "(EngineCore pid=74) ERROR 05-07 00:37:03 [core.py:1136] RuntimeError: CUDA driver error: out of memory\n"
    assert diagnose(text).verdict == "cuda_oom"


def _first_remedy(folder: str, name: str):  # type: ignore[no-untyped-def]
    """The first remedy of a kept variant's top diagnosis."""
    return diagnose(VARIANTS / folder / name).diagnoses[0].remedies[0]


def test_a_fraction_set_below_the_default_that_would_hold_the_length_is_raised_first() -> None:
    # 0.82 on an empty L40S, 27424 tokens for a 32768 length: the default 0.9 holds ≈46K
    report = diagnose(
        VARIANTS / "round45-s" / "s02-v0-0661-l40s-qwen25-14b-util082-len32768-profile-block-27424-tokens-maxlen.log"
    )
    first = report.diagnoses[0].remedies[0]
    assert (first.action, first.value) == ("raise_gpu_memory_utilization", 0.9)
    assert report.facts["max_model_len_at_default_utilization"] >= 32768


def test_vllm_mla_disable_left_in_the_environment_is_the_fix_for_an_mla_models_short_cache() -> None:
    first = _first_remedy(
        "round45-s", "s08-v0-073-compose-a100-80-deepseek-v2-lite-vllm-mla-disable-1-mha-sized-kv-163840-maxlen.txt"
    )
    assert first.action == "fix_environment" and "VLLM_MLA_DISABLE" in first.text


def test_a_blocks_override_above_what_fits_is_dropped_not_the_fraction() -> None:
    first = _first_remedy("round45-t", "t09-v0-042-kubectl-l4-llama3-8b-num-gpu-blocks-override-4096-kv-alloc-oom.txt")
    assert (first.action, first.value) == ("fix_config", 1735)


def test_a_length_above_the_models_own_names_that_length() -> None:
    report = diagnose(
        VARIANTS / "round45-t" / "t12-v0-026-issue-tgi-habit-max-model-len-8192-llama2-13b-derived-4096.md"
    )
    first = report.diagnoses[0].remedies[0]
    assert (first.action, first.value) == ("fix_config", 4096) and "--max-model-len" in first.text


def test_a_fraction_given_as_a_percentage_is_rewritten_not_avoided() -> None:
    report = diagnose(
        VARIANTS / "round45-p" / "p12-v0-073-helm-vllm-stack-gpumemutil-90-percent-rejected-a10g-mistral7b.md"
    )
    top = report.diagnoses[0]
    assert top.remedies[0].action == "fix_config" and "0.9" in top.remedies[0].text
    assert "lower_gpu_memory_utilization" not in {a.action for a in top.avoid}


def test_an_already_4bit_checkpoint_on_one_card_needs_more_memory_not_eager_mode() -> None:
    first = _first_remedy("round45-q", "q03-v1-085-issue-a100-40g-llama31-70b-awq-weights-exceed-budget-no-blocks.md")
    assert first.action == "use_quantized_checkpoint"


def test_a_tickets_environment_list_states_the_release() -> None:
    assert diagnose("**vLLM**: 0.2.4 (pip), torch 2.1.1, CUDA 12.1\n").facts["vllm_version"] == "0.2.4"


def test_two_nvidia_smi_queries_on_one_prompt_are_both_read() -> None:
    text = (
        "$ nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv,noheader ; "
        "nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv,noheader\n"
        "0, 73208 MiB, 81559 MiB\n"
        "1, 1 MiB, 81559 MiB\n"
        "GPU-3f1c9a2e-7d41-08b5-c6e2-51a0f9d3b7c4, 61020, python3, 73196 MiB\n"
        "ValueError: Free memory on device cuda:0 (7.97/79.65 GiB) on startup is less than desired GPU memory "
        "utilization (0.9, 71.69 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.\n"
    )
    facts = diagnose(text).facts
    assert facts["gpu.count"] == 2 and facts["gpu.other_pids"] == [61020]


def test_kubectl_describes_args_one_per_line_are_the_launch() -> None:
    text = (
        "    Args:\n      --model\n      Qwen/Qwen2.5-3B-Instruct\n      --gpu-memory-utilization\n      0.4\n"
        "    State:          Waiting\n"
        "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
        "initializing the engine.\n"
    )
    facts = diagnose(text).facts
    assert (facts["model"], facts["gpu_memory_utilization"]) == ("Qwen/Qwen2.5-3B-Instruct", 0.4)


def test_an_oom_message_repeated_by_a_wrapper_counts_each_process_once() -> None:
    message = (
        "CUDA out of memory. Tried to allocate 224.00 MiB. GPU 0 has a total capacity of 23.58 GiB of which "
        "112.00 MiB is free. Process 20117 has 2.71 GiB memory in use. Process 20244 has 2.38 GiB memory in use. "
        "Including non-PyTorch memory, this process has 18.36 GiB memory in use."
    )
    text = f"2024-06-01 10:00:00 xinference ERROR Leave launch_builtin_model, error: {message} {message}\n"
    assert diagnose(text).facts["oom_other_process_gib"] == 5.09


def test_an_oom_held_by_an_earlier_start_ups_own_engine_says_to_stop_it_first() -> None:
    # "Started engine process with PID 23311" in the first run, then "Process 23311 has 38.71 GiB"
    report = diagnose(VARIANTS / "round45-i" / "i05-v0-063p1-relaunch-after-healthy-orphan-engine-kv-alloc-oom.log")
    assert report.facts["oom_holder_earlier_start"] == 23311
    assert report.diagnoses[0].remedies[0].action == "free_gpu_memory"


def test_the_cpu_swaps_code_line_names_pinned_host_memory() -> None:
    report = diagnose(
        VARIANTS
        / "round45-k"
        / "k01-v0-040p1-docker-a100-40-mistral7b-swap-space-48-pinned-cpu-cache-cuda-error-oom.log"
    )
    top = report.diagnoses[0]
    assert top.rule == "cuda-oom-cpu-swap" and top.remedies[0].action == "fix_config"


def test_cpu_offload_is_counted_per_rank_in_the_hosts_ram() -> None:
    report = diagnose(
        VARIANTS
        / "round45-k"
        / "k07-v1-0160-2xl40s-tp2-llama33-70b-cpu-offload-40-per-rank-80g-pinned-64g-host-worker-tp1-oom-killed.log"
    )
    assert report.facts["cpu_offload_host_gib"] == 80.0
    assert "80.0 GiB" in report.diagnoses[0].remedies[0].text


def test_a_prompt_that_only_mentions_a_query_after_a_semicolon_does_not_crash() -> None:
    assert diagnose("$ nvidia-smi; echo --query-gpu=memory.used\n").verdict == "unknown"


@pytest.mark.parametrize(
    ("prose", "card_gib"),
    [
        ("Running on our A10G (24GB) instance on AWS.", 22.05),
        ("Environment: 8*H800, CUDA 12.4", 79.22),
        ("机器是 2张4090，vllm 0.8.5", 23.64),
        ("单卡A100 40G 部署 Qwen2.5-14B", 39.39),
        ("显卡：RTX 3090", 23.58),
        ("GPU: Tesla V100S-PCIE-32GB", 31.74),
        ("on 8x A800 80G with TP=8", 79.25),
    ],
)
def test_a_card_named_in_a_reports_prose_sizes_the_budget(prose: str, card_gib: float) -> None:
    log = (
        f"{prose}\n"
        "ERROR 05-01 10:00:09 [core.py:390] ValueError: No available memory for the cache blocks. "
        "Try increasing `gpu_memory_utilization` when initializing the engine.\n"
    )
    facts = diagnose(log).facts
    assert facts["total_gpu_gib"] == card_gib


def test_a_v0_multimodal_profile_that_fills_the_budget_keeps_the_length_with_fewer_sequences() -> None:
    # LLaVA-NeXT on V0 0.6.x: the profile ran 256 sequences with a dummy image each; the peak took
    # 30 of the 71 GiB and one 32K request lacks ≈2 GiB, so fewer sequences keep the length
    log = "\n".join(
        [
            "INFO 10-21 09:12:01 api_server.py:528] vLLM API server version 0.6.3",
            "INFO 10-21 09:12:01 api_server.py:529] args: Namespace(model='llava-hf/llava-v1.6-mistral-7b-hf', "
            "max_model_len=32768, gpu_memory_utilization=0.9, max_num_seqs=256)",
            "INFO 10-21 09:12:40 model_runner.py:1067] Loading model weights took 14.0712 GB",
            "INFO 10-21 09:13:02 worker.py:262] the current vLLM instance can use total_gpu_memory (79.22GiB) x "
            "gpu_memory_utilization (0.90) = 71.30GiB",
            "INFO 10-21 09:13:02 worker.py:262] model weights take 14.07GiB; non_torch_memory takes 0.16GiB; "
            "PyTorch activation peak memory takes 55.11GiB; the rest of the memory reserved for KV Cache is 1.96GiB.",
            "INFO 10-21 09:13:02 gpu_executor.py:122] # GPU blocks: 1003, # CPU blocks: 2048",
            "ERROR 10-21 09:13:02 engine.py:160] ValueError: The model's max seq len (32768) is larger than the "
            "maximum number of tokens that can be stored in KV cache (16048). Try increasing `gpu_memory_utilization` "
            "or decreasing `max_model_len` when initializing the engine.",
        ]
    )
    top = diagnose(log + "\n").diagnoses[0]
    assert top.klass == "max_model_len_too_large" and top.confidence == "medium"
    first = top.remedies[0]
    # a gap of 1.96 × 32768 / 16048 - 1.96 ≈ 2.04 GiB: 256 × (55.11 - 2.04 - 1) / 55.11 → 240
    assert (first.action, first.value) == ("reduce_max_num_seqs", 240)
    assert top.remedies[1].action == "lower_max_model_len"


def test_an_access_log_line_after_the_engines_traceback_is_not_the_message_nor_serving() -> None:
    # FastChat's Flask front end answers 500 once the engine under it failed to start: that line
    # is no part of the exception above it, and no sign that vLLM served
    log = "\n".join(
        [
            "INFO 11-01 17:29:30 llm_engine.py:72] Initializing an LLM engine with config: model='/models/llama-13b-chat-hf/', "
            "tensor_parallel_size=2, seed=0)",
            "Traceback (most recent call last):",
            '  File "/opt/conda/lib/python3.11/site-packages/vllm/engine/llm_engine.py", line 165, in _init_workers_ray',
            '    init_torch_dist_process_group(self.workers, backend="nccl")',
            "RuntimeError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!",
            '10.0.0.2 - - [01/Nov/2023 17:29:40] "POST /generate HTTP/1.1" 500 -',
        ]
    )
    report = diagnose(log + "\n")
    assert report.verdict == "other"
    assert report.facts["error_message"] == "ProcessGroupNCCL is only supported with GPUs, no GPUs found!"
    assert report.diagnoses[0].remedies[0].action == "fix_environment"


def test_vllm_gaudis_usable_kv_memory_and_blocks_are_read() -> None:
    log = "\n".join(
        [
            "(EngineCore_DP0 pid=381) INFO 01-27 22:07:25 [hpu_worker.py:260] Free device memory: 82.7 GiB, 62.03 GiB "
            "usable (gpu_memory_utilization=0.75), 24.81 GiB reserved for HPUGraphs (VLLM_GRAPH_RESERVED_MEM=0.4), "
            "32 MiB reserved for KV cache dummy block 37.18 GiB reserved for usable KV cache",
            "(EngineCore_DP0 pid=381) INFO 01-27 22:07:26 [v1/core/kv_cache_utils.py:1305] GPU KV cache size: 152,192 tokens",
            "(EngineCore_DP0 pid=381) INFO 01-27 22:07:26 [hpu_worker.py:288] Usable num_blocks: 1189, actual allocated "
            "num_blocks: 152320 (_PAD_BLOCK_ID=0, _PAD_SLOT_ID=-1)",
            "(EngineCore_DP0 pid=381) INFO 01-27 22:07:26 [hpu_worker.py:291] Initializing cache engine took 37.19 GiB of "
            "device memory (81 GiB/126.5 GiB used) and 82.79 MiB of host memory (91 GiB/1007 GiB used)",
        ]
    )
    facts = diagnose(log + "\n").facts
    assert (facts["kv_cache_gib"], facts["gpu_blocks"], facts["kv_cache_tokens"]) == (37.18, 1189, 152192)


VALIDATION = Path(__file__).parent / "fixtures" / "validation"


def _log_lines(path: Path) -> list[str]:
    """A kept real log's lines, without the collector's `# reporter` context lines."""
    return [line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("# reporter")]


def _cut_at_80(lines: list[str]) -> str:
    """The log as a terminal 80 columns wide pastes it: every line cut into 80-character pieces."""
    return "\n".join(line[i : i + 80] for line in lines for i in range(0, max(len(line), 1), 80)) + "\n"


def test_the_shells_killed_after_a_line_exactly_as_wide_as_a_hard_wrap_stays_a_record() -> None:
    # the paste wrapped at 80 columns; the last vLLM line happens to be 80 characters long itself,
    # and the shell's "Killed" under it is the OOM killer's word, not the rest of that line
    real = VALIDATION / "round11-b" / "1901-v0-06x-got-ocr-killed-after-gpu-blocks-host-ram.log"
    report = diagnose(_cut_at_80(_log_lines(real)))
    assert report.verdict == "other" and report.diagnoses[0].rule == "other-process-killed"


def test_a_double_spaced_paste_keeps_its_serving_lines() -> None:
    # copied from a page that renders every line as a paragraph: a blank line after each; the
    # access-log lines under the launch are the server serving, not blank lines to drop
    log = "\n\n".join(
        [
            "python -m vllm.entrypoints.openai.api_server \\",
            "  --model meta-llama/Llama-2-13b-chat-hf \\",
            "  --gpu-memory-utilization 0.8",
            "INFO 09-14 10:32:15 metrics.py:406] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
            "0.0 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.1%",
            'INFO:     127.0.0.1:51180 - "POST /v1/completions HTTP/1.1" 200 OK',
        ]
    )
    assert diagnose(log + "\n").verdict == "healthy"


def test_a_kubernetes_service_named_vllm_is_the_port_variable_not_memory() -> None:
    log = "\n".join(
        [
            "INFO 02-07 03:25:00 api_server.py:840] vLLM API server version 0.7.2",
            "Traceback (most recent call last):",
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/utils.py", line 540, in get_open_port',
            "    port = envs.VLLM_PORT",
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/envs.py", line 188, in <lambda>',
            "    lambda: int(os.getenv('VLLM_PORT', '0'))",
            "ValueError: invalid literal for int() with base 10: 'tcp://10.0.0.90:8000'",
        ]
    )
    top = diagnose(log + "\n").diagnoses[0]
    assert top.klass == "other" and top.remedies[0].action == "fix_config"
    assert "Service named `vllm`" in top.remedies[0].text


def test_a_kernel_warm_up_oom_lowers_the_fraction_by_what_it_lacked() -> None:
    real = VALIDATION / "round48-b"
    top = diagnose(next(real.glob("8504-*.log"))).diagnoses[0]
    # 0.875 GiB asked with 0.498 free of 95 GiB: (0.377 + 0.5) / 95 -> a point off 0.90, and the
    # catalog's 0.88 for the weights, the profile and one 400K request still holds
    assert (top.rule, top.phase) == ("cuda-oom-kernel-warmup", "kernel_warmup")
    assert (top.remedies[0].action, top.remedies[0].value) == ("lower_gpu_memory_utilization", 0.89)
    assert "raise_gpu_memory_utilization" in [a.action for a in top.avoid]


def test_unsloth_seeing_little_free_memory_for_a_small_model_is_another_tenant() -> None:
    real = VALIDATION / "round48-a"
    top = diagnose(next(real.glob("8403-*.log"))).diagnoses[0]
    assert (top.cause, top.confidence) == ("other_process", "medium")
    assert top.remedies[0].action == "free_gpu_memory" and "restart the runtime" in top.explanation


def test_a_hard_wrap_that_cuts_the_vllm_header_behind_a_journald_prefix_is_rejoined() -> None:
    # journald's prefix, then vLLM's header cut at 80 columns ("… ERROR 05-08 09:32:4" / "7 [core.py:400]"):
    # rejoined, the header comes off, and the traceback's frames below it are read as frames
    lines = _log_lines(next(VALIDATION.glob("*/3339-*.log")))
    plain, cut = diagnose("\n".join(lines) + "\n"), diagnose(_cut_at_80(lines))
    assert (
        (cut.verdict, cut.diagnoses[0].phase)
        == (plain.verdict, plain.diagnoses[0].phase)
        == ("cuda_oom", "kv_cache_allocation")
    )


def test_an_earlier_engine_in_the_same_notebook_kernel_is_freed_first() -> None:
    # PyTorch in this process holds 77 GiB while it loads a 7B model's 12.5 GiB: an LLM() an
    # earlier cell created still holds the card (the next cell, in a fresh kernel, starts healthy)
    real = VALIDATION / "round49-a"
    top = diagnose(next(real.glob("8701-*.log"))).diagnoses[0]
    assert (top.rule, top.confidence) == ("cuda-oom-weight-loading-should-fit", "medium")
    assert top.remedies[0].action == "free_gpu_memory" and "Restart the kernel" in top.remedies[0].text


def test_a_second_engine_in_a_script_whose_first_still_runs_frees_the_first() -> None:
    # the tutorial's script builds a second LLM() while the first (5.19 GiB of phi-2) still holds
    # the card: the OOM while loading is not the model's size
    real = VALIDATION / "round49-c"
    report = diagnose(next(real.glob("8905-*.log")))
    top = report.diagnoses[0]
    assert report.facts["earlier_weights_gib"] == 5.1933
    assert (top.rule, top.confidence, top.remedies[0].action) == (
        "cuda-oom-weight-loading",
        "medium",
        "free_gpu_memory",
    )
