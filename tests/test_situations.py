"""Situations that decide a verdict beyond one line: several start-ups, an instance still running,
a bind failure after uvicorn's start-up line, tracebacks cut short."""

from __future__ import annotations

from kvdoctor.api import diagnose
from kvdoctor.diagnosis.report import Report

BANNER = "INFO 01-15 06:46:00 [api_server.py:1] vLLM API server version 0.11.0"


def _verdict_confidence_first(report: Report) -> tuple[str, str, str]:
    top = report.diagnoses[0]
    return report.verdict, top.confidence, top.remedies[0].action


def test_second_instance_while_the_first_still_runs_is_another_process() -> None:
    log = "\n".join(
        [
            BANNER,
            "(EngineCore_DP0 pid=3052) INFO 01-15 06:46:16 [gpu_worker.py:1] Available KV cache memory: 21.52 GiB",
            "(EngineCore_DP0 pid=3052) INFO 01-15 06:46:16 [kv_cache_utils.py:1] GPU KV cache size: 1,880,320 tokens",
            BANNER,
            "(EngineCore_DP0 pid=4146) INFO 01-15 06:47:41 [gpu_worker.py:1] Available KV cache memory: -1.2 GiB",
            "(EngineCore_DP0 pid=4146) ERROR 01-15 06:47:41 [core.py:843] EngineCore failed to start.",
        ]
    )
    report = diagnose(log)
    top = report.diagnoses[0]
    assert (report.verdict, top.cause, top.remedies[0].action) == (
        "no_cache_blocks",
        "other_process",
        "free_gpu_memory",
    )


def test_a_shut_down_first_instance_does_not_count() -> None:
    log = "\n".join(
        [
            BANNER,
            "(EngineCore_DP0 pid=3052) INFO 01-15 06:46:16 [gpu_worker.py:1] Available KV cache memory: 21.52 GiB",
            "INFO:     Shutting down",
            BANNER,
            "(EngineCore_DP0 pid=4146) INFO 01-15 06:47:41 [gpu_worker.py:1] Available KV cache memory: -1.2 GiB",
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`.",
        ]
    )
    assert diagnose(log).diagnoses[0].cause != "other_process"


def test_the_verdict_is_the_last_attempt_with_an_outcome() -> None:
    log = "\n".join(
        [
            BANNER,
            "OSError: [Errno 98] Address already in use",
            "$ vllm serve Qwen/Qwen3-8B --port 8000",
            BANNER,
        ]
    )
    report = diagnose(log)
    assert report.verdict == "other"
    assert report.diagnoses[0].remedies[0].action == "fix_environment"
    assert any("shows no outcome yet" in note for note in report.notes)


def test_uvicorn_startup_then_a_bind_error_is_not_healthy() -> None:
    log = "\n".join(
        [
            "INFO:     Application startup complete.",
            "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use",
            "INFO:     Waiting for application shutdown.",
        ]
    )
    report = diagnose(log)
    assert report.verdict == "other"
    assert report.diagnoses[0].remedies[0].action == "fix_environment"


def test_worker_exception_header_carries_the_root_cause() -> None:
    log = (
        "(VllmWorkerProcess pid=839) ERROR 08-19 19:03:55 multiproc_worker_utils.py:226] Exception in worker "
        "VllmWorkerProcess while processing method init_device: NCCL error: unhandled cuda error (run with "
        "NCCL_DEBUG=INFO for details), Traceback (most recent call last):"
    )
    report = diagnose(log)
    assert (report.verdict, report.diagnoses[0].remedies[0].action) == ("other", "fix_environment")


def test_oom_phase_named_by_the_worker_method_after_the_oom() -> None:
    log = "\n".join(
        [
            "(VllmWorkerProcess pid=195297) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. "
            "GPU 2 has a total capacity of 14.62 GiB of which 3.31 MiB is free. Including non-PyTorch memory, this "
            "process has 14.61 GiB memory in use.",
            "(VllmWorkerProcess pid=195297) ERROR 03-01 10:00:00 multiproc_worker_utils.py:242] Exception in worker "
            "VllmWorkerProcess while processing method load_model.",
        ]
    )
    report = diagnose(log)
    top = report.diagnoses[0]
    assert (top.klass, top.phase, top.remedies[0].action) == (
        "cuda_oom",
        "weight_loading",
        "increase_tensor_parallel_size",
    )


def test_sampler_message_beats_the_private_pool_guess() -> None:
    log = "\n".join(
        [
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 15.47 GiB "
            "of which 52.00 MiB is free. Including non-PyTorch memory, this process has 15.40 GiB memory in use. Of the "
            "allocated memory 14.1 GiB is allocated by PyTorch, with 81.88 MiB allocated in private pools (e.g., CUDA "
            "Graphs), and 120.5 MiB is reserved by PyTorch but unallocated.",
            "RuntimeError: CUDA out of memory occurred when warming up sampler with 1024 dummy requests. Please try "
            "lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine.",
        ]
    )
    top = diagnose(log).diagnoses[0]
    assert (top.phase, top.remedies[0].action) == ("sampler_warmup", "reduce_max_num_seqs")


def test_traceback_cut_in_the_sampler_is_a_likely_oom_with_low_confidence() -> None:
    log = "\n".join(
        [
            "(Worker_TP1 pid=12) ERROR 05-10 16:00:15 [multiproc_executor.py:470] WorkerProc hit an exception.",
            '(Worker_TP1 pid=12) ERROR 05-10 16:00:15 [multiproc_executor.py:470]   File "/venv/vllm/v1/worker/'
            'gpu_model_runner.py", line 1544, in _dummy_sampler_run',
        ]
    )
    report = diagnose(log)
    top = report.diagnoses[0]
    assert (report.verdict, top.confidence, top.severity) == ("cuda_oom", "low", "warning")
    assert top.remedies[0].action == "reduce_max_num_seqs"
    assert report.exit_code("error") == 0 and report.exit_code("warning") == 1


def test_newest_start_up_summary_alone_is_healthy() -> None:
    log = (
        "(Worker_TP0 pid=5) INFO 08-14 09:28:01 [gpu_worker.py:857] Free memory on device (77.78/79.33 GiB) on "
        "startup. Desired GPU memory utilization is (0.85, 67.43 GiB). Actual usage is 16.92 GiB for weight, 5.66 "
        "GiB for peak activation, 0.13 GiB for non-torch memory, and 1.34 GiB for CUDAGraph memory. Current kv "
        "cache memory in use is 43.4 GiB."
    )
    assert diagnose(log).verdict == "healthy"


def test_model_too_large_compares_against_the_ceiling_not_the_current_fraction() -> None:
    log = "\n".join(
        [
            "INFO 01-15 11:06:48 worker.py:240] the current vLLM instance can use total_gpu_memory (8.00GiB) x "
            "gpu_memory_utilization (0.70) = 5.60GiB",
            "INFO 01-15 11:06:48 worker.py:240] model weights take 5.20GiB; non_torch_memory takes 0.03GiB; PyTorch "
            "activation peak memory takes 1.42GiB; the rest of the memory reserved for KV Cache is -1.05GiB.",
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`.",
        ]
    )
    top = diagnose(log).diagnoses[0]
    assert (top.cause, top.remedies[0].action) == ("utilization_too_low", "raise_gpu_memory_utilization")
    assert 0.85 <= top.remedies[0].value <= 0.95


def test_a_quoted_error_above_the_log_joins_the_start_up_it_quotes() -> None:
    log = "\n".join(
        [
            "ValueError: The model's max seq len (4096) is larger than the maximum number of tokens that can be stored "
            "in KV cache (3664). Try increasing",
            "INFO 01-11 15:51:02 llm_engine.py:70] Initializing an LLM engine with config: model='m', max_seq_len=4096, "
            "tensor_parallel_size=1, seed=0)",
            "INFO 01-11 15:51:30 llm_engine.py:207] # GPU blocks: 229, # CPU blocks: 512",
        ]
    )
    report = diagnose(log)
    assert len(report.attempts) == 1
    assert (report.verdict, report.diagnoses[0].remedies[0].action) == (
        "max_model_len_too_large",
        "lower_max_model_len",
    )


def test_v0_block_count_below_max_model_len_is_the_max_len_failure() -> None:
    log = "\n".join(
        [
            "INFO 01-11 15:51:02 llm_engine.py:70] Initializing an LLM engine with config: model='m', max_seq_len=4096, "
            "tensor_parallel_size=1, seed=0)",
            "INFO 01-11 15:51:30 llm_engine.py:207] # GPU blocks: 229, # CPU blocks: 512",
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3/site-packages/vllm/engine/llm_engine.py", line 220, in _init_cache',
            "    raise ValueError(",
        ]
    )
    report = diagnose(log)
    top = report.diagnoses[0]
    assert (report.verdict, top.remedies[0].action, top.remedies[0].value) == (
        "max_model_len_too_large",
        "lower_max_model_len",
        3584,
    )


def test_ranks_that_disagree_by_gibs_share_a_gpu_with_someone() -> None:
    log = "\n".join(
        [
            "(Worker_TP0 pid=10) INFO 06-01 10:00:00 [gpu_worker.py:1] Available KV cache memory: 9.90 GiB",
            "(Worker_TP1 pid=11) INFO 06-01 10:00:00 [gpu_worker.py:1] Available KV cache memory: -3.86 GiB",
            "(EngineCore_DP0 pid=9) ERROR 06-01 10:00:01 [core.py:1] ValueError: No available memory for the cache "
            "blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
        ]
    )
    top = diagnose(log).diagnoses[0]
    assert (top.cause, top.remedies[0].action) == ("other_process", "free_gpu_memory")
    assert "raise_gpu_memory_utilization" in [a.action for a in top.avoid]


def test_free_memory_error_quoted_without_figures_frees_the_gpu_first() -> None:
    log = (
        "vLLMAsyncRollout _loop_forever error: Free memory on device on startup is less than desired GPU memory "
        "utilization (0.8)"
    )
    report = diagnose(log)
    assert report.verdict == "insufficient_free_memory_at_startup"
    assert report.diagnoses[0].remedies[0].action == "free_gpu_memory"
    assert report.facts["gpu_memory_utilization"] == 0.8


def test_cpp_nccl_error_in_ray_core_format_is_an_environment_failure() -> None:
    log = (
        "[2023-07-11 15:20:41,680 E 42067 42067] logging.cc:97: Unhandled exception: St13runtime_error. "
        "what(): NCCL Error 5: invalid usage"
    )
    report = diagnose(log)
    assert (report.verdict, report.diagnoses[0].remedies[0].action) == ("other", "fix_environment")


def test_engine_args_pasted_as_json_are_read() -> None:
    log = "\n".join(
        [
            '{"model": "/models/gemma-2b", "gpu_memory_utilization": 0.47, "max_model_len": 64}',
            "WARN  PyProcess W-252-model-stderr: INFO 07-01 10:00:00 model_runner.py:1] Loading model weights took 4.7384 GB",
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
            "initializing the engine.",
        ]
    )
    report = diagnose(log)
    assert report.facts["gpu_memory_utilization"] == 0.47
    assert report.facts["weights_gib"] == 4.7384
    assert report.diagnoses[0].cause == "other_process"  # a fraction lowered below one half shares the card


def test_a_start_up_still_running_is_not_a_verdict_of_its_own() -> None:
    log = "\n".join([BANNER, "(APIServer pid=1) INFO 11-01 09:50:12 [utils.py:1] non-default args: {'model': 'm'}"])
    report = diagnose(log)
    assert report.verdict == "unknown" and report.diagnoses[0].rule == "start-up-incomplete"
    assert report.diagnoses[0].remedies[0].action == "collect_more_log"
    assert report.exit_code("error") == 0


def test_an_exception_named_in_a_warning_is_not_a_failure() -> None:
    log = "\n".join(
        [
            "WARNING 01-01 00:00:00 [utils.py:1] Falling back to the slow path; ImportError: flash_attn is not installed",
            "INFO 01-01 00:00:05 [gpu_worker.py:1] Available KV cache memory: 6.51 GiB",
        ]
    )
    assert diagnose(log).verdict == "healthy"


def test_an_exception_quoted_in_a_ticket_title_is_read() -> None:
    report = diagnose("vllm 跨主机启动失败 RuntimeError: NCCL error: unhandled system error")
    assert (report.verdict, report.diagnoses[0].remedies[0].action) == ("other", "fix_environment")


