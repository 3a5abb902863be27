"""Issue 10: a verdict rests on what the log shows. A log that stops is not a failure; frames name
the step when the exception text is cut; where the log prints no figures the arithmetic works from
the model and the card it names, marks what it estimated, and every suggested value fits."""

from __future__ import annotations

from kvdoctor.api import diagnose

V0_BANNER = (
    "INFO 08-19 07:50:01 llm_engine.py:174] Initializing an LLM engine (v0.5.4) with config: "
    "model='google/gemma-2-9b-it', dtype=torch.bfloat16, max_seq_len=8192, tensor_parallel_size=1"
)
V1_BANNER = "(APIServer pid=1) INFO 11-02 10:00:00 [api_server.py:1] vLLM API server version {version}"
NO_KV = "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."  # noqa: E501
CAPTURE = (
    "INFO 08-19 07:51:12 model_runner.py:1024] Capturing the model for CUDA graphs. This may lead to "
    "unexpected consequences if the model is not static."
)


def _top(log: str):  # type: ignore[no-untyped-def]
    report = diagnose(log)
    return report, report.diagnoses[0]


def test_a_log_that_ends_inside_the_capture_is_no_oom() -> None:
    log = "\n".join([V0_BANNER, "INFO 08-19 07:51:08 executor.py:56] # GPU blocks: 22982, # CPU blocks: 6241", CAPTURE])
    report, top = _top(log)
    assert report.verdict == "healthy" and top.confidence == "low"
    assert "The log ends during CUDA graph capture" in top.explanation


def test_a_log_that_stops_before_the_kv_cache_says_where_it_stopped() -> None:
    log = "\n".join([V0_BANNER, CAPTURE])
    report, top = _top(log)
    assert report.verdict == "unknown" and top.rule == "start-up-incomplete"
    assert "last step seen: CUDA graph capture" in top.explanation
    assert [r.action for r in top.remedies] == ["collect_more_log"]


def test_frames_of_a_cut_traceback_name_the_capture_at_medium_confidence() -> None:
    log = "\n".join(
        [
            V0_BANNER,
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3/dist-packages/vllm/worker/model_runner.py", line 1250, in capture_model',
            "    graph_runner.capture(**capture_inputs)",
        ]
    )
    report, top = _top(log)
    assert (report.verdict, top.phase, top.confidence) == ("cuda_oom", "cuda_graph_capture", "medium")
    assert top.remedies[0].action == "enforce_eager"
    assert any("capture_model" in e.text for e in top.evidence)


def test_a_code_line_under_the_kv_frame_names_the_profiling_step() -> None:
    log = "\n".join(
        [
            V0_BANNER,
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3/dist-packages/vllm/engine/llm_engine.py", line 483, in _initialize_kv_caches',
            "    self.model_executor.determine_num_available_blocks())",
        ]
    )
    report, top = _top(log)
    assert (report.verdict, top.phase) == ("cuda_oom", "profile_run")
    assert top.confidence == "low" and top.remedies[0].action == "reduce_max_num_batched_tokens"


def test_nccl_set_up_frames_are_not_memory_even_with_cuda_in_the_error() -> None:
    log = "\n".join(
        [
            V0_BANNER,
            "[rank1]: Traceback (most recent call last):",
            '[rank1]:   File "/usr/lib/python3/dist-packages/vllm/distributed/parallel_state.py", line 1000, in init_distributed_environment',  # noqa: E501
            "[rank1]:     torch.distributed.init_process_group(",
            "[rank1]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error",
        ]
    )
    report, top = _top(log)
    assert report.verdict == "other" and top.remedies[0].action == "fix_environment"


def test_figureless_no_kv_on_a_named_card_reconstructs_the_budget_and_marks_it_estimated() -> None:
    log = "\n".join(
        [
            "Running on a single NVIDIA T4",
            "INFO 06-21 10:00:10 llm_engine.py:72] Initializing an LLM engine with config: "
            "model='lmsys/vicuna-13b-v1.3', dtype=torch.float16, max_seq_len=4096, tensor_parallel_size=1",
            NO_KV,
        ]
    )
    report, top = _top(log)
    assert (report.verdict, top.cause) == ("no_cache_blocks", "model_too_large")
    assert top.remedies[0].action == "increase_tensor_parallel_size" and top.remedies[0].value >= 2
    assert top.confidence == "medium"
    sources = report.as_records()["attempts"][-1]["fact_sources"]
    assert sources["total_gpu_gib"]["source"] == "estimate"
    assert sources["weights_gib_estimate"]["source"] == "estimate"
    assert "Estimated (13B parameters in the model's name)" in top.explanation