def test_a_glued_fence_is_peeled_and_ends_a_message() -> None:
    log = "\n".join(
        [
            "```[vllm]: (VllmWorkerProcess pid=90) ERROR 01-01 00:00:00 multiproc_worker_utils.py:1] Exception in worker "
            "VllmWorkerProcess while processing method init_device: NCCL error: unhandled system error, Traceback",
            "ValueError: Free memory on device (0.49/79.32 GiB) on startup is less than desired GPU memory utilization "
            "(0.6, 47.59 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
            "```",
        ]
    )
    report = diagnose(log)
    assert report.verdict == "insufficient_free_memory_at_startup"
    assert not report.facts["error_message"].endswith("`")


def test_figures_quoted_above_the_log_belong_to_its_start_up() -> None:
    log = "\n".join(
        [
            "vllm serve openai/gpt-oss-20b --max-model-len 131072 --gpu-memory-utilization 0.65",
            "The log says:",
            "Model loading took 13.72 GiB memory and 62.336108 seconds",
            "Available KV cache memory: 36.56 GiB",
            "(APIServer pid=6539) INFO 04-18 20:22:57 [utils.py:299] vLLM server version 0.19.0, serving model m",
            "(EngineCore_DP0 pid=7) INFO 04-18 20:23:57 [gpu_worker.py:1] Available KV cache memory: 36.56 GiB",
            "(APIServer pid=6539) INFO:     Application startup complete.",
        ]
    )
    report = diagnose(log)
    assert len(report.attempts) == 1 and report.verdict == "healthy"
    assert report.facts["gpu_memory_utilization"] == 0.65 and report.facts["weights_gib"] == 13.72


def test_v0_warm_up_model_traceback_is_graph_capture() -> None:
    log = "\n".join(
        [
            "INFO 02-13 20:40:00 llm_engine.py:1] # GPU blocks: 7754, # CPU blocks: 2048",
            "Traceback (most recent call last):",
            '  File "/usr/local/lib/python3.10/dist-packages/vllm/worker/worker.py", line 125, in warm_up_model',
            "    self.model_runner.capture_model(self.gpu_cache)",
            '  File "/usr/local/lib/python3.10/dist-packages/torch/utils/_contextlib.py", line 115, in decorate_context',
        ]
    )
    top = diagnose(log).diagnoses[0]
    assert (top.klass, top.phase, top.remedies[0].action) == ("cuda_oom", "cuda_graph_capture", "enforce_eager")


def test_a_flag_quoted_in_prose_is_read_and_the_default_is_named_as_such() -> None:
    stated = diagnose("It fails under `--gpu-memory-utilization 0.3`: `Available KV cache memory: -2.8 GiB`")
    assert stated.facts["gpu_memory_utilization"] == 0.3
    unstated = diagnose(
        "(EngineCore_DP0 pid=5) INFO 01-01 00:00:00 [gpu_worker.py:1] Available KV cache memory: -2.8 GiB\n"
        "ValueError: No available memory for the cache blocks."
    )
    texts = [r.text for r in unstated.diagnoses[0].remedies]
    assert any("vLLM's default" in t for t in texts)


def test_a_traceback_cut_in_v1_graph_capture_is_read_from_its_code_line() -> None:
    log = "\n".join(
        [
            '(Worker_TP2 pid=99) ERROR 04-09 20:31:10 [multiproc_executor.py:949]   File "/venv/vllm/v1/worker/gpu_worker.py", '
            "line 588, in compile_or_warm_up_model",
            "(Worker_TP2 pid=99) ERROR 04-09 20:31:10 [multiproc_executor.py:949]     cuda_graph_memory_bytes = "
            "self.model_runner.capture_model()",
        ]
    )
    top = diagnose(log).diagnoses[0]
    assert (top.klass, top.phase, top.remedies[0].action) == ("cuda_oom", "cuda_graph_capture", "enforce_eager")


def test_a_model_the_unnamed_card_barely_holds_leads_with_sharding_and_keeps_the_differential() -> None:
    log = "\n".join(
        [
            "python -m fastchat.serve.vllm_worker --model-path /LLMs/Qwen-72B-Chat --tensor-parallel-size 4 --dtype bfloat16",
            "ValueError: No available memory for the cache blocks.",
        ]
    )
    report = diagnose(log)
    top = report.diagnoses[0]
    assert report.facts["model"] == "/LLMs/Qwen-72B-Chat"
    assert report.primary is not None and report.primary.facts["smallest_card_gib"]["source"] == "estimate"
    assert [r.action for r in top.remedies][:2] == ["increase_tensor_parallel_size", "free_gpu_memory"]
    assert top.confidence == "low"
    assert "an estimate" in top.explanation


def test_a_small_model_on_an_unnamed_card_looks_at_the_card_first() -> None:
    log = "\n".join(
        [
            'llm = LLM(model="Qwen/Qwen2.5-0.5B-Instruct")',
            "ValueError: No available memory for the cache blocks.",
        ]
    )
    top = diagnose(log).diagnoses[0]
    assert top.remedies[0].action == "free_gpu_memory"


def test_lm_eval_arguments_name_the_model_and_the_tensor_parallel_size() -> None:
    line = (
        "2024-10-28:11:14:30,770 INFO     [evaluator.py:201] Initializing vllm model, with arguments: "
        "{'pretrained': '/models/meta-llama__Llama3.1-70B-Instruct', 'tensor_parallel_size': 2, "
        "'dtype': 'auto', 'gpu_memory_utilization': 0.8}"
    )
    facts = diagnose(line).facts
    assert facts["model"] == "/models/meta-llama__Llama3.1-70B-Instruct"
    assert (facts["tensor_parallel_size"], facts["gpu_memory_utilization"]) == (2, 0.8)


def _max_len_failure(fits: int) -> str:
    return (
        "ValueError: The model's max seq len (8192) is larger than the maximum number of tokens that can be "
        f"stored in KV cache ({fits}). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` "
        "when initializing the engine."
    )


def test_a_length_a_little_short_offers_the_fraction_as_the_second_way() -> None:
    top = diagnose(_max_len_failure(7600)).diagnoses[0]
    actions = [r.action for r in top.remedies]
    assert actions[:2] == ["lower_max_model_len", "raise_gpu_memory_utilization"]
    assert top.remedies[1].value == 0.95  # the fraction is vLLM's default 0.9: five points
    assert "raise_gpu_memory_utilization" not in [a.action for a in top.avoid]


def test_a_length_off_by_a_factor_at_a_printed_fraction_warns_against_raising_it() -> None:
    log = "$ vllm serve m --gpu-memory-utilization 0.9\n" + _max_len_failure(4688)
    top = diagnose(log).diagnoses[0]
    assert "raise_gpu_memory_utilization" not in [r.action for r in top.remedies]
    assert "raise_gpu_memory_utilization" in [a.action for a in top.avoid]


def test_a_fraction_the_log_does_not_show_may_have_been_set_low_by_a_launcher() -> None:
    top = diagnose(_max_len_failure(4688)).diagnoses[0]
    assert [r.action for r in top.remedies][:2] == ["lower_max_model_len", "raise_gpu_memory_utilization"]
    assert "launcher" in top.remedies[1].text
    assert "raise_gpu_memory_utilization" not in [a.action for a in top.avoid]


def test_a_fraction_lowered_to_share_the_card_leads_with_fitting_into_what_is_free() -> None:
    line = (
        "ValueError: Free memory on device (38.74/121.63 GiB) on startup is less than desired GPU memory "
        "utilization (0.35, 42.57 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."
    )
    top = diagnose(line).diagnoses[0]
    assert [(r.action, r.value) for r in top.remedies] == [
        ("lower_gpu_memory_utilization", 0.3),
        ("free_gpu_memory", 82.89),
    ]


def test_the_default_fraction_with_memory_held_frees_the_card_first() -> None:
    line = (
        "ValueError: Free memory on device (22.65/79.18 GiB) on startup is less than desired GPU memory "
        "utilization (0.9, 71.26 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."
    )
    assert diagnose(line).diagnoses[0].remedies[0].action == "free_gpu_memory"


_BLOCKS = "INFO 01-23 07:34:26 gpu_executor.py:122] # GPU blocks: 11836, # CPU blocks: 4681"


def test_killed_on_unified_memory_lowers_the_fraction_first() -> None:
    report = diagnose("\n".join(["# running on a Jetson Orin NX 16G", _BLOCKS, "Killed"]))
    top = report.diagnoses[0]
    assert (report.verdict, top.rule) == ("other", "other-process-killed")
    assert [(r.action, r.value) for r in top.remedies][0] == ("lower_gpu_memory_utilization", 0.7)
    assert "Jetson" in top.explanation


def test_killed_on_a_discrete_card_asks_for_host_ram_first() -> None:
    log = "\n".join(
        [_BLOCKS, "bash: line 1:  4242 Killed                  python -m vllm.entrypoints.openai.api_server"]
    )
    top = diagnose(log).diagnoses[0]
    assert top.remedies[0].action == "fix_environment"
    assert "raise_gpu_memory_utilization" in [a.action for a in top.avoid]


def test_a_word_killed_in_prose_is_not_a_kill() -> None:
    assert diagnose("\n".join([_BLOCKS, "Killed the old server first, then restarted"])).verdict == "healthy"


def test_the_cpu_backend_node_check_sizes_the_kv_space_from_what_is_free() -> None:
    line = (
        "(Worker pid=1671) ERROR 06-09 16:29:44 [multiproc_executor.py:987] ValueError: Available memory on node 0 "
        "(149.11/692.65 GiB) on kv cache allocation is less than requested memory for kv (206.54/207.8 GiB). "
        "Reduce CPU memory used by other processes."
    )
    report = diagnose(line)
    top = report.diagnoses[0]
    assert report.verdict == "insufficient_free_memory_at_startup"
    assert (top.remedies[0].action, top.remedies[0].value) == ("lower_cpu_kv_cache_space", 119)
    assert "VLLM_CPU_KVCACHE_SPACE=119" in top.remedies[0].text


_V1_KV = "(EngineCore_DP0 pid=68) INFO 05-09 02:50:27 [kv_cache_utils.py:639] GPU KV cache size: 3,292,896 tokens"


def _frames(*functions: str) -> list[str]:
    return [
        f'  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 1, in {f}' for f in functions
    ]


def test_a_failure_inside_the_engine_step_loop_is_after_start_up() -> None:
    log = "\n".join(
        [
            _V1_KV,
            "Traceback (most recent call last):",
            *_frames("run_engine_core", "run_busy_loop", "_process_engine_step"),
        ]
    )
    report = diagnose(log)
    assert report.verdict == "healthy"
    assert "request-time failure" in report.diagnoses[0].explanation


def test_a_traceback_cut_in_set_device_is_the_driver_not_memory() -> None:
    log = "\n".join(
        [
            "(EngineCore_DP0 pid=68) ERROR 02-06 16:34:06 [core.py:936] Traceback (most recent call last):",
            '(EngineCore_DP0 pid=68) ERROR 02-06 16:34:06 [core.py:936] File "/opt/vllm/vllm/v1/worker/gpu_worker.py", line 209, in init_device',
            '(EngineCore_DP0 pid=68) ERROR 02-06 16:34:06 [core.py:936] File "/opt/vllm/lib/python3.12/site-packages/torch/cuda/__init__.py", line 567, in set_device',
        ]
    )
    report = diagnose(log)
    assert (report.verdict, report.diagnoses[0].remedies[0].action) == ("other", "fix_environment")


def test_an_oom_in_flashinfer_sampling_is_the_sampler_step() -> None:
    log = "\n".join(
        [
            "(Worker_TP2 pid=262) INFO 10-29 19:57:20 [gpu_model_runner.py:3480] Graph capturing finished in 28 secs, took 1.88 GiB",
            '(Worker_TP2 pid=262) ERROR 10-29 19:57:21 [multiproc_executor.py:671]   File "/usr/local/lib/python3.12/dist-packages/flashinfer/sampling.py", line 981, in top_k_top_p_sampling_from_logits',
            "(Worker_TP2 pid=262) ERROR 10-29 19:57:21 [multiproc_executor.py:671] torch.OutOfMemoryError: CUDA out of memory. "
            "Tried to allocate 150.00 MiB. GPU 2 has a total capacity of 23.52 GiB of which 11.69 MiB is free.",
        ]
    )
    top = diagnose(log).diagnoses[0]
    assert (top.phase, top.remedies[0].action) == ("sampler_warmup", "reduce_max_num_seqs")


def test_an_oom_at_a_fraction_above_the_ceiling_lowers_it_whatever_the_step() -> None:
    log = "\n".join(
        [
            "vllm serve /models/MiniCPM-V-2_6 --max-model-len 2048 --gpu_memory_utilization 1",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of "
            "22.18 GiB of which 3.47 GiB is free. Process 8007 has 18.71 GiB memory in use.",
        ]
    )
    top = diagnose(log).diagnoses[0]
    assert (top.rule, top.remedies[0].action, top.remedies[0].value) == (
        "cuda-oom-fraction-above-ceiling",
        "lower_gpu_memory_utilization",
        0.9,
    )


def test_v0_profiles_a_batch_of_max_model_len_so_a_shorter_length_shrinks_the_peak() -> None:
    log = "\n".join(
        [
            "INFO 09-02 03:36:40 llm_engine.py:184] Initializing an LLM engine (v0.5.5) with config: model='Qwen/Qwen2-VL-7B-Instruct', "
            "dtype=torch.bfloat16, max_seq_len=32768, tensor_parallel_size=1, enable_prefix_caching=False)",
            "INFO 09-02 03:37:01 model_runner.py:890] Loading model weights took 15.5083 GB",
            "INFO 09-02 03:37:07 worker.py:240] Memory profiling takes 5.17 seconds",
            "INFO 09-02 03:37:07 worker.py:240] the current vLLM instance can use total_gpu_memory (23.64GiB) x gpu_memory_utilization (0.90) = 21.28GiB",
            "INFO 09-02 03:37:07 worker.py:240] model weights take 15.51GiB; non_torch_memory takes 0.20GiB; PyTorch activation peak memory takes 6.40GiB; the rest of the memory reserved for KV Cache is -0.83GiB.",
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
        ]
    )
    top = diagnose(log).diagnoses[0]
    assert top.remedies[0].action == "lower_max_model_len"
    assert "lower_max_model_len" not in [a.action for a in top.avoid]
    assert "reduce_max_num_batched_tokens" not in [r.action for r in top.remedies]  # V0 refuses it below the length


def test_a_container_without_a_gpu_is_the_environment() -> None:
    log = "\n".join(
        [
            "DEBUG 10-01 12:03:47 [__init__.py:93] CUDA platform is not available because: NVML Shared Library Not Found",
            "INFO 10-01 13:17:36 [__init__.py:243] No platform detected, vLLM is running on UnspecifiedPlatform",
        ]
    )
    report = diagnose(log)
    top = report.diagnoses[0]
    assert (report.verdict, top.rule, top.remedies[0].action) == ("other", "other-no-gpu-visible", "fix_environment")
    assert "NVML Shared Library Not Found" in top.explanation


def test_a_retyped_max_len_error_without_its_figure_is_still_the_length() -> None:
    line = (
        "ValueError : the model's max seq len (32768) is larger than the maxinum number of tokens that can be "
        "stored in KV cache, Try increasing 'gpu_memory_utilization' or decreasing 'max_model_len'"
    )
    report = diagnose(line)
    assert (report.verdict, report.facts["max_model_len"]) == ("max_model_len_too_large", 32768)


def test_the_v1_kv_check_quoted_without_its_first_clause_keeps_its_figures() -> None:
    report = diagnose("ValueError: 1.75 GiB KV cache is needed, available 0.13 GiB")
    assert report.verdict == "max_model_len_too_large"
    assert (report.facts["needed_kv_gib"], report.facts["kv_cache_gib"]) == (1.75, 0.13)


def test_a_free_memory_title_cut_after_the_fraction_keeps_its_figures() -> None:
    line = "free memory on device cuda:0 (46.95/79.18 GiB) on startup is less than desired GPU memory utilization (0.6,"
    facts = diagnose(line).facts
    assert (facts["free_gpu_gib_at_startup"], facts["total_gpu_gib"], facts["gpu_memory_utilization"]) == (
        46.95,
        79.18,
        0.6,
    )


def test_v0_error_in_model_execution_at_start_up_is_the_profiling_pass() -> None:
    line = (
        "[rank0]: torch.OutOfMemoryError: Error in model execution (input dumped to /tmp/err.pkl): CUDA out of memory. "
        "Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.69 GiB of which 979.69 MiB is free."
    )
    assert diagnose(line).diagnoses[0].phase == "profile_run"


def test_a_model_forward_frame_before_the_kv_cache_is_the_profiling_pass() -> None:
    log = "\n".join(
        [
            "(VllmWorkerProcess pid=42878) ERROR 08-04 16:54:59 [multiproc_worker_utils.py:238] Exception in worker "
            "VllmWorkerProcess while processing method determine_num_available_blocks.",
            '[rank0]:   File "/site-packages/vllm/model_executor/models/qwen2_5_vl.py", line 395, in forward',
        ]
    )
    top = diagnose(log).diagnoses[0]
    assert (top.rule, top.remedies[0].action) == ("cuda-oom-cut-traceback", "reduce_max_num_batched_tokens")


def test_an_oom_on_a_strix_halo_is_the_gpus_share_of_the_ram() -> None:
    log = "\n".join(
        [
            "# reporter: Strix Halo (gfx1151), 128 GB RAM",
            "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 1.08 GiB. GPU 0 has a total capacity of "
            "62.47 GiB of which 769.28 MiB is free. Of the allocated memory 61.41 GiB is allocated by PyTorch",
        ]
    )
    top = diagnose(log).diagnoses[0]
    assert (top.rule, top.remedies[0].action) == ("cuda-oom-unified-memory-share", "fix_environment")
    assert "amdgpu.gttsize" in top.remedies[0].text


def test_this_process_at_zero_bytes_is_the_container_case_not_a_co_tenant() -> None:
    line = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.47 GiB. GPU 0 has a total capacity of "
        "79.11 GiB of which 1.25 GiB is free. Including non-PyTorch memory, this process has 0 bytes memory in use. "
        "Process 4120 has 77.86 GiB memory in use."
    )
    assert diagnose(line).diagnoses[0].rule != "cuda-oom-other-process"


def test_an_oom_quoted_above_the_log_takes_its_step_from_the_frames_below() -> None:
    log = "\n".join(
        [
            '# reporter: "I am always facing `torch.OutOfMemoryError: CUDA out of memory.` error."',
            "INFO 01-28 05:10:01 model_runner.py:1115] Loading model weights took 0.8988 GB",
            'ERROR 01-28 05:10:09 engine.py:387]   File "/usr/local/lib/python3.12/dist-packages/vllm/worker/worker.py", line 306, in initialize_cache',
            'ERROR 01-28 05:10:09 engine.py:387]   File "/usr/local/lib/python3.12/dist-packages/vllm/worker/worker.py", line 339, in _init_cache_engine',
        ]
    )
    top = diagnose(log).diagnoses[0]
    assert top.phase == "kv_cache_allocation" and top.remedies[0].action == "lower_gpu_memory_utilization"


def test_a_small_model_at_the_ceiling_with_no_kv_is_not_called_too_large() -> None:
    log = "\n".join(
        [
            "vllm serve Qwen/Qwen2.5-VL-3B-Instruct --gpu-memory-utilization 0.97",
            "INFO 05-01 10:00:00 [gpu_model_runner.py:1] Using H20",
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
            "when initializing the engine.",
        ]
    )
    top = diagnose(log).diagnoses[0]
    assert top.cause != "model_too_large"
    actions = [r.action for r in top.remedies]
    assert actions[0] == "free_gpu_memory"  # a 3B model fits any card this size: look at the card
    assert "increase_tensor_parallel_size" not in actions  # never "--tensor-parallel-size 1"


def test_a_v0_oom_in_the_samplers_sort_is_the_profiling_pass() -> None:
    log = "\n".join(
        [
            "INFO 01-02 02:07:12 model_runner.py:1099] Loading model weights took 16.9583 GB",
            "ERROR 01-02 02:39:17 worker_base.py:467]     logits_sort, logits_idx = logits.sort(dim=-1, descending=False)",
            "ERROR 01-02 02:39:17 worker_base.py:467] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
            "380.00 MiB. GPU 0 has a total capacity of 23.64 GiB of which 14.81 MiB is free.",
        ]
    )
    top = diagnose(log).diagnoses[0]
    assert (top.klass, top.phase) == ("cuda_oom", "profile_run")
    assert top.remedies[0].action == "reduce_max_num_batched_tokens"


def test_host_ram_failures_are_the_environment_not_gpu_memory() -> None:
    mmap = (
        "INFO 10-28 09:00:00 llm_engine.py:237] Initializing an LLM engine (v0.6.3.post1) with config: model='m'\n"
        "RuntimeError: unable to mmap 18329065000 bytes from file </models/model.safetensors>: Cannot allocate memory (12)\n"
    )
    killed = (
        "(raylet) A worker died or was killed while executing a task by an unexpected system error. "
        "Worker exit type: SYSTEM_ERROR Worker exit detail: The leased worker has unrecoverable failure. "
        "Worker is requested to be destroyed when it is returned. RPC Error message: Socket closed. "
        "Possible causes: (1) The worker was killed by SIGKILL by OOM killer due to high memory usage.\n"
    )
    for log in (mmap, killed):
        report = diagnose("INFO 01-01 00:00:00 api_server.py:1] vLLM API server version 0.6.3\n" + log)
        top = report.diagnoses[0]
        assert (report.verdict, top.remedies[0].action) == ("other", "fix_environment")
        assert report.facts["environment_kind"] == "host memory"


def test_a_pydantic_validation_error_is_read_for_its_reason() -> None:
    log = (
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
        "  Value error, Model architectures ['Qwen3TTSForConditionalGeneration'] failed to be inspected. "
        "Please check the logs for more details. [type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]\n"
    )
    report = diagnose(log)
    assert report.facts["error_message"].startswith("Model architectures ['Qwen3TTSForConditionalGeneration']")
    assert (report.verdict, report.diagnoses[0].remedies[0].action) == ("other", "fix_environment")


def test_a_tpu_kernel_out_of_scratch_memory_is_the_length_not_hbm() -> None:
    log = (
        "INFO 09-09 10:00:00 llm_engine.py:1] Initializing an LLM engine (v0.6.0) with config: model='m', "
        "max_seq_len=16384, device_config=tpu\n"
        "RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory "
        "in memory space smem. Used 1.00M of 1.00M smem. Exceeded smem capacity by 1.7K.\n"
    )
    top = diagnose(log).diagnoses[0]
    assert (top.klass, top.remedies[0].action, top.remedies[0].value) == ("other", "lower_max_model_len", 8192)
    assert "lower_gpu_memory_utilization" in [a.action for a in top.avoid]


def test_vllms_eager_mode_advice_is_not_read_as_the_setting() -> None:
    log = (
        "INFO 07-01 10:00:00 model_runner.py:1] Capturing the model for CUDA graphs. This may lead to unexpected "
        "consequences if the model is not static. To run the model in eager mode, set 'enforce_eager=True' or use "
        "'--enforce-eager' in the CLI.\n"
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 70.00 MiB. GPU 0 has a total capacity "
        "of 23.64 GiB of which 50.00 MiB is free.\n"
    )
    report = diagnose(log)
    assert "enforce_eager" not in report.facts
    assert report.diagnoses[0].remedies[0].action == "enforce_eager"


def test_settings_spelled_the_way_embedding_frameworks_spell_them_are_read() -> None:
    swift = "swift rollout --model Qwen/Qwen3-8B --vllm_tensor_parallel_size 2 --vllm_max_model_len 16384 --vllm_gpu_memory_utilization 0.6\n"
    verl = (
        "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.gpu_memory_utilization=0.4 "
        "actor_rollout_ref.rollout.tensor_model_parallel_size=2\n"
    )
    error = "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\n"
    facts = diagnose(swift + error).facts
    assert (facts["gpu_memory_utilization"], facts["max_model_len"], facts["tensor_parallel_size"]) == (0.6, 16384, 2)
    facts = diagnose(verl + error).facts
    assert (facts["gpu_memory_utilization"], facts["tensor_parallel_size"]) == (0.4, 2)


def test_an_oom_in_the_sleep_mode_allocator_gives_the_trainer_its_share() -> None:
    report = diagnose("Runtime Error: Cuda error: out of memory at /workspace/csrc/cumem_allocator.cpp: 62\n")
    top = report.diagnoses[0]
    assert (top.klass, top.remedies[0].action) == ("cuda_oom", "lower_gpu_memory_utilization")
    assert "raise_gpu_memory_utilization" in [a.action for a in top.avoid]


def test_the_kernels_oom_killer_in_dmesg_is_host_memory() -> None:
    log = "[12345.678] VLLM::Worker_TP invoked oom-killer: gfp_mask=0x102cc2(GFP_HIGHUSER), order=0\n"
    report = diagnose(log)
    assert (report.verdict, report.facts["environment_kind"]) == ("other", "host memory")