def test_figureless_no_kv_with_nothing_named_looks_at_the_card_first() -> None:
    report, top = _top("\n".join([V0_BANNER.replace("google/gemma-2-9b-it", "/models/m"), NO_KV]))
    assert report.verdict == "no_cache_blocks" and top.cause is None and top.confidence == "low"
    assert top.remedies[0].action == "free_gpu_memory"
    assert "nvidia-smi --query-compute-apps=pid,used_memory --format=csv" in top.explanation
    assert "lower_max_model_len" in [a.action for a in top.avoid]


def test_early_v1_default_of_1024_sequences_leads_when_the_log_is_silent() -> None:
    log = "\n".join(
        [
            "INFO 04-27 11:08:00 [core.py:58] Initializing a V1 LLM engine (v0.8.2) with config: model='/models/m'",
            "ERROR 04-27 11:08:32 [core.py:340] " + NO_KV,
        ]
    )
    _, top = _top(log)
    assert top.remedies[0].action == "reduce_max_num_seqs"
    assert "(now 1024)" in top.remedies[0].text


def test_a_lower_fraction_that_cannot_hold_the_model_is_not_suggested() -> None:
    # 6 GiB held on a 24 GB card; an 8B bf16 model needs ~15 GiB of weights plus its profile
    log = "\n".join(
        [
            "(EngineCore_DP0 pid=80) INFO 11-02 10:00:05 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with "
            "config: model='meta-llama/Llama-3.1-8B-Instruct', dtype=torch.bfloat16, max_seq_len=8192",
            "(EngineCore_DP0 pid=80) ValueError: Free memory on device (17.2/23.55 GiB) on startup is less than "
            "desired GPU memory utilization (0.9, 21.2 GiB). Decrease GPU memory utilization or reduce GPU memory "
            "used by other processes.",
        ]
    )
    report, top = _top(log)
    assert report.verdict == "insufficient_free_memory_at_startup"
    assert [r.action for r in top.remedies] == ["free_gpu_memory"]
    assert "below the 0.74 this model needs" in top.remedies[0].text


def test_a_lower_fraction_that_holds_the_model_is_suggested_with_its_value() -> None:
    log = "\n".join(
        [
            "(EngineCore_DP0 pid=80) INFO 11-02 10:00:05 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with "
            "config: model='Qwen/Qwen2.5-0.5B-Instruct', dtype=torch.bfloat16, max_seq_len=4096",
            "(EngineCore_DP0 pid=80) ValueError: Free memory on device (17.2/23.55 GiB) on startup is less than "
            "desired GPU memory utilization (0.9, 21.2 GiB).",
        ]
    )
    _, top = _top(log)
    assert (top.remedies[0].action, top.remedies[0].value) == ("lower_gpu_memory_utilization", 0.72)
    assert top.confidence == "medium"  # 6 GiB in use is not a desktop's share: whose it is, the log does not say


def test_an_oom_with_nothing_after_the_weights_is_a_marked_guess() -> None:
    log = "\n".join(
        [
            "python3 server_vllm.py --model Qwen/Qwen1.5-72B-Chat --tensor-parallel-size 1",
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 384.00 MiB. GPU 0 has a total "
            "capacity of 79.33 GiB of which 351.81 MiB is free. Including non-PyTorch memory, this process has "
            "78.97 GiB memory in use.",
        ]
    )
    report, top = _top(log)
    assert (report.verdict, top.phase, top.confidence) == ("cuda_oom", "weight_loading", "medium")
    assert "no line names the step" in top.explanation
    assert top.remedies[0].action == "increase_tensor_parallel_size"


def test_the_gpu_blocks_line_without_its_hash_and_a_negative_count() -> None:
    healthy = diagnose("INFO 11-02 10:00:00 llm_engine.py:1] GPU blocks: 1952, # CPU blocks: 2048")
    assert healthy.as_records()["facts"]["gpu_blocks"] == 1952
    failed = diagnose("INFO 06-21 10:00:18 llm_engine.py:128] # GPU blocks: -1, # CPU blocks: 512\nRuntimeError: x")
    assert failed.verdict == "no_cache_blocks"


def test_settings_in_a_wrapper_dict_are_read() -> None:
    line = (
        "2024-10-28:11:14:30,770 INFO [evaluator.py:201] Initializing vllm model, with arguments: "
        "{'pretrained': '/m', 'tensor_parallel_size': 2, 'dtype': 'auto', 'gpu_memory_utilization': 0.8}"
    )
    facts = diagnose(line + "\n" + NO_KV).as_records()["facts"]
    assert (facts["gpu_memory_utilization"], facts["tensor_parallel_size"]) == (0.8, 2)


def test_an_rl_rollout_that_fell_asleep_is_a_healthy_start() -> None:
    log = "\n".join(
        [
            V0_BANNER,
            "(LLMRayActor pid=1) INFO 06-20 01:36:37 executor_base.py:208] It took 2.026 seconds to fall asleep.",
            "(raylet) A worker died or was killed while executing a task by an unexpected system error.",
        ]
    )
    assert diagnose(log).verdict == "healthy"