def test_a_max_len_error_re_wrapped_at_its_parentheses_keeps_its_figures() -> None:
    log = (
        "(EngineCore_DP0 pid=1) ERROR 10-08 20:33:48 [core.py:708] ValueError: \n"
        "To serve at least one request with the models's max seq len (40960), \n"
        "(5.62 GiB KV cache is needed, which is larger than the available KV cache memory (4.50 GiB). \n"
        "Based on the available memory, the estimated maximum model length is 32768. \n"
        "Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.\n"
    )
    report = diagnose(log)
    assert (report.facts["needed_kv_gib"], report.facts["kv_cache_gib"]) == (5.62, 4.5)
    assert report.diagnoses[0].remedies[0].value == 32768


def test_a_tpu_program_that_cannot_be_loaded_leaves_the_compiled_programs_room() -> None:
    log = (
        "--gpu-memory-utilization 0.98\n"
        "RuntimeProgramAllocationFailure: Error loading program 'jit__forward':\n"
        "Attempting to allocate 1.13G. That was not possible. There are 528.72M free.\n"
    )
    top = diagnose(log).diagnoses[0]
    assert (top.klass, top.phase) == ("cuda_oom", "cuda_graph_capture")
    assert top.remedies[0].action == "lower_gpu_memory_utilization"
    assert "enforce_eager" not in [r.action for r in top.remedies]  # XLA compiles whatever the flag


def test_a_start_up_check_wrapped_by_a_terminal_or_a_quote_keeps_its_figures() -> None:
    wrapped_80 = (
        "(EngineCore pid=42103) ValueError: Free memory on device cuda:0 (13.33/15.47 GiB\n"
        ") on startup is less than desired GPU memory utilization (0.9, 13.92 GiB). Decre\n"
        "ase GPU memory utilization or reduce GPU memory used by other processes.\n"
    )
    quoted = (
        "    ValueError: Free memory on device cuda:0 (1.33/23.98 GiB) on startup is less\n"
        "    than desired GPU memory utilization (0.95, 22.79 GiB).\n"
    )
    for log, free, total in ((wrapped_80, 13.33, 15.47), (quoted, 1.33, 23.98)):
        facts = diagnose(log).facts
        assert (facts["free_gpu_gib_at_startup"], facts["total_gpu_gib"]) == (free, total)


def test_vllms_check_of_batched_tokens_against_the_length_is_a_setting_not_memory() -> None:
    log = (
        "ValueError: Ascend scheduler is enabled without chunked prefill feature. Argument max_num_batched_tokens "
        "(4096) is smaller than max_model_len (32768). Please increase max_num_batched_tokens or decrease max_model_len.\n"
    )
    report = diagnose(log)
    assert (report.verdict, report.diagnoses[0].remedies[0].action) == ("other", "fix_config")


def test_a_failed_custom_all_reduce_is_the_config_not_memory() -> None:
    log = (
        "INFO 04-23 11:32:58 model_runner.py:1115] Loading model weights took 8.4974 GB\n"
        "VLLM: Failed: /workspace/csrc/custom_all_reduce.cuh:368 'invalid argument'\n"
    )
    top = diagnose(log).diagnoses[0]
    assert (top.klass, top.remedies[0].action) == ("other", "fix_config")
    assert "--disable-custom-all-reduce" in top.remedies[0].text


def test_a_bare_cuda_error_in_markdown_bold_is_read() -> None:
    log = (
        "ERROR 05-08 02:37:18 engine.py:389] **CUDA error: no kernel image is available for execution on the device**\n"
    )
    report = diagnose(log)
    assert report.facts["error_message"] == "CUDA error: no kernel image is available for execution on the device"
    assert (report.verdict, report.diagnoses[0].remedies[0].action) == ("other", "fix_environment")


def test_a_cut_kv_check_under_the_engine_wrapper_after_a_long_length_is_a_low_guess_at_the_length() -> None:
    log = "\n".join(
        [
            "vllm serve Qwen/Qwen3.6-27B --max-model-len 180000",
            '(EngineCore pid=47)   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 261, in _initialize_kv_caches',
            '(EngineCore pid=47)   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/core/kv_cache_utils.py", line 717, in _check_enough_kv_cache_memory',
            "(EngineCore pid=47)     raise ValueError(",
            "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
        ]
    )
    report = diagnose(log)
    assert _verdict_confidence_first(report) == ("max_model_len_too_large", "low", "lower_max_model_len")
    assert report.facts["error_is_wrapper"] is True
    # the same frames with a short length: no claim about the length
    assert diagnose(log.replace("180000", "4096")).verdict != "max_model_len_too_large"


def test_a_v0_traceback_cut_at_the_executors_initialize_cache_after_a_long_length_is_the_length() -> None:
    # V0's executor runs the KV check (raise_if_cache_size_invalid) before it allocates; the paste
    # stops at the executor's frame, with 120000 tokens asked of an 8B model
    log = "\n".join(
        [
            "$ python -m vllm.entrypoints.openai.api_server --model NousResearch/Meta-Llama-3.1-8B-Instruct --max-model-len 120000 --gpu-memory-utilization 0.95",
            "INFO 11-21 13:28:24 api_server.py:585] vLLM API server version 0.6.4.post1",
            "Traceback (most recent call last):",
            '  File "/env/lib/python3.9/site-packages/vllm/engine/llm_engine.py", line 500, in _initialize_kv_caches',
            "    self.model_executor.initialize_cache(num_gpu_blocks, num_cpu_blocks)",
            '  File "/env/lib/python3.9/site-packages/vllm/executor/gpu_executor.py", line 120, in initialize_cache',
            "    self.driver_worker.initialize_cache(num_gpu_blocks, num_cpu_blocks)",
        ]
    )
    report = diagnose(log)
    assert _verdict_confidence_first(report) == ("max_model_len_too_large", "low", "lower_max_model_len")
    assert "≈14.65 GiB of KV cache per GPU (an estimate)" in report.diagnoses[0].explanation
    assert report.facts["one_request_kv_gib_estimate"] == 14.65
    # a short length leaves the step's OOM guess in place
    assert diagnose(log.replace("120000", "4096")).verdict == "cuda_oom"


def test_a_v0_profile_breakdown_cut_before_its_kv_part_keeps_its_figures() -> None:
    log = (
        "INFO 03-13 01:31:59 worker.py:267] model weights take 0.80GiB; non_torch_memory takes 0.16GiB; "
        "PyTorch activation peak memory takes 4.01GiB;\n"
    )
    facts = diagnose(log).facts
    assert (facts["weights_gib"], facts["non_torch_gib"], facts["activation_peak_gib"]) == (0.8, 0.16, 4.01)


def test_vllm_metal_budget_is_read_and_its_hidden_reservation_is_the_profile() -> None:
    log = (
        "# VLLM_METAL_MEMORY_FRACTION=0.98 vllm serve mlx-community/Qwen3.5-27B-MLX-4bit --max-model-len 2048\n"
        "ValueError: Paged attention: not enough Metal memory for KV cache.\n"
        "  metal_limit=26.80GB, fraction=0.98, usable_metal=26.26GB,\n"
        "  model_memory=19.74GB, overhead=2.09GB, kv_budget=-12.05GB.\n"
    )
    report = diagnose(log)
    facts = report.facts
    assert report.verdict == "no_cache_blocks"
    assert facts["gpu_memory_utilization"] == 0.98
    assert round(facts["weights_gib"], 2) == round(19.74e9 / 2**30, 2)  # decimal GB, in GiB
    assert facts["activation_peak_gib"] == 15.35  # what the budget line leaves unexplained
    assert report.diagnoses[0].remedies[0].action in ("reduce_max_num_batched_tokens", "reduce_max_num_seqs")


def test_a_title_that_names_an_oom_is_not_an_oom() -> None:
    log = "\n".join(
        [
            "# [Bug]: torch.OutOfMemoryError for 0.6.4.post1 but 0.6.3.post1 is working",
            "INFO 12-20 20:25:46 distributed_gpu_executor.py:57] # GPU blocks: 3852, # CPU blocks: 4096",
        ]
    )
    assert diagnose(log).verdict == "healthy"


def test_an_oom_beside_a_process_holding_far_more_than_this_one_allocated_is_a_co_tenant() -> None:
    log = (
        "INFO 06-10 10:00:00 [gpu_model_runner.py:1] Starting to load model deepseek-ai/DeepSeek-R1-Distill-Llama-8B...\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 112.00 MiB. GPU 0 has a total capacity of "
        "47.36 GiB of which 112.44 MiB is free. Process 2585863 has 42.16 GiB memory in use. Process 2587244 has "
        "1.79 GiB memory in use. Of the allocated memory 1.31 GiB is allocated by PyTorch, and 2.00 MiB is reserved "
        "by PyTorch but unallocated.\n"
    )
    top = diagnose(log).diagnoses[0]
    assert (top.rule, top.remedies[0].action) == ("cuda-oom-other-process", "free_gpu_memory")


def test_rays_memory_monitor_and_a_vllm_attribute_error_are_the_environment() -> None:
    ray = (
        "Task was killed due to the node running low on memory. Memory on the node (IP: 10.0.0.3) where the task "
        "was running was 950.1GB / 1000.0GB (0.95), which exceeds the memory usage threshold of 0.95.\n"
    )
    assert diagnose(ray).facts["environment_kind"] == "host memory"
    attr = "ERROR 05-26 00:17:47 [engine.py:448] 'ColumnParallelLinear' object has no attribute 'input_scale'\n"
    report = diagnose(attr)
    assert report.facts["error_type"] == "AttributeError"
    assert (report.verdict, report.diagnoses[0].remedies[0].action) == ("other", "fix_environment")


def test_the_later_of_two_pasted_launch_commands_is_the_one_that_failed() -> None:
    """A second instance's command pasted under the first one's: its fraction and model count,
    and a command cut by the poster's "..." still gives its last figure."""
    log = "\n".join(
        [
            "python3 -m vllm.entrypoints.openai.api_server --model /models/Qwen2.5-72B-Instruct-GPTQ-Int4 \\",
            "        --gpu-memory-utilization 0.75 --max-model-len=16384",
            "python3 -m vllm.entrypoints.openai.api_server --model /models/Qwen2.5-14B-Instruct-GPTQ-Int4 \\",
            "        --gpu-memory-utilization 0.20 --max-model-len=16384",
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
            "initializing the engine.",
        ]
    )
    facts = diagnose(log).primary.facts  # type: ignore[union-attr]
    assert facts["gpu_memory_utilization"]["value"] == 0.2
    assert facts["model"]["value"] == "/models/Qwen2.5-14B-Instruct-GPTQ-Int4"
    cut = diagnose(
        "VLLM_USE_V1=1 vllm serve m --max-model-len 2048 --gpu-memory-utilization 0.98...\nINFO 01-30 03:19:14 kv_cache_utils.py:395] # GPU blocks: 1381"
    )
    assert cut.primary.facts["gpu_memory_utilization"]["value"] == 0.98  # type: ignore[union-attr]


def test_a_kernel_that_cannot_be_captured_in_a_graph_is_eager_mode_not_memory() -> None:
    report = diagnose(
        "turboquant_attn.py:570: qsl = query_start_loc.tolist()\n"
        "RuntimeError: Cannot copy between CPU and CUDA tensors during CUDA graph capture unless the CPU tensor is pinned."
    )
    top = report.diagnoses[0]
    assert (report.verdict, top.remedies[0].action) == ("other", "enforce_eager")
    assert "lower_gpu_memory_utilization" in [a.action for a in top.avoid]


def test_a_triton_oom_alone_is_not_read_as_the_weights() -> None:
    top = diagnose("RuntimeError: Triton Error [CUDA]: out of memory").diagnoses[0]
    assert top.phase != "weight_loading" and top.remedies[0].action == "lower_gpu_memory_utilization"


def test_a_fraction_lowered_by_hand_below_the_catalog_weights_is_too_low_with_medium_confidence() -> None:
    """No figures, but the arithmetic: Qwen2.5-7B's weights (catalog, ≈14 GiB) take most of
    0.2 × 80 GB and leave room at 0.9, so the fraction is what is wrong (an estimate: medium)."""
    report = diagnose(
        "\n".join(
            [
                "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-0)",
                "vllm serve Qwen/Qwen2.5-7B-Instruct --gpu-memory-utilization 0.2",
                "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
                "when initializing the engine.",
            ]
        )
    )
    top = report.diagnoses[0]
    assert (top.cause, top.confidence, top.remedies[0].action) == (
        "utilization_too_low",
        "medium",
        "raise_gpu_memory_utilization",
    )