def test_the_probe_decides_the_differential_both_ways() -> None:
    from pathlib import Path

    from kvdoctor.probe import load_snapshot_file

    smi = Path(__file__).parent / "fixtures" / "nvidia-smi"
    log = "\n".join([V0_BANNER.replace("google/gemma-2-9b-it", "/models/m"), NO_KV])
    busy = diagnose(log, probe=load_snapshot_file(str(smi / "r535-2x4090-table.txt"))).diagnoses[0]
    assert (busy.cause, busy.remedies[0].action) == ("other_process", "free_gpu_memory")
    empty = diagnose(log, probe=load_snapshot_file(str(smi / "r550-idle-no-processes-table.txt"))).diagnoses[0]
    assert empty.rule == "no-cache-blocks-unmeasured"
    assert "free_gpu_memory" not in [r.action for r in empty.remedies]
    assert empty.remedies[0].action == "increase_tensor_parallel_size"


def test_another_stage_loading_at_the_same_second_is_the_co_tenant() -> None:
    log = "\n".join(
        [
            "(Worker pid=2291010) [Stage-0] ERROR 03-12 08:22:28 [multiproc_executor.py:800] ValueError: Free memory "
            "on device cuda:0 (111.99/139.8 GiB) on startup is less than desired GPU memory utilization (0.95, "
            "132.81 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
            "[Stage-1] INFO 03-12 08:22:28 [diffusion_model_runner.py:133] Model loading took 26.4738 GiB and 13.18 s",
        ]
    )
    report, top = _top(log)
    assert (top.rule, top.confidence) == ("free-memory-at-startup-held", "medium")
    assert top.remedies[0].action == "free_gpu_memory"
    assert "another stage or instance was starting on the same card" in top.explanation
    assert "raise_gpu_memory_utilization" in [a.action for a in top.avoid]


def test_a_trainer_oom_after_vllm_started_is_not_a_vllm_failure() -> None:
    log = "\n".join(
        [
            "INFO 03-01 10:00:00 llm_engine.py:100] Initializing an LLM engine (v0.6.3) with config: model='Qwen/Qwen2.5-7B'",
            "INFO 03-01 10:00:30 gpu_executor.py:122] # GPU blocks: 2048, # CPU blocks: 512",
            "Traceback (most recent call last):",
            '  File "/opt/verl/trainer/main_ppo.py", line 88, in fit',
            "    loss.backward()",
            '  File "/usr/lib/python3/dist-packages/torch/_tensor.py", line 521, in backward',
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "79.19 GiB of which 1.02 GiB is free.",
        ]
    )
    report, top = _top(log)
    assert report.verdict == "healthy"
    assert "/opt/verl/trainer/main_ppo.py" in top.explanation and "never enters vLLM" in top.explanation


def test_an_oom_inside_vllm_after_the_kv_cache_is_still_vllms() -> None:
    log = "\n".join(
        [
            "INFO 03-01 10:00:30 gpu_executor.py:122] # GPU blocks: 2048, # CPU blocks: 512",
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3/dist-packages/vllm/worker/model_runner.py", line 1250, in capture_model',
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "79.19 GiB of which 1.02 GiB is free.",
        ]
    )
    assert diagnose(log).verdict == "cuda_oom"


def test_evidence_quotes_the_line_without_terminal_or_ci_control_sequences() -> None:
    from kvdoctor.api import diagnose

    log = b"\x1b_bk;t=1700000000000\x07\x1b[31mValueError: No available memory for the cache blocks.\x1b[0m\n"
    evidence = diagnose(log).diagnoses[0].evidence[0]
    assert evidence.text == "ValueError: No available memory for the cache blocks."


def test_a_finished_error_message_does_not_swallow_the_next_programs_lines() -> None:
    log = (
        "INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version 0.9.1\n"
        "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
        "when initializing the engine. \n"
        "wrapper: goodbye\n"
        "I1201 12:00:00.123456   1 main.go:12] pod terminated\n"
    )
    evidence = [e.text for e in diagnose(log).diagnoses[0].evidence]
    assert evidence[-1].endswith("when initializing the engine.")
    assert not any("goodbye" in e or "terminated" in e for e in evidence)
    # a message the paste wrapped mid-sentence is still joined
    wrapped = log.replace(
        "blocks. Try increasing `gpu_memory_utilization` when", "blocks. Try increasing\n`gpu_memory_utilization` when"
    )
    assert any(
        "Try increasing `gpu_memory_utilization` when" in e
        for e in (x.text for x in diagnose(wrapped).diagnoses[0].evidence)
    )