def test_a_vllm_omni_stage_short_of_free_memory_may_be_held_by_its_own_sibling_stage() -> None:
    """vllm-omni starts each stage as its own engine: the memory "another process" holds may be
    a stage of the same launch, so freeing it is not decisive (medium) and the stage config is
    the other way out."""
    free = (
        "ValueError: Free memory on device (0.49/79.32 GiB) on startup is less than desired GPU memory "
        "utilization (0.6, 47.59 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."
    )
    for marker in (
        "vllm serve /data/models/Qwen/Qwen3-Omni-30B-A3B-Instruct --omni --port 10808",
        '  File "/opt/venv/lib/python3.12/site-packages/vllm_omni/engine/stage_engine_core_proc.py", line 88, in run',
    ):
        top = diagnose("\n".join([marker, free])).diagnoses[0]
        assert top.confidence == "medium" and "fix_config" in [r.action for r in top.remedies], marker
    plain = diagnose("\n".join(["vllm serve Qwen/Qwen3-8B --port 8000", free])).diagnoses[0]
    assert plain.confidence == "high" and "fix_config" not in [r.action for r in plain.remedies]


def test_vllms_own_resolved_length_beats_a_length_named_before_it() -> None:
    log = "\n".join(
        [
            "I later tried --max-model-len 4096 --enforce-eager, which started",
            "(APIServer pid=1) INFO 04-03 15:05:44 [model.py:1678] Using max model len 40960",
            "(EngineCore pid=2) ValueError: Free memory on device cuda:0 (9.02/11.63 GiB) on startup is less than desired GPU memory utilization (0.9, 10.47 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
        ]
    )
    assert diagnose(log).facts["max_model_len"] == 40960


def test_a_free_memory_shortfall_for_a_model_no_card_of_this_size_holds_leads_with_sharding() -> None:
    log = "\n".join(
        [
            "$ vllm serve Qwen/Qwen3.6-35B-A3B --gpu-memory-utilization 0.92",
            "(EngineCore pid=7) ValueError: Free memory on device cuda:0 (9.91/11.49 GiB) on startup is less than desired GPU memory utilization (0.92, 10.57 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
        ]
    )
    top = diagnose(log).diagnoses[0]
    # freeing 1.6 GiB or lowering the fraction passes the check, then fails at the weights
    assert top.remedies[0].action == "increase_tensor_parallel_size"
    assert "even 4-bit" in top.remedies[0].text
    assert "free_gpu_memory" not in [r.action for r in top.remedies[:2]]
    # a 7B model on the same card: the fraction that fits in the free memory leads
    small = diagnose(log.replace("Qwen3.6-35B-A3B", "Qwen2.5-1.5B-Instruct")).diagnoses[0]
    assert small.remedies[0].action == "lower_gpu_memory_utilization"


def test_an_hour_of_worker_waits_after_the_kv_cache_is_a_stalled_start_up_not_a_healthy_one() -> None:
    wait = (
        "(EngineCore pid=7) INFO 10-09 {} [shm_broadcast.py:812] No available shared memory broadcast block "
        "found in 60 seconds. This typically happens when some processes are hanging or doing some "
        "time-consuming work (e.g. compilation, weight/kv cache quantization)."
    )
    lines = ["(EngineCore pid=7) INFO 10-09 11:10:39 [kv_cache_utils.py:1] GPU KV cache size: 186,898 tokens"]
    lines += [wait.format(f"{11 + m // 60}:{m % 60:02d}:47") for m in range(11, 70)]
    report = diagnose("\n".join(lines))
    top = report.diagnoses[0]
    assert (report.verdict, top.rule, top.remedies[0].action) == ("other", "start-up-stalled", "collect_more_log")
    assert report.facts["stalled_minutes"] == 59.0  # from 11:10:47, a minute before the first wait
    # two minutes of waiting, then the server serves: healthy
    served = "\n".join([*lines[:3], "(APIServer pid=1) INFO:     Application startup complete."])
    assert diagnose(served).verdict == "healthy"


def test_an_oom_quoted_above_frames_that_name_the_kv_allocation_is_diagnosed_there() -> None:
    # the OOM text (a title) above a worker's frames: the frames name the step, and the guess that
    # an unnamed OOM was the weights no longer applies
    log = "\n".join(
        [
            "RuntimeError: Worker with error 'NPU out of memory.",
            '(Worker_TP0 pid=22152) ERROR 10-02 05:47:55 [multiproc_executor.py:671]   File "/vllm-workspace/vllm-ascend/vllm_ascend/worker/worker_v1.py", line 336, in initialize_from_config',
            "(Worker_TP0 pid=22152) ERROR 10-02 05:47:55 [multiproc_executor.py:671]     self.model_runner.initialize_kv_cache(kv_cache_config)",
            '(Worker_TP0 pid=22152) ERROR 10-02 05:47:55 [multiproc_executor.py:671]   File "/vllm-workspace/vllm-ascend/vllm_ascend/worker/model_runner_v1.py", line 2709, in initialize_kv_cache',
        ]
    )
    report = diagnose(log)
    assert (report.verdict, report.facts["oom_phase"]) == ("cuda_oom", "kv_cache_allocation")
    assert "oom_phase_inferred" not in report.facts
    assert report.diagnoses[0].remedies[0].action == "lower_gpu_memory_utilization"


def test_an_engine_that_dumps_its_input_failed_on_a_scheduled_batch_after_start_up() -> None:
    log = "\n".join(
        [
            "ERROR 08-22 15:25:08 [dump_input.py:69] Dumping input data",
            "ERROR 08-22 15:25:08 [dump_input.py:71] V1 LLM engine (v0.9.1) with config: model='/data/qwen3-32B', speculative_config=SpeculativeConfig(method='ngram', model=None, num_spec_tokens=10)",
            'ERROR 08-22 15:25:08 [core.py:517]   File "/opt/conda/lib/python3.10/site-packages/vllm/v1/worker/gpu_model_runner.py", line 1356, in execute_model',
            'ERROR 08-22 15:25:08 [core.py:517]   File "/opt/conda/lib/python3.10/site-packages/vllm/v1/sample/rejection_sampler.py", line 205, in rejection_sample',
        ]
    )
    report = diagnose(log)
    top = report.diagnoses[0]
    # not a sampler warm-up OOM: the scheduler built this batch, so start-up was over
    assert (report.verdict, top.rule) == ("healthy", "healthy-served")
    assert "request-time failure" in top.explanation


def test_kunluns_collective_library_failing_is_the_environment() -> None:
    log = "\n".join(
        [
            "[XCCL][init.cpp:1227] host 10.0.0.5 addr_window check failed",
            "ValueError: [INVALID PARAMETER]: error code= 1(at .../torch_xmlir/csrc/new_xccl/XCCLUtils.hpp:53)",
            "RuntimeError: Engine core initialization failed. See root cause above.",
        ]
    )
    report = diagnose(log)
    assert (report.verdict, report.diagnoses[0].remedies[0].action) == ("other", "fix_environment")


def test_064s_profile_line_counts_the_weights_once_and_names_no_co_tenant() -> None:
    # 0.6.4: peak_torch_memory and initial_memory_usage both hold this instance's weights
    log = "\n".join(
        [
            "INFO 11-15 10:00:10 model_runner.py:1072] Loading model weights took 14.9888 GB",
            "INFO 11-15 10:00:22 worker.py:232] Memory profiling results: total_gpu_memory=22.05GiB "
            "initial_memory_usage=15.44GiB peak_torch_memory=16.02GiB memory_usage_post_profile=15.90Gib "
            "non_torch_memory=0.40GiB kv_cache_size=-0.99GiB gpu_memory_utilization=0.70",
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
        ]
    )
    report = diagnose(log)
    assert report.facts["activation_peak_gib"] == 1.03
    assert report.facts["others_before_profile_gib"] == 0.05
    top = report.diagnoses[0]
    assert top.cause != "other_process"
    assert top.remedies[0].action == "raise_gpu_memory_utilization"


def test_an_old_torch_oom_leaves_the_cuda_context_out_of_other_processes() -> None:
    # torch <= 2.0 prints what PyTorch reserved; the ~1 GiB beside it is this process's context
    oom = (
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total "
        "capacity; 14.56 GiB already allocated; 3.44 MiB free; 14.73 GiB reserved in total by PyTorch)"
    )
    assert "oom_other_process_gib" not in diagnose(oom).facts
    held = oom.replace("14.73 GiB reserved", "8.73 GiB reserved").replace("14.56 GiB already", "8.56 GiB already")
    assert diagnose(held).facts["oom_other_process_gib"] == 7.047


def test_an_oom_in_the_old_profiling_step_is_the_profile_run() -> None:
    log = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3/dist-packages/vllm/worker/worker.py", line 99, in profile_num_available_blocks',
            "    self.model_runner.profile_run()",
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 39.39 GiB total capacity; 36.10 GiB already allocated; 1.02 GiB free; 37.12 GiB reserved in total by PyTorch)",
        ]
    )
    assert diagnose(log).facts["oom_phase"] == "profile_run"


def test_shared_weights_that_exceed_the_fraction_lead_with_a_higher_one() -> None:
    log = (
        "ValueError: Externally held weights on device cuda:0 (60.0/79.19 GiB) exceed the desired GPU memory "
        "utilization (0.72, 57.02 GiB). Increase GPU memory utilization or reduce GPU memory used by other processes."
    )
    report = diagnose(log)
    top = report.diagnoses[0]
    assert (report.verdict, top.remedies[0].action, top.remedies[0].value) == (
        "insufficient_free_memory_at_startup",
        "raise_gpu_memory_utilization",
        0.8,
    )
    assert "lower_gpu_memory_utilization" in [a.action for a in top.avoid]


def test_the_logs_own_word_on_graph_profiling_beats_the_versions_default() -> None:
    from kvdoctor.reader.derive import graphs_subtracted
    from kvdoctor.reader.facts import Fact

    def subtracted(version: str, said: bool | None) -> bool:
        facts = {"vllm_version": Fact("vllm_version", version, None, None, False, "log")}
        if said is not None:
            facts["graph_profiling_enabled"] = Fact("graph_profiling_enabled", said, 1, None, False, "log")
        return graphs_subtracted(facts)

    assert subtracted("0.23.0", None) and not subtracted("0.19.0", None)
    assert not subtracted("0.23.0", False) and subtracted("0.19.0", True)
    report = diagnose(
        "WARNING 08-19 07:51:03 [gpu_worker.py:355] CUDA graph memory profiling is disabled "
        "(VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0). Without it, CUDA graph memory is not accounted for."
    )
    assert report.facts["graph_profiling_enabled"] is False


def test_an_oom_in_the_cuda_graph_memory_profile_leads_with_eager_mode() -> None:
    log = "\n".join(
        [
            "(EngineCore pid=2871) INFO 06-15 10:00:50 [gpu_model_runner.py:3661] Model loading took 67.72 GiB memory and 45.12 seconds",
            "(EngineCore pid=2871) INFO 06-15 10:00:55 [gpu_model_runner.py:4500] Profiling CUDA graph memory: PIECEWISE=51 (largest=512), FULL=35 (largest=256)",
            "(EngineCore pid=2871) ERROR 06-15 10:01:00 [core.py:1100] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB. GPU 0 has a total capacity of 79.19 GiB of which 21.06 MiB is free.",
        ]
    )
    report = diagnose(log)
    top = report.diagnoses[0]
    assert (report.facts["oom_phase"], top.remedies[0].action) == ("profile_run", "enforce_eager")


def test_a_relaunch_that_started_still_names_the_failure_before_it() -> None:
    log = "\n".join(
        [
            BANNER,
            "(EngineCore_DP0 pid=41) INFO 01-15 06:46:16 [gpu_worker.py:1] Available KV cache memory: -8.59 GiB",
            "(EngineCore_DP0 pid=41) ERROR 01-15 06:46:16 [core.py:1] ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
            BANNER,
            "(EngineCore_DP0 pid=77) INFO 01-15 06:47:41 [gpu_worker.py:1] Available KV cache memory: 7.73 GiB",
            "(APIServer pid=1) INFO:     Application startup complete.",
        ]
    )
    report = diagnose(log)
    assert report.verdict == "healthy"
    assert "an earlier start-up in this log (lines 1-3) failed (no_cache_blocks); a later one started" in report.notes


def _figureless_no_kv(model: str, card: str) -> str:
    return "\n".join(
        [
            f"$ vllm serve {model} --tensor-parallel-size 1",
            "INFO 02-01 10:00:03 [api_server.py:1043] vLLM API server version 0.8.5",
            f"GPU 0: {card} (UUID: GPU-1234)",
            "ERROR 02-01 10:03:00 [core.py:396] ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
        ]
    )


def test_weights_larger_than_the_card_are_the_cause_whatever_the_default_batch() -> None:
    # (`nvidia-smi -L` lists one GPU: no tensor parallelism to offer on this host, a smaller
    # checkpoint is the step; with two listed, TP 2 is the most it can have)
    top = diagnose(_figureless_no_kv("Qwen/Qwen2.5-72B-Instruct", "NVIDIA A100-SXM4-80GB")).diagnoses[0]
    assert (top.cause, top.remedies[0].action) == ("model_too_large", "use_quantized_checkpoint")
    assert "increase_tensor_parallel_size" not in [r.action for r in top.remedies]
    two = _figureless_no_kv("Qwen/Qwen2.5-72B-Instruct", "NVIDIA A100-SXM4-80GB").replace(
        "(UUID: GPU-1234)", "(UUID: GPU-1234)\nGPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-5678)"
    )
    top = diagnose(two).diagnoses[0]
    assert (top.remedies[0].action, top.remedies[0].value) == ("increase_tensor_parallel_size", 2)


def test_a_later_releases_1024_default_alone_is_no_profile_overhead_claim() -> None:
    # a 7B model on an 80 GiB card, 0.8.5, no figures: the card is looked at first
    top = diagnose(_figureless_no_kv("Qwen/Qwen2.5-7B-Instruct", "NVIDIA H100 80GB HBM3")).diagnoses[0]
    assert top.cause != "profile_overhead"
    assert top.remedies[0].action == "free_gpu_memory"


def test_the_v1_wrapper_message_does_not_swallow_a_relaunch_after_it() -> None:
    # "… Failed core proc(s): {}" closes its message: the wrapper's goodbye and the next launch
    # are lines of their own, and the failure above stays the verdict
    log = "\n".join(
        [
            "INFO 10-01 23:05:34 [api_server.py:1896] vLLM API server version 0.10.2",
            "(EngineCore_DP0 pid=9) INFO 10-01 23:05:51 [gpu_model_runner.py:2392] Model loading took 13.1357 GiB and 4.76 seconds",
            "(EngineCore_DP0 pid=9) INFO 10-01 23:05:53 [gpu_worker.py:298] Available KV cache memory: -1.66 GiB",
            "(EngineCore_DP0 pid=9) ERROR 10-01 23:05:53 [core.py:718] ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
            "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
            "vLLM server exited with status 1",
            "python3 -m vllm.entrypoints.openai.api_server --model llava-hf/LLaVA-NeXT-Video-7B-hf --gpu-memory-utilization 0.83",
        ]
    )
    report = diagnose(log)
    assert report.verdict == "no_cache_blocks"
    assert report.facts["weights_gib"] == 13.1357


def test_the_launcher_naming_the_server_on_its_port_is_no_new_start_up() -> None:
    log = "\n".join(
        [
            BANNER,
            "(EngineCore_DP0 pid=9) INFO 01-15 06:46:16 [gpu_worker.py:1] Available KV cache memory: 15.31 GiB",
            "(APIServer pid=7) INFO:     Application startup complete.",
            "(APIServer pid=7) WARNING 01-15 07:41:06 [launcher.py:98] port 8001 is used by process psutil.Process(pid=7, name='vllm', status='running') launched with command:",
            "(APIServer pid=7) WARNING 01-15 07:41:06 [launcher.py:98] /usr/bin/python /usr/bin/vllm serve Qwen/Qwen2.5-3B --port 8001",
            "(APIServer pid=7) INFO 01-15 07:41:06 [launcher.py:101] Shutting down FastAPI HTTP server.",
        ]
    )
    report = diagnose(log)
    assert len(report.attempts) == 1
    assert (report.verdict, report.facts["kv_cache_gib"]) == ("healthy", 15.31)


def test_an_oom_after_the_weights_loaded_is_the_profiling_pass_not_the_weights() -> None:
    log = "\n".join(
        [
            "INFO 08-20 03:09:59 [default_loader.py:262] Loading weights took 2.66 seconds",
            "INFO 08-20 03:10:00 [model_runner.py:1112] Model loading took 16.5557 GiB and 2.80 seconds",
            "ERROR 08-20 03:10:01 [engine.py:467] CUDA out of memory. Tried to allocate 33.75 GiB. GPU 0 has a total capacity of 44.40 GiB of which 26.88 GiB is free. Including non-PyTorch memory, this process has 17.52 GiB memory in use.",
        ]
    )
    report = diagnose(log)
    top = report.diagnoses[0]
    assert (top.rule, report.facts["oom_phase"]) == ("cuda-oom-profile-run", "profile_run")
    assert top.remedies[0].action != "increase_tensor_parallel_size"


def test_a_kv_budget_printed_as_zero_names_no_shortfall() -> None:
    # vllm-omni's "0.0 GiB (profiling fallback)" is clamped: raising the fraction is not shown to fit
    log = "\n".join(
        [
            "(Worker pid=34506) INFO 04-16 09:13:25 [base.py:150] Available KV cache memory: 0.0 GiB (profiling fallback)",
            "(StageEngineCoreProc pid=33984) ERROR 04-16 09:13:25 [stage_engine_core_proc.py:98] ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
        ]
    )
    report = diagnose(log)
    assert "min_total_gib_to_fit_by_raising" not in report.facts
    assert report.diagnoses[0].remedies[0].action != "raise_gpu_memory_utilization"


def test_a_per_process_cap_is_not_a_full_card() -> None:
    log = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.19 GiB of which 40.00 GiB is free. Including non-PyTorch memory, this process has 39.10 GiB memory in "
        "use. 39.59 GiB allowed; Of the allocated memory 37.00 GiB is allocated by PyTorch, and 1.50 GiB is "
        "reserved by PyTorch but unallocated."
    )
    report = diagnose(log)
    top = report.diagnoses[0]
    assert (top.rule, report.facts["oom_allowed_gib"]) == ("cuda-oom-process-cap", 39.59)
    assert [a.action for a in top.avoid][0] == "free_gpu_memory"


def test_an_error_quoted_above_its_detail_log_is_that_start_up() -> None:
    # the reporter's error first, then the run's log, which stops at the banner: one start-up
    log = "\n".join(
        [
            "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla V100-SXM2-32GB GPU has compute capability 7.0. You can use float16 instead by explicitly setting the`dtype` flag in CLI, for example: --dtype=half.",
            "",
            "detail log:",
            "INFO 04-16 12:12:41 config.py:820] Chunked prefill is enabled with max_num_batched_tokens=512.",
            "INFO 04-16 12:12:41 llm_engine.py:174] Initializing an LLM engine (v0.5.4) with config: model='deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B', dtype=torch.bfloat16, max_seq_len=131072, tensor_parallel_size=1",
        ]
    )
    report = diagnose(log)
    assert len(report.attempts) == 1
    assert (report.verdict, report.diagnoses[0].remedies[0].action) == ("other", "fix_config")
    assert report.facts["max_model_len"] == 131072


def test_a_banner_with_a_redacted_open_quote_still_gives_its_settings() -> None:
    log = (
        "INFO 05-29 21:12:40 llm_engine.py:100] Initializing an LLM engine (v0.4.2) with config: model='MODELS, "
        "speculative_config=None, tokenizer='TOKENIZER', skip_tokenizer_init=False, dtype=torch.bfloat16, "
        "max_seq_len=4096, download_dir=None, tensor_parallel_size=2, disable_custom_all_reduce=False, seed=0)"
    )
    facts = diagnose(log).facts
    assert (facts["max_model_len"], facts["tensor_parallel_size"]) == (4096, 2)


def test_a_port_an_old_container_holds_is_the_failure_not_its_access_log() -> None:
    log = "\n".join(
        [
            "docker: Error response from daemon: failed to set up container networking: driver failed programming external connectivity on endpoint x (d9): Bind for 0.0.0.0:8000 failed: port is already allocated",
            '(APIServer pid=1) INFO:     10.0.0.1:44956 - "GET /metrics HTTP/1.1" 200 OK',
            '(APIServer pid=1) INFO:     10.0.0.1:44956 - "GET /metrics HTTP/1.1" 200 OK',
        ]
    )
    report = diagnose(log)
    assert (report.verdict, report.diagnoses[0].rule, report.facts["environment_kind"]) == (
        "other",
        "other-environment-refused",
        "port",
    )


def test_an_error_a_worker_raised_inside_the_graph_capture_leads_with_eager_mode() -> None:
    log = "\n".join(
        [
            "(VllmWorker rank=0 pid=36105) ERROR 08-21 08:26:21 [multiproc_executor.py:546] Traceback (most recent call last):",
            '(VllmWorker rank=0 pid=36105) ERROR 08-21 08:26:21 [multiproc_executor.py:546]   File "/vllm-workspace/vllm-ascend/vllm_ascend/worker/model_runner_v1.py", line 2430, in capture_model',
            "(VllmWorker rank=0 pid=36105) ERROR 08-21 08:26:21 [multiproc_executor.py:546] RuntimeError: NPU function error: c10_npu::acl::AclrtSynchronizeStreamWithTimeout(copy_stream), error code is 107027",
            "(EngineCore_DP0 pid=35698) ERROR 08-21 08:26:35 [core.py:700] EngineCore failed to start.",
        ]
    )
    top = diagnose(log).diagnoses[0]
    assert (top.rule, top.remedies[0].action) == ("other-non-memory-failure", "enforce_eager")


def test_a_vllm_logging_prefix_keeps_each_line_s_level_and_clock() -> None:
    # VLLM_LOGGING_PREFIX puts a literal before the level: a WARNING that names an ImportError
    # while falling back stays a warning, not the failure
    log = "\n".join(
        [
            "[svc-a] INFO 05-01 12:00:00 [api_server.py:1000] vLLM API server version 0.9.1",
            "[svc-a] WARNING 05-01 12:00:01 [utils.py:100] Failed to import flash_attn; falling back. ImportError: libcudart.so.11.0: cannot open shared object file",
            "[svc-a] INFO 05-01 12:00:05 [gpu_model_runner.py:1800] Model loading took 14.99 GiB and 10.0 seconds",
            "[svc-a] INFO 05-01 12:00:15 [gpu_worker.py:200] Available KV cache memory: 11.20 GiB",
        ]
    )
    report = diagnose(log)
    assert (report.verdict, report.facts["failed"]) == ("healthy", False)


def test_another_compose_service_serving_is_not_this_server_starting() -> None:
    # `docker compose logs` interleaves services: the gateway's uvicorn start is not vLLM's
    log = "\n".join(
        [
            "vllm-1  | (EngineCore_DP0 pid=9) INFO 03-08 03:06:37 [gpu_model_runner.py:4338] Model loading took 8.38 GiB memory and 2.2 seconds",
            "vllm-1  | (EngineCore_DP0 pid=9) INFO 03-08 03:06:45 [gpu_worker.py:424] Available KV cache memory: -1.2 GiB",
            "vllm-1  | (EngineCore_DP0 pid=9) ERROR 03-08 03:06:45 [core.py:700] ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
            "gateway-1  | INFO:     Application startup complete.",
        ]
    )
    report = diagnose(log)
    assert (report.verdict, report.facts["started"]) == ("no_cache_blocks", False)


def test_an_access_log_inside_json_log_records_is_still_serving() -> None:
    import json

    lines = [
        "(EngineCore pid=7) INFO 06-13 20:08:40 [gpu_worker.py:1] Available KV cache memory: 10.0 GiB",
        '(APIServer pid=2) INFO:     10.0.0.1:5000 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    ]
    plain = diagnose("\n".join(lines))
    carried = diagnose("\n".join(json.dumps({"log": line + "\n", "stream": "stderr"}) for line in lines))
    assert (carried.verdict, carried.facts["started"]) == (plain.verdict, plain.facts["started"]) == ("healthy", True)


def test_v0_profiling_a_long_context_leads_with_a_shorter_length() -> None:
    # V0 without chunked prefill profiles one batch as long as max_model_len (the model's own
    # 128k here, from the catalog) and refuses a --max-num-batched-tokens below it
    log = "\n".join(
        [
            "INFO 06-26 07:40:00 llm_engine.py:161] Initializing an LLM engine (v0.5.0.post1) with config: model='microsoft/Phi-3-vision-128k-instruct', tokenizer='microsoft/Phi-3-vision-128k-instruct', dtype=torch.float16, tensor_parallel_size=1",
            "INFO 06-26 07:48:15 model_runner.py:160] Loading model weights took 7.7 GB",
            "Traceback (most recent call last):",
            '  File "/vllm/vllm/worker/worker.py", line 162, in determine_num_available_blocks',
            "    self.model_runner.profile_run()",
            '  File "/vllm/vllm/worker/model_runner.py", line 844, in profile_run',
            "    self.execute_model(seqs, kv_caches)",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 12.00 GiB. GPU 0 has a total capacity of 23.65 GiB of which 6.10 GiB is free.",
        ]
    )
    report = diagnose(log)
    top = report.diagnoses[0]
    assert (report.verdict, top.remedies[0].action) == ("cuda_oom", "lower_max_model_len")
    assert "131072" in top.remedies[0].text and "estimate" in top.remedies[0].text
    assert report.facts["max_model_len_estimate"] == 131072
    assert report.facts["batch_follows_long_length"] is True
    # with chunked prefill the batch no longer follows the length
    chunked = diagnose(log.replace("tensor_parallel_size=1", "tensor_parallel_size=1, enable_chunked_prefill=True"))
    assert chunked.diagnoses[0].remedies[0].action == "reduce_max_num_batched_tokens"


def test_graph_capture_oom_at_a_fraction_of_098_leads_with_a_lower_fraction() -> None:
    log = "\n".join(
        [
            "INFO 03-01 10:00:00 llm_engine.py:100] Initializing an LLM engine (v0.4.1) with config: model='Qwen/Qwen1.5-14B-Chat', gpu_memory_utilization=0.98, tensor_parallel_size=1",
            "INFO 03-01 10:01:00 llm_engine.py:300] # GPU blocks: 1200, # CPU blocks: 512",
            "INFO 03-01 10:01:02 model_runner.py:900] Capturing the model for CUDA graphs. This may lead to unexpected consequences if the model is not static.",
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 39.39 GiB of which 4.00 MiB is free.",
        ]
    )
    top = diagnose(log).diagnoses[0]
    assert (top.remedies[0].action, top.remedies[0].value) == ("lower_gpu_memory_utilization", 0.9)
    assert top.remedies[1].action == "enforce_eager"
    # at vLLM's default fraction, eager mode still leads
    default = diagnose(log.replace("gpu_memory_utilization=0.98, ", "")).diagnoses[0]
    assert default.remedies[0].action == "enforce_eager"


def test_a_length_a_little_short_at_a_fraction_set_low_leads_with_the_fraction() -> None:
    line = (
        "(EngineCore_DP0 pid=9) ERROR 03-02 10:00:05 [core.py:1000] ValueError: To serve at least one request with "
        "the model's max seq len (8192), (0.44 GiB KV cache is needed, which is larger than the available KV cache "
        "memory (0.41 GiB). Based on the available memory, the estimated maximum model length is 7760. Try "
        "increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
    )
    banner = "(APIServer pid=1) INFO 03-02 10:00:00 [utils.py:100] non-default args: {'model': 'Qwen/Qwen2.5-7B-Instruct', 'max_model_len': 8192, 'gpu_memory_utilization': %s}"
    low = diagnose("\n".join([banner % "0.65", line])).diagnoses[0]
    assert (low.remedies[0].action, low.remedies[0].value) == ("raise_gpu_memory_utilization", 0.7)
    assert low.remedies[1].action == "lower_max_model_len"
    # at vLLM's own default the shorter length still leads
    usual = diagnose("\n".join([banner % "0.9", line])).diagnoses[0]
    assert usual.remedies[0].action == "lower_max_model_len"


def test_the_api_server_polling_for_a_silent_engine_core_for_minutes_is_a_stall() -> None:
    poll = "(APIServer pid=1) DEBUG 08-09 {} [v1/engine/utils.py:1262] Waiting for 1 local, 0 remote core engine proc(s) to start."
    stamps = [f"20:{m:02d}:{s:02d}" for m in range(55, 62) for s in (0, 10, 20, 30, 40, 50)]
    report = diagnose("\n".join(poll.format(t) for t in stamps))
    assert report.diagnoses[0].rule == "start-up-stalled"
    assert "core engine proc(s) to start" in report.diagnoses[0].explanation
    # the core downloading meanwhile (its progress bars between the polls) is slow, not stalled
    bar = "(EngineCore_DP0 pid=212) model-00002-of-00005.safetensors:  {}%|███ | 1.17G/3.96G"
    loading = [piece for i, t in enumerate(stamps) for piece in (poll.format(t), bar.format(i))]
    assert all(d.rule != "start-up-stalled" for d in diagnose("\n".join(loading)).diagnoses)


def test_torchs_rendezvous_retrying_an_unreachable_host_is_the_network() -> None:
    log = "\n".join(
        [
            "INFO 10-28 11:45:00 [__init__.py:216] Automatically detected platform cpu.",
            "[W1028 11:51:17.703484000 TCPStore.cpp:347] [c10d] TCP client failed to connect/validate to host 10.0.0.1:53758 - retrying (try=10, timeout=1800000ms, delay=30805ms): Failed to recv, got 0 bytes.",
        ]
    )
    report = diagnose(log)
    top = report.diagnoses[0]
    assert (report.verdict, top.remedies[0].action, report.facts["environment_kind"]) == (
        "other",
        "fix_environment",
        "network",
    )


def test_a_max_len_failure_where_the_weights_fill_the_card_is_medium_with_sharding_second() -> None:
    log = "\n".join(
        [
            "(EngineCore_DP0 pid=9) INFO 09-01 10:00:00 [gpu_model_runner.py:2000] Model loading took 67.75 GiB memory and 40.1 seconds",
            "(EngineCore_DP0 pid=9) INFO 09-01 10:00:30 [gpu_worker.py:300] Available KV cache memory: 1.04 GiB",
            "(EngineCore_DP0 pid=9) ERROR 09-01 10:00:31 [core.py:900] ValueError: To serve at least one request with the model's max seq len (8192), (2.5 GiB KV cache is needed, which is larger than the available KV cache memory (1.04 GiB). Based on the available memory, the estimated maximum model length is 3392. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
        ]
    )
    top = diagnose(log).diagnoses[0]
    assert (top.confidence, [r.action for r in top.remedies[:2]]) == (
        "medium",
        ["lower_max_model_len", "increase_tensor_parallel_size"],
    )


def test_an_oom_quoted_above_a_start_up_that_sized_its_cache_is_no_failure() -> None:
    # a note above a CI log quotes the title of a later failure; the start-up itself went well
    quoted = '# bug: flaky test failure: /wake_up fails with "CUDA Error: out of memory"'
    head = "(EngineCore pid=418) INFO 09-02 20:06:36 [v1/worker/gpu_worker.py:560] "
    log = "\n".join([quoted, f"{head}Available KV cache memory: 64.27 GiB"])
    assert diagnose(log).verdict in ("healthy", "unknown")
    # the same words printed by the run (not quoted) before the KV figure of another rank stay a failure
    raised = "(Worker rank=1 pid=9) ERROR 09-02 20:06:30 [multiproc_executor.py:597] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    assert diagnose("\n".join([raised, f"{head}Available KV cache memory: 64.27 GiB"])).verdict == "cuda_oom"


def test_a_chat_template_error_on_a_request_after_start_up_is_no_start_up_failure() -> None:
    api = "(APIServer pid=7565) "
    log = "\n".join(
        [
            "(EngineCore_DP0 pid=7600) INFO 02-27 14:28:29 [kv_cache_utils.py:1087] GPU KV cache size: 53,168 tokens",
            f"{api}INFO 02-27 14:29:02 [api_server.py:1912] Starting vLLM API server 0 on http://127.0.0.1:8000",
            f"{api}INFO:     Application startup complete.",
            f"{api}ERROR 02-27 15:15:38 [chat_utils.py:1645] An error occurred in `transformers` while applying chat template",
            f"{api}ERROR 02-27 15:15:38 [chat_utils.py:1645] Traceback (most recent call last):",
            f'{api}ERROR 02-27 15:15:38 [chat_utils.py:1645]   File "/venv/lib/python3.12/site-packages/vllm/entrypoints/chat_utils.py", line 1632, in apply_hf_chat_template',
            f"{api}ERROR 02-27 15:15:38 [chat_utils.py:1645] jinja2.exceptions.TemplateError: Conversation roles must alternate user/assistant/user/assistant/...",
        ]
    )
    assert diagnose(log).verdict == "healthy"


def test_figures_in_lines_new_to_round_34() -> None:
    # a reporter's retyped free-memory check, the CPU backend's own KV budget, tpu-inference's shape
    retyped = (
        "Free memory on device (0.75/14.57GiB) on startup is less than desired GPU memory utilization(0.4,5.83GiB)."
    )
    facts = diagnose(retyped).facts
    assert (facts["free_gpu_gib_at_startup"], facts["total_gpu_gib"], facts["requested_gib"]) == (0.75, 14.57, 5.83)
    cpu = (
        "(Worker pid=36) INFO 08-18 02:57:12 [cpu_worker.py:235] Explicitly set (0.0/11.65) GiB for KV cache on node 0."
    )
    assert diagnose(cpu).facts["kv_cache_gib"] == 0.0
    tpu = "INFO 07-08 01:14:18 [tpu_jax_runner.py:237] Init kv-cache | shape=32 * (3168, 256, 16, 128) | sharding=NamedSharding(mesh=Mesh('data': 1, 'model': 4))"
    assert diagnose(tpu).facts["gpu_blocks"] == 3168


def test_a_tiny_model_whose_printed_overhead_fills_a_fraction_set_low_raises_the_fraction() -> None:
    # vllm-metal prints its whole budget: no co-tenant to suspect, the fraction is what is short
    log = "\n".join(
        [
            "INFO [cache_policy.py:1307] Paged attention: VLLM_METAL_MEMORY_FRACTION=auto, using --gpu-memory-utilization=0.15",
            "ValueError: Paged attention: not enough Metal memory for KV cache. metal_limit=5.73GB, fraction=0.15, usable_metal=0.86GB, model_memory=0.34GB, overhead=1.42GB, kv_budget=-0.89GB.",
        ]
    )
    top = diagnose(log).diagnoses[0]
    assert (top.rule, top.remedies[0].action) == ("no-cache-blocks-utilization-too-low", "raise_gpu_memory_utilization")


def test_the_process_a_container_lists_under_its_host_pid_is_this_one() -> None:
    # no "this process has" inside a container: the one process listed holds what PyTorch allocated
    # and reserved (plus a context), so it is this worker, not a co-tenant
    oom = (
        "(VllmWorkerProcess pid=214) ERROR 09-27 05:20:38 multiproc_worker_utils.py:233] Exception in worker VllmWorkerProcess "
        "while processing method determine_num_available_blocks: CUDA out of memory. Tried to allocate 19.63 GiB. GPU 3 has a total "
        "capacity of 79.15 GiB of which 17.73 GiB is free. Process {pid} has {held} GiB memory in use. Of the allocated memory 56.64 GiB "
        "is allocated by PyTorch, and 4.07 GiB is reserved by PyTorch but unallocated."
    )
    assert diagnose(oom.format(pid=78729, held="61.41")).diagnoses[0].rule != "cuda-oom-other-process"
    # a process holding far more than this one's PyTorch allocated is someone else
    other = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which "
        "1.12 GiB is free. Process 4242 has 42.16 GiB memory in use. Of the allocated memory 1.31 GiB is allocated by PyTorch, "
        "and 0.12 GiB is reserved by PyTorch but unallocated."
    )
    assert diagnose(other).diagnoses[0].rule == "cuda-oom-other-process"


def test_an_oom_message_wrapped_after_a_word_its_figure_follows_is_joined() -> None:
    log = "HIP out of memory. Tried to allocate 13.54 GiB. GPU 0 has a total capacity of\n255.98 GiB of which 12.74 GiB is free."
    assert diagnose(log).facts["oom_total_gib"] == 255.98
    cut = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 100.00 MiB (GPU 0; 12.00 GiB total"
    assert diagnose(cut).facts["oom_total_gib"] == 12.0


def test_an_npu_that_prints_zero_available_memory_leads_with_the_card_not_the_fraction() -> None:
    # a second instance on one Ascend card: "Available memory: 0" is a clamp, not a shortfall of 0
    log = (
        "(EngineCore_DP0 pid=634) INFO 11-22 10:01:28 [worker_v1.py:256] Available memory: 0, total memory: 65452113920"
    )
    top = diagnose(log).diagnoses[0]
    assert top.remedies[0].action == "free_gpu_memory"
    assert "raise_gpu_memory_utilization" not in [r.action for r in top.remedies[:1]]


def test_v1s_non_default_arguments_without_the_fraction_show_the_default_in_force() -> None:
    # a length far from fitting at vLLM's default: with the non-default arguments listed (no
    # fraction among them) no launcher set it lower, so raising it is ruled out as with 0.9 typed
    head = "(EngineCore_DP0 pid=9) "
    tail = [
        f"{head}INFO 09-15 09:01:10 [gpu_worker.py:298] Available KV cache memory: 3.21 GiB",
        f"{head}ERROR 09-15 09:01:11 [core.py:700] ValueError: To serve at least one request with the models's max seq len (40960), (5.62 GiB KV cache is needed, which is larger than the available KV cache memory (3.21 GiB). Based on the available memory, the estimated maximum model length is 23360. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
    ]
    listed = "(APIServer pid=1) INFO 09-15 09:00:02 [utils.py:328] non-default args: {'model_tag': 'Qwen/Qwen3-8B', 'model': 'Qwen/Qwen3-8B'}"
    top = diagnose("\n".join([listed, *tail])).diagnoses[0]
    assert "raise_gpu_memory_utilization" in [a.action for a in top.avoid]
    assert "raise_gpu_memory_utilization" not in [r.action for r in top.remedies]
    # without that list, a wrapper may have set the fraction: raising is offered, as a question
    blind = diagnose("\n".join(tail)).diagnoses[0]
    assert "raise_gpu_memory_utilization" in [r.action for r in blind.remedies]


def _free_memory_failure(first_line: str) -> str:
    return "\n".join(
        [
            first_line,
            BANNER,
            "(EngineCore_DP0 pid=3052) ERROR 01-15 06:46:16 [core.py:1] ValueError: Free memory on device "
            "(1.33/23.98 GiB) on startup is less than desired GPU memory utilization (0.95, 22.79 GiB). "
            "Decrease GPU memory utilization or reduce GPU memory used by other processes.",
        ]
    )


def test_the_command_that_lists_the_card_s_processes_follows_the_vendor() -> None:
    """A remedy that says "look at the card" names the tool that reads this vendor's card: NVIDIA's
    by default, AMD's where the platform is ROCm, Ascend's where vllm-ascend runs."""
    commands = {}
    for vendor, line in {
        "nvidia": "INFO 01-15 06:45:00 [__init__.py:1] Automatically detected platform cuda.",
        "amd": "INFO 01-15 06:45:00 [__init__.py:1] Automatically detected platform rocm.",
        "ascend": "INFO 01-15 06:45:00 [__init__.py:1] Platform plugin ascend is activated (vllm_ascend)",
    }.items():
        top = diagnose(_free_memory_failure(line)).diagnoses[0]
        commands[vendor] = next(r.text for r in top.remedies if r.action == "free_gpu_memory")
    assert "`nvidia-smi --query-compute-apps=pid,used_memory --format=csv`" in commands["nvidia"]
    assert "`amd-smi process`" in commands["amd"] and "nvidia-smi" not in commands["amd"]
    assert "`npu-smi info`" in commands["ascend"] and "nvidia-smi" not in commands["ascend"]


V1 = "(EngineCore pid=41) "


def test_a_traceback_under_the_capture_line_after_kv_sizing_is_the_capture() -> None:
    """The model's forward in a cut traceback is the profiling pass only before the KV cache is
    sized: under "Capturing CUDA graphs" after it, the capture failed (a guess: low), and a
    fraction above 0.95 is the setting to lower."""
    log = "\n".join(
        [
            V1 + "INFO 05-28 08:00:20 [gpu_worker.py:1] Available KV cache memory: 6.37 GiB",
            V1 + "INFO 05-28 08:00:20 [gpu_worker.py:1] Estimated CUDA graph memory: 0.52 GiB total",
            V1 + "INFO 05-28 08:00:20 [arg_utils.py:1] non-default args: {'gpu_memory_utilization': 0.9764}",
            "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):   0%|          | 0/51 [00:00<?, ?it/s]",
            V1 + "ERROR 05-28 08:00:36 [core.py:1142] EngineCore failed to start.",
            V1 + "ERROR 05-28 08:00:36 [core.py:1142] Traceback (most recent call last):",
            V1 + 'ERROR 05-28 08:00:36 [core.py:1142]   File "/venv/vllm/model_executor/models/qwen2.py", '
            "line 389, in forward",
        ]
    )
    report = diagnose(log)
    top = report.diagnoses[0]
    assert (report.verdict, top.phase, top.confidence) == ("cuda_oom", "cuda_graph_capture", "low")
    assert (top.remedies[0].action, top.remedies[0].value) == ("lower_gpu_memory_utilization", 0.9)


def _capture_oom(tried: str, free: str) -> str:
    return "\n".join(
        [
            V1 + "INFO 08-14 16:06:01 [gpu_worker.py:1] Available KV cache memory: 9.5 GiB",
            "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  10%|#         | 5/51 [00:01<00:09]",
            V1 + f"ERROR 08-14 16:06:55 [core.py:1] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
            f"{tried}. GPU 0 has a total capacity of 79.25 GiB of which {free} is free. Including non-PyTorch "
            "memory, this process has 78.08 GiB memory in use.",
        ]
    )


def test_a_capture_asking_for_gibs_at_once_needs_a_lower_fraction_not_eager_mode() -> None:
    """A graph's own pool takes MiBs; one allocation of GiBs in the capture is a buffer the batch
    needs in eager mode too: the fraction leaves it room (0.9 − (2.96 − 1.16 + 1) / 79.25 → 0.86)."""
    top = diagnose(_capture_oom("2.96 GiB", "1.16 GiB")).diagnoses[0]
    assert (top.phase, top.remedies[0].action, top.remedies[0].value) == (
        "cuda_graph_capture",
        "lower_gpu_memory_utilization",
        0.86,
    )
    assert top.remedies[1].action == "enforce_eager"
    small = diagnose(_capture_oom("20.00 MiB", "5.00 MiB")).diagnoses[0]
    assert small.remedies[0].action == "enforce_eager"


def test_an_oom_with_the_card_free_is_the_allocator_not_the_memory() -> None:
    log = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 7 has a total capacity of "
        "79.11 GiB of which 66.43 GiB is free. Including non-PyTorch memory, this process has 0 bytes memory in "
        "use. Of the allocated memory 8.51 GiB is allocated by PyTorch, and 856.16 MiB is reserved by PyTorch "
        "but unallocated."
    )
    report = diagnose(log)
    top = report.diagnoses[0]
    assert (report.verdict, top.remedies[0].action) == ("other", "fix_environment")
    assert {"free_gpu_memory", "lower_gpu_memory_utilization"} <= {a.action for a in top.avoid}


def test_the_dtype_checks_frame_alone_says_use_half_precision() -> None:
    log = "\n".join(
        [
            "INFO 02-20 21:46:00 llm_engine.py:70] Initializing an LLM engine with config: model='Qwen-7B', "
            "dtype=torch.bfloat16, max_seq_len=8192",
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3.10/dist-packages/vllm/worker/worker.py", line 71, in init_model',
            "    _check_if_gpu_supports_dtype(self.model_config.dtype)",
            '  File "/usr/lib/python3.10/dist-packages/vllm/worker/worker.py", line 231, in '
            "_check_if_gpu_supports_dtype",
        ]
    )
    report = diagnose(log)
    top = report.diagnoses[0]
    assert (report.verdict, top.remedies[0].action) == ("other", "fix_config")
    assert "--dtype half" in top.remedies[0].text


def test_a_v1_traceback_cut_after_the_kv_memory_line_is_the_length_check() -> None:
    """V1 checks one request against the KV memory it just printed, then prints the cache's size:
    a traceback cut between the two stopped in that check (a guess from the step: low)."""
    log = "\n".join(
        [
            V1 + "INFO 10-11 10:42:14 [gpu_worker.py:298] Available KV cache memory: 13.69 GiB",
            V1 + "ERROR 10-11 10:42:14 [core.py:708] EngineCore failed to start.",
            V1 + "ERROR 10-11 10:42:14 [core.py:708] Traceback (most recent call last):",
            V1 + 'ERROR 10-11 10:42:14 [core.py:708]   File "/venv/vllm/v1/engine/core.py", line 92, in __init__',
        ]
    )
    report = diagnose(log)
    top = report.diagnoses[0]
    assert (report.verdict, top.confidence, top.remedies[0].action) == (
        "max_model_len_too_large",
        "low",
        "lower_max_model_len",
    )


CPU_MAX_LEN = [
    "INFO 10-29 21:04:20 llm_engine.py:1] Initializing an LLM engine (v0.6.3.post1) with config: "
    "model='meta-llama/Llama-3.1-8B-Instruct', dtype=torch.bfloat16, max_seq_len=131072, device_config=cpu",
    "WARNING 10-29 21:04:20 cpu_executor.py:1] Environment variable VLLM_CPU_KVCACHE_SPACE (GB) for CPU backend is "
    "not set, using 4 by default.",
    "INFO 10-29 21:04:47 cpu_executor.py:1] # CPU blocks: 2048",
    "ValueError: The model's max seq len (131072) is larger than the maximum number of tokens that can be stored in "
    "KV cache (32768). Try increasing `VLLM_CPU_KVCACHE_SPACE` or decreasing `max_model_len` when initializing "
    "the engine.",
]


def test_cpu_backend_length_is_lowered_where_free_shows_the_ram_cannot_hold_it() -> None:
    free = [
        "$ free -h",
        "               total        used        free      shared  buff/cache   available",
        "Mem:            30Gi       5.8Gi        17Gi       412Mi       7.5Gi        24Gi",
    ]
    report = diagnose("\n".join(free + CPU_MAX_LEN))
    top = report.diagnoses[0]
    assert (report.verdict, top.remedies[0].action, top.remedies[0].value) == (
        "max_model_len_too_large",
        "lower_max_model_len",
        32768,
    )
    assert "24.0 GiB of RAM" in top.remedies[0].text
    assert report.facts["host_ram_total_gib"] == 30.0


def test_cpu_backend_kv_space_is_raised_where_the_host_has_the_ram() -> None:
    free = ["Mem:             503         40         300           0         160         460"]  # free -g
    assert diagnose("\n".join(free + CPU_MAX_LEN)).diagnoses[0].remedies[0].action == "raise_cpu_kv_cache_space"
    assert diagnose("\n".join(CPU_MAX_LEN)).diagnoses[0].remedies[0].action == "raise_cpu_kv_cache_space"


def test_v0_length_error_beside_a_cotenant_the_release_charges_frees_the_card_first() -> None:
    log = "\n".join(
        [
            "INFO 02-06 10:21:44 llm_engine.py:72] Initializing an LLM engine with config: model='meta-llama/Llama-2-13b-chat-hf', "
            "tokenizer='meta-llama/Llama-2-13b-chat-hf', dtype=torch.float16, max_seq_len=4096, tensor_parallel_size=1, seed=0)",
            "INFO 02-06 10:23:07 llm_engine.py:322] # GPU blocks: 118, # CPU blocks: 327",
            "ValueError: The model's max seq len (4096) is larger than the maximum number of tokens that can be stored in KV "
            "cache (1888). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
            "|    0   N/A  N/A     18834      C   ...envs/nb/bin/python -m ipykernel_launcher  45056MiB |",
        ]
    )
    top = diagnose(log).diagnoses[0]
    assert [r.action for r in top.remedies[:2]] == ["free_gpu_memory", "lower_max_model_len"]
    assert "≈44.0 GiB" in top.remedies[0].text and "kvdoctor's estimate" in top.remedies[0].text


def test_a_process_list_without_gpus_that_holds_more_than_a_card_is_one_process_per_card() -> None:
    log = "\n".join(
        [
            "$ nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader",
            *(f"{pid}, ray::WorkerDict.actor_rollout_generate_sequences, 38768 MiB" for pid in range(201877, 201881)),
            "(WorkerDict pid=204612) INFO 04-23 15:12:41 [core.py:61] Initializing a V1 LLM engine (v0.8.4) with config: "
            "model='Qwen/Qwen2.5-7B-Instruct', tensor_parallel_size=4, gpu_memory_utilization=0.5",
            "(WorkerDict pid=204612) INFO 04-23 15:12:50 [gpu_model_runner.py:1291] Model loading took 3.5 GiB and 5.9 seconds",
            "(WorkerDict pid=204612) INFO 04-23 15:12:55 [gpu_worker.py:1] Memory profiling takes 2.0 seconds",
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
            "initializing the engine.",
            "GPU 0: NVIDIA H100 80GB HBM3",
        ]
    )
    report = diagnose(log)
    assert report.facts["gpu.other_process_gib"] == 37.86
    assert report.diagnoses[0].remedies[0].action == "free_gpu_memory"
