"""Every extractor against real lines (from the corpus and the reference's format strings)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvdoctor.reader.events import extract
from kvdoctor.reader.lines import Line, peel


def events_of(raw: str) -> dict[str, dict[str, Any]]:
    text, origin = peel(raw)
    return {e.kind: e.fields for e in extract(Line(1, text, raw, origin))}


CASES: list[tuple[str, str, dict[str, Any]]] = [
    # §3 weights, every era's wording
    (
        "INFO 08-19 07:51:03 model_runner.py:732] Loading model weights took 2.3463 GB",
        "weights_loaded",
        {"weights_gib": 2.3463},
    ),
    (
        "INFO 04-01 [gpu_model_runner.py:1] Model loading took 14.9888 GiB and 5.123 seconds",
        "weights_loaded",
        {"weights_gib": 14.9888},
    ),
    (
        "(EngineCore pid=5) INFO 11-01 09:00:00 [gpu_model_runner.py:1] Model loading took 15.0 GiB memory and 6.1 seconds",
        "weights_loaded",
        {"weights_gib": 15.0},
    ),
    # §4.1 V0 profiling: 0.6.4 single line with the "Gib" typo, 0.6.5+ three lines
    (
        "INFO 11-20 worker.py:1] Memory profiling results: total_gpu_memory=79.15GiB initial_memory_usage=68.01GiB peak_torch_memory=9.63GiB memory_usage_post_profile=77.88Gib non_torch_memory=0.24GiB kv_cache_size=-0.56GiB gpu_memory_utilization=0.20",
        "profile_v064",
        {
            "total_gpu_memory": 79.15,
            "initial_memory_usage": 68.01,
            "kv_cache_size": -0.56,
            "gpu_memory_utilization": 0.2,
        },
    ),
    (
        "INFO 01-15 11:06:48 worker.py:240] the current vLLM instance can use total_gpu_memory (8.00GiB) x gpu_memory_utilization (0.90) = 7.20GiB",
        "profile_budget",
        {"total_gpu_gib": 8.0, "gpu_memory_utilization": 0.9, "budget_gib": 7.2},
    ),
    (
        "INFO 01-15 11:06:48 worker.py:240] model weights take 0.07GiB; non_torch_memory takes 0.04GiB; PyTorch activation peak memory takes 7.09GiB; the rest of the memory reserved for KV Cache is -0.00GiB.",
        "profile_breakdown",
        {
            "weights_gib": 0.07,
            "non_torch_gib": 0.04,
            "activation_peak_gib": 7.09,
            "kv_cache_gib": -0.0,
        },
    ),
    (
        "DEBUG 09-15 [gpu_worker.py:1] Memory profiling takes 4.12 seconds. Total non KV cache memory: 16.19GiB; torch peak memory increase: 0.69GiB; non-torch forward increase memory: 0.23GiB; weights memory: 15.27GiB.",
        "profile_summary",
        {
            "non_kv_gib": 16.19,
            "activation_peak_gib": 0.69,
            "non_torch_gib": 0.23,
            "weights_gib": 15.27,
        },
    ),
    # a 0.6 development build's profiling table: one "key  value" row per line (PR 10511)
    (
        "INFO 12-13 19:54:18 worker.py:243] model weights take   14.96GiB",
        "profile_row",
        {"weights_gib": 14.96},
    ),
    (
        "INFO 12-13 19:54:18 worker.py:243] gpu_memory_utilization\t0.90",
        "profile_row",
        {"gpu_memory_utilization": 0.9},
    ),
    (
        "INFO 12-13 19:54:18 worker.py:243] available_kv_cache_memory    -1.52GiB",
        "profile_row",
        {"kv_cache_gib": -1.52},
    ),
    # §10 an OOM PyTorch reports as an internal assert where NVML cannot answer (MIG, Jetson)
    (
        '(EngineCore_0 pid=72) RuntimeError: NVML_SUCCESS == r INTERNAL ASSERT FAILED at "/pytorch/c10/cuda/CUDACachingAllocator.cpp":1016, please report a bug to PyTorch.',
        "cuda_oom",
        {"device": "CUDA", "nvml_assert": True},
    ),
    # Unsloth's fast_inference chooses the fraction and prints it
    (
        "Unsloth: vLLM loading ./unsloth/Qwen2.5-VL-3B-Instruct with actual GPU utilization = 78.61%",
        "wrapper_setting",
        {"flags": {"gpu_memory_utilization": 0.7861}},
    ),
    # §9.1 0.32+: weights another process holds for this engine
    (
        "ValueError: Externally held weights on device cuda:0 (75.0/79.19 GiB) exceed the desired GPU memory utilization (0.92, 72.85 GiB). Increase GPU memory utilization or reduce GPU memory used by other processes.",
        "external_weights_error",
        {
            "device": "cuda:0",
            "external_weights_gib": 75.0,
            "total_gpu_gib": 79.19,
            "gpu_memory_utilization": 0.92,
            "requested_gib": 72.85,
        },
    ),
    # §6.3 0.18+: the CUDA-graph memory profile is a step of its own
    (
        "(EngineCore pid=2871) INFO 06-15 10:00:55 [gpu_model_runner.py:4500] Profiling CUDA graph memory: PIECEWISE=51 (largest=512), FULL=35 (largest=256)",
        "phase",
        {"phase": "cuda_graph_profile"},
    ),
    # §6.3 0.20+ with the profile switched off: "increasing", not "increase"
    (
        "WARNING 08-19 07:51:03 [gpu_worker.py:355] CUDA graph memory profiling is disabled (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0). Without it, CUDA graph memory is not accounted for during KV cache allocation, which may require lowering --gpu-memory-utilization to avoid OOM. Consider re-enabling it (the default as of v0.21.0) and increasing --gpu-memory-utilization from 0.9200 to 0.9366.",
        "graph_util_hint",
        {"gpu_memory_utilization": 0.92, "suggested_utilization": 0.9366},
    ),
    # §5.1 the CPU backend's KV blocks, on a line of their own
    (
        "INFO 08-19 07:51:03 cpu_executor.py:130] # CPU blocks: 4096",
        "gpu_blocks",
        {"device": "CPU", "gpu_blocks": 4096},
    ),
    # §4.2 V1 budget line, negative too
    (
        "(EngineCore_DP0 pid=563) INFO 12-23 23:34:23 [gpu_worker.py:298] Available KV cache memory: -2.77 GiB",
        "available_kv_memory",
        {"kv_cache_gib": -2.77},
    ),
    (
        "INFO 05-14 [gpu_worker.py:460] Available KV cache memory: 54.6 GiB",
        "available_kv_memory",
        {"kv_cache_gib": 54.6},
    ),
    # §5 blocks and tokens in every spelling
    (
        "INFO 01-05 10:12:58 llm_engine.py:275] # GPU blocks: 8786, # CPU blocks: 2048",
        "gpu_blocks",
        {"gpu_blocks": 8786, "cpu_blocks": 2048},
    ),
    (
        "INFO 01-15 11:06:48 executor_base.py:95] # CUDA blocks: 0, # CPU blocks: 87381",
        "gpu_blocks",
        {"gpu_blocks": 0, "device": "CUDA"},
    ),
    (
        "INFO 03-01 executor_base.py:1] # cuda blocks: 2345, # CPU blocks: 2048",
        "gpu_blocks",
        {"gpu_blocks": 2345},
    ),
    ("INFO 12-01 gpu_executor.py:1] # GPU blocks: 27944", "gpu_blocks", {"gpu_blocks": 27944}),
    (
        "INFO 10-03 [kv_cache_utils.py:864] GPU KV cache size: 447,104 tokens",
        "kv_cache_size",
        {"kv_cache_tokens": 447104},
    ),
    (
        "INFO 08-25 [kv_cache_utils.py:1] GPU KV cache size: 401,072 tokens, Maximum concurrency for 32,768 tokens per request: 12.24x",
        "kv_cache_size",
        {"kv_cache_tokens": 401072, "max_model_len": 32768, "max_concurrency": 12.24},
    ),
    (
        "INFO 10-01 [kv_cache_utils.py:1] XPU KV cache size: 10,000 tokens, Maximum concurrency for 4,096 tokens per request: 2.44x",
        "kv_cache_size",
        {"device": "XPU", "kv_cache_tokens": 10000},
    ),
    (
        "INFO 10-17 [kv_cache_utils.py:1] GPU + host KV cache size: 20,000 tokens",
        "kv_cache_size",
        {"device": "GPU + host", "kv_cache_tokens": 20000},
    ),
    (
        "INFO 10-03 [kv_cache_utils.py:868] Maximum concurrency for 32,768 tokens per request: 1.30x",
        "max_concurrency",
        {"max_model_len": 32768, "max_concurrency": 1.3},
    ),
    (
        "INFO 01-15 executor_base.py:100] Maximum concurrency for 448 tokens per request: 0.00x",
        "max_concurrency",
        {"max_model_len": 448, "max_concurrency": 0.0},
    ),
    # §6 graphs
    (
        "INFO 01-05 10:13:09 model_runner.py:547] Graph capturing finished in 8 secs.",
        "graph_capture_done",
        {"seconds": 8.0},
    ),
    (
        "INFO 05-14 [gpu_model_runner.py:1] Graph capturing finished in 12 secs, took 0.56 GiB",
        "graph_capture_done",
        {"cuda_graph_gib": 0.56},
    ),
    (
        "(Worker_TP1 pid=148) INFO 05-14 00:04:16 [gpu_model_runner.py:6143] Estimated CUDA graph memory: 0.17 GiB total",
        "graph_estimate",
        {"cuda_graph_estimate_gib": 0.17},
    ),
    # DGX Spark (GB10, unified memory): the estimate comes out negative, and is what vLLM used
    (
        "vllm_gb10_server  | (EngineCore pid=194) INFO 04-29 12:01:06 [gpu_model_runner.py:6042] Estimated CUDA graph memory: -4.74 GiB total",
        "graph_estimate",
        {"cuda_graph_estimate_gib": -4.74},
    ),
    # Triton's own allocation (an autotuner's scratch buffers)
    ("RuntimeError: Triton Error [CUDA]: out of memory", "cuda_oom", {"device": "CUDA"}),
    (
        "(Worker_TP2 pid=12026) INFO 08-14 09:28:01 [gpu_worker.py:793] CUDA graph pool memory: 1.34 GiB (actual), 1.32 GiB (estimated), difference: 0.02 GiB (1.5%).",
        "graph_pool",
        {"cuda_graph_gib": 1.34, "cuda_graph_estimate_gib": 1.32},
    ),
    (
        "INFO 05-14 [gpu_worker.py:475] CUDA graph memory profiling is enabled (default since v0.21.0). The current --gpu-memory-utilization=0.9200 is equivalent to --gpu-memory-utilization=0.9129 without CUDA graph memory profiling. To maintain the same effective KV cache size as before, increase --gpu-memory-utilization to 0.9271. To disable, set VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0.",
        "graph_util_hint",
        {"gpu_memory_utilization": 0.92, "suggested_utilization": 0.9271},
    ),
    # §9.1 start-up free memory: failing check (both eras) vs the healthy summary sharing its words
    (
        "ValueError: Free memory on device (31.44/47.38 GiB) on startup is less than desired GPU memory utilization (0.95, 45.01 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
        "free_memory_error",
        {
            "free_gpu_gib_at_startup": 31.44,
            "total_gpu_gib": 47.38,
            "gpu_memory_utilization": 0.95,
            "requested_gib": 45.01,
        },
    ),
    (
        "ValueError: Free memory on device cuda:0 (22.76/24.0 GiB) on startup is less than desired GPU memory utilization (0.97, 23.28 GiB). Decrease",
        "free_memory_error",
        {"device": "cuda:0", "free_gpu_gib_at_startup": 22.76},
    ),
    (
        "(Worker_TP1 pid=12025) INFO 08-14 09:28:01 [gpu_worker.py:857] Free memory on device (77.78/79.33 GiB) on startup. Desired GPU memory utilization is (0.85, 67.43 GiB). Actual usage is 16.92 GiB for weight, 5.66 GiB for peak activation, 0.13 GiB for non-torch memory, and 1.34 GiB for CUDAGraph memory. Replace gpu_memory_utilization config with `--kv-cache-memory=46421742490` (43.23 GiB) to fit into requested memory, or `--kv-cache-memory=57542425088` (53.59 GiB) to fully utilize gpu memory. Current kv cache memory in use is 43.4 GiB.",
        "startup_memory_summary",
        {
            "weights_gib": 16.92,
            "activation_peak_gib": 5.66,
            "non_torch_gib": 0.13,
            "cuda_graph_gib": 1.34,
            "kv_cache_gib": 43.4,
            "kv_cache_memory_bytes_to_fit": 46421742490,
        },
    ),
    (
        "INFO 09-15 [gpu_worker.py:1] Free memory on device (78.5/79.19 GiB) on startup. Desired GPU memory utilization is (0.9, 71.27 GiB). Actual usage is 15.27 GiB for weight, 0.69 GiB for peak activation, 0.23 GiB for non-torch memory, and 0.5 GiB for CUDAGraph memory. Replace gpu_memory_utilization config with `--kv-cache-memory=58000000000` to fit into requested memory, or `--kv-cache-memory=66000000000` to fully utilize gpu memory. Current kv cache memory in use is 59141431296 bytes.",
        "startup_memory_summary",
        {"kv_cache_gib": pytest.approx(55.08, abs=0.01)},
    ),
    # §4.2 explicit KV size
    (
        "INFO 09-15 [gpu_worker.py:1] Initial free memory 78.50 GiB, reserved 40.00 GiB memory for KV Cache as specified by kv_cache_memory_bytes config and skipped memory profiling.",
        "kv_cache_memory_bytes",
        {"free_gpu_gib_at_startup": 78.5, "kv_cache_gib": 40.0},
    ),
    # §7 / §8 the errors
    (
        "ERROR 03-05 13:46:50 core.py:291] ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.  ",
        "no_cache_blocks_error",
        {},
    ),
    (
        "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in KV cache (29568). Try increasing",
        "max_len_error",
        {"max_model_len": 32768, "max_tokens_in_kv_cache": 29568},
    ),
    (
        "ValueError: To serve at least one request with the models's max seq len (262144), (24.0 GiB KV cache is needed, which is larger than the available KV cache memory (3.18 GiB). Based on the available memory, the estimated maximum model length is 34736. Try increasing",
        "max_len_error",
        {
            "max_model_len": 262144,
            "needed_kv_gib": 24.0,
            "kv_cache_gib": 3.18,
            "estimated_max_model_len": 34736,
        },
    ),
    (
        "ValueError: To serve at least one request with the models's max seq len (32768), (4.00 GB KV cache is needed, which is larger than the available KV cache memory (2.10 GB). Try increasing",
        "max_len_error",
        {"needed_kv_gib": 4.0, "kv_cache_gib": 2.1},
    ),
    (
        "ValueError: To serve at least one request with the model's max seq len (131072), 16.0 GiB KV cache is needed, which is larger than the available KV cache memory (4.89 GiB). Based on the available memory, the estimated maximum model length is 40064. Try",
        "max_len_error",
        {"estimated_max_model_len": 40064},
    ),
    (
        "AssertionError: Error in memory profiling. Initial free memory 41.22265625 GiB, current free memory 44.90234375 GiB. This happens",
        "profiling_assert",
        {"measure": "free", "initial_gib": 41.22265625, "current_gib": 44.90234375},
    ),
    (
        "AssertionError: Error in memory profiling. Initial used memory 1073741824, currently used memory 536870912. This happens",
        "profiling_assert",
        {"measure": "used", "initial_gib": 1.0, "current_gib": 0.5},
    ),
    (
        "RuntimeError: Worker failed with error 'max_num_seqs (1024) exceeds available Mamba cache blocks (600). Each decode sequence requires one Mamba cache block'",
        "mamba_blocks_error",
        {"max_num_seqs": 1024, "mamba_blocks": 600},
    ),
    (
        "RuntimeError: CUDA out of memory occurred when warming up sampler with 256 dummy requests. Please try lowering `max_num_seqs`",
        "warmup_oom",
        {"what": "sampler", "dummy_requests": 256},
    ),
    (
        "ValueError: max_num_batched_tokens (2048) is smaller than max_model_len (8192). This effectively limits",
        "batched_tokens_error",
        {"max_num_batched_tokens": 2048, "max_model_len": 8192},
    ),
    (
        "WARNING 04-01 config.py:1] User-specified max_model_len (131072) is greater than the derived max_model_len (max_position_embeddings=32768 or model_max_length=None in model's config.json).",
        "user_max_len_warning",
        {"max_model_len": 131072},
    ),
    (
        "INFO 02-01 [kv_cache_utils.py:1] Auto-fit max_model_len: reduced from 131072 to 40064 to fit in available GPU memory (4.89 GiB available for KV cache)",
        "auto_fit",
        {"original_max_model_len": 131072, "max_model_len": 40064},
    ),
    # §10 torch OOM wordings
    (
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; 14.56 GiB already allocated; 3.44 MiB free; 14.73 GiB reserved in total by PyTorch) If reserved",
        "cuda_oom",
        {
            "tried_gib": pytest.approx(20 / 1024),
            "total_gpu_gib": 15.78,
            "allocated_gib": 14.56,
            "gpu_index": 0,
        },
    ),
    (
        "engine.py :190 2024-02-03 03:44:03,976 Error initializing vLLM engine: CUDA out of memory. Tried to allocate 112.00 MiB. GPU 0 has a total capacty of 44.35 GiB of which 53.38 MiB is free. Process 3663367 has 44.28 GiB memory in use.",
        "cuda_oom",
        {
            "total_gpu_gib": 44.35,
            "process_gib": 44.28,
            "processes": [{"pid": 3663367, "gib": 44.28}],
        },
    ),
    (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB. GPU 1 has a total capacity of 44.42 GiB of which 3.38 MiB is free. Including non-PyTorch memory, this process has 44.41 GiB memory in use. Of the allocated memory 43.1 GiB is allocated by PyTorch, with 812.00 MiB allocated in private pools (e.g., CUDA Graphs), and 120.5 MiB is reserved by PyTorch but unallocated.",
        "cuda_oom",
        {"gpu_index": 1, "this_process_gib": 44.41, "private_pools_gib": pytest.approx(812 / 1024)},
    ),
    ("RuntimeError: CUDA error: out of memory", "cuda_oom", {"device": "CUDA"}),
    # banner, args and a launch command (lark-parsed dumps)
    (
        "INFO 05-27 [core.py:58] Initializing a V1 LLM engine (v0.9.0) with config: model='Qwen/Qwen3-8B', dtype=torch.bfloat16, max_seq_len=40960, tensor_parallel_size=1, quantization=None, enforce_eager=False, kv_cache_dtype=auto,  device_config=cuda",
        "engine_banner",
        {"engine": "v1", "version": "0.9.0"},
    ),
    (
        "$ vllm serve Qwen/Qwen3-8B --max-model-len 32768 --gpu-memory-utilization=0.95 --enforce-eager",
        "command_line",
        {
            "flags": {
                "model": "Qwen/Qwen3-8B",
                "max_model_len": 32768,
                "gpu_memory_utilization": 0.95,
                "enforce_eager": True,
            }
        },
    ),
    (
        "(APIServer pid=1) INFO 04-28 09:00:01 [utils.py:299]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.20.0",
        "version",
        {"version": "0.20.0"},
    ),
    (
        "INFO 03-31 09:00:02 api_server.py:148] vLLM API server version 0.4.0",
        "version",
        {"version": "0.4.0"},
    ),
    # worker wrappers that carry the root cause (V0 multiproc / Ray) and uvicorn's own errors
    (
        "(VllmWorkerProcess pid=839) ERROR 08-19 19:03:55 multiproc_worker_utils.py:226] Exception in worker VllmWorkerProcess while processing method init_device: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details), Traceback (most recent call last):",
        "exception",
        {
            "type": "WorkerException",
            "message": "NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
            "method": "init_device",
        },
    ),
    (
        "(VllmWorkerProcess pid=195297) ERROR 03-01 10:00:00 multiproc_worker_utils.py:242] Exception in worker VllmWorkerProcess while processing method load_model.",
        "phase",
        {"phase": "weight_loading", "method": "load_model"},
    ),
    (
        "(RayWorkerWrapper pid=206994, ip=10.0.0.5) ERROR 03-27 10:29:13 [worker_base.py:620] Error executing method capture_model. This might cause deadlock in distributed execution.",
        "phase",
        {"phase": "cuda_graph_capture"},
    ),
    (
        "(RayWorkerWrapper pid=206994, ip=10.0.0.5) ERROR 03-27 10:29:13 [worker_base.py:620] Error executing metho",
        "engine_failed",
        {},
    ),
    (
        "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use",
        "exception",
        {"type": "OSError"},
    ),
    (
        "`ValueError: Model architectures ['Qwen2_5_VLForConditionalGeneration'] are not supported for now.",
        "exception",
        {"type": "ValueError"},
    ),
    # platform and wrapper variants
    (
        "(EngineCore_DP0 pid=4146) INFO 01-15 06:47:41 [worker_v1.py:270] Available memory: 0, total memory: 65452113920",
        "available_kv_memory",
        {"kv_cache_gib": 0.0, "total_gpu_gib": 60.96},
    ),
    (
        "(Worker pid=7) INFO 01-01 00:00:01 [worker.py:1] Free memory on device (59.1/60.96 GiB) on startup. Desired GPU memory utilization is (0.9, 54.86 GiB). Actual usage: 1.14 GiB for weights, 0.22 GiB for peak activation, 0.13 GiB for non-torch memory, 0.04 GiB for NPU graph memory. Replace gpu_memory_utilization with `--kv-cache-memory=6552110080` (6.1 GiB) to fit into requested memory, or `--kv-cache-memory=12726715392` (11.85 GiB) to fully utilize NPU free memory. Current KV cache memory: 7.03 GiB.",
        "startup_memory_summary",
        {"weights_gib": 1.14, "cuda_graph_gib": 0.04, "kv_cache_gib": 7.03, "kv_cache_memory_bytes_to_fit": 6552110080},
    ),
    (
        "engine.py           :43   2024-02-08 08:40:56,015 vLLM config: {'model': 'm', 'gpu_memory_utilization': 0.95, 'max_model_len': 32000}",
        "args",
        {},
    ),
    ("RuntimeError: CUDA out of", "cuda_oom", {"device": "CUDA"}),
    (
        "INFO 03-20 [gpu_worker.py:1] In v0.19, CUDA graph memory profiling will be enabled by default (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1), which more accurately accounts for CUDA graph memory during KV cache allocation. To try it now, set VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 and increase --gpu-memory-utilization from 0.7000 to 0.7021 to maintain the same effective KV cache size.",
        "graph_util_hint",
        {"gpu_memory_utilization": 0.7, "suggested_utilization": 0.7021},
    ),
    (
        "INFO 09-15 [gpu_worker.py:1] Initial free memory 78.50 GiB, reserved 4.25 GiB memory for KV Cache as specified by kv_cache_memory_bytes config and skipped memory profiling.",
        "kv_cache_memory_bytes",
        {"kv_cache_memory_bytes_reserved": 4563402752},
    ),
    ("INFO:     Shutting down", "shutdown", {}),
    # IPython / Jupyter and boxed (rich) frames
    (
        "File ~/.local/lib/python3.10/site-packages/vllm/v1/engine/utils.py:785, in wait_for_engine_startup(handshake_socket)",
        "frame",
        {"function": "wait_for_engine_startup"},
    ),
    (
        "File [~/miniconda3/lib/python3.10/site-packages/vllm/worker/cache_engine.py:64](http://localhost:8888/x), in CacheEngine._allocate_kv_cache(self, num_blocks, device)",
        "frame",
        {"function": "CacheEngine._allocate_kv_cache"},
    ),
    (
        "│ /workdir/vllm/vllm/transformers_utils/tokenizer.py:36 in get_tokenizer                           │",
        "frame",
        {"function": "get_tokenizer"},
    ),
    # the end of a start-up
    ("INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)", "serving", {}),
    (
        "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
        "engine_failed",
        {},
    ),
    # `free` pasted beside a log: -h names its units, -g / -m / plain KiB are told by their size
    (
        "Mem:            30Gi       5.8Gi        17Gi       412Mi       7.5Gi        24Gi",
        "host_ram",
        {"host_ram_total_gib": 30.0, "host_ram_available_gib": 24.0},
    ),
    (
        "Mem:             125         21          2          13         103        103",
        "host_ram",
        {"host_ram_total_gib": 125.0, "host_ram_available_gib": 103.0},
    ),
    (
        "Mem:          64215       3120      41020         12      20075      60313",
        "host_ram",
        {"host_ram_total_gib": 62.7, "host_ram_available_gib": 58.9},
    ),
    (
        "Mem:       65755520    3194940   42004812      12004   20555768   61760416",
        "host_ram",
        {"host_ram_total_gib": 62.7, "host_ram_available_gib": 58.9},
    ),
    # the release an environment line or a sentence of the report states
    ("vLLM 0.3.0, torch 2.1.2, CUDA 12.1, driver 535.129.03", "stated_version", {"version": "0.3.0"}),
    ("shared by our group. vllm 0.8.5 in my own venv. I took GPU 2:", "stated_version", {"version": "0.8.5"}),
    ("ROCm vLLM image with vLLM 0.9.2, one node with 8x MI300X", "stated_version", {"version": "0.9.2"}),
    # a chart's model key and a compose command's positional model
    (
        "  name: meta-llama/Llama-3.1-405B-Instruct",
        "config_value",
        {"flags": {"model": "meta-llama/Llama-3.1-405B-Instruct"}},
    ),
    (
        "      - meta-llama/Llama-3.1-8B-Instruct",
        "config_value",
        {"flags": {"model": "meta-llama/Llama-3.1-8B-Instruct"}},
    ),
]


@pytest.mark.parametrize(("raw", "kind", "expected"), CASES, ids=[f"{k}-{i}" for i, (_, k, _) in enumerate(CASES)])
def test_extractor(raw: str, kind: str, expected: dict[str, Any]) -> None:
    found = events_of(raw)
    assert kind in found, f"no {kind} event; got {sorted(found)}"
    for name, value in expected.items():
        assert found[kind][name] == value, name


@pytest.mark.parametrize(
    "raw",
    [
        # look-alikes that must not produce the error event
        "INFO 05-16 [loggers.py:116] Engine 000: Avg prompt throughput: 0.0 tokens/s, GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%",
        'INFO:     127.0.0.1:39210 - "POST /v1/completions HTTP/1.1" 200 OK',
        "(Worker_TP1 pid=12025) INFO 08-14 09:28:01 [gpu_worker.py:857] Free memory on device (77.78/79.33 GiB) on startup. Desired GPU memory utilization is (0.85, 67.43 GiB).",
    ],
)
def test_look_alikes_are_not_errors(raw: str) -> None:
    found = events_of(raw)
    assert not {"free_memory_error", "no_cache_blocks_error", "max_len_error", "cuda_oom"} & set(found)


def test_banner_dump_is_parsed_with_the_grammar() -> None:
    from kvdoctor.reader.dumps import parse_dump

    dump = events_of(
        "INFO 06-11 llm_engine.py:1] Initializing an LLM engine (v0.6.3) with config: model='m', "
        "tensor_parallel_size=2, chunked_prefill_enabled=False multi_step_stream_outputs=True, "
        'compilation_config={"level": 0, "sizes": [1, 2]}, pooler_config=None, …'
    )["engine_banner"]["dump"]
    values = parse_dump(dump)
    assert values["tensor_parallel_size"] == 2
    assert values["multi_step_stream_outputs"] is True  # the missing comma of 0.6.3..0.6.4.post1
    assert values["compilation_config"] == {"level": 0, "sizes": [1, 2]}


def test_namespace_and_non_default_args() -> None:
    from kvdoctor.reader.dumps import parse_dump

    ns = parse_dump(
        "Namespace(host=None, port=8000, model='m', gpu_memory_utilization=0.9, max_num_seqs=256, "
        "allowed_origins=['*'], load_format=<LoadFormat.AUTO: 'auto'>, enforce_eager=False)"
    )
    assert ns["gpu_memory_utilization"] == 0.9 and ns["max_num_seqs"] == 256 and ns["enforce_eager"] is False
    nd = parse_dump("{'model_tag': 'Qwen/Qwen3-8B', 'max_model_len': 32768, 'gpu_memory_utilization': 0.95}")
    assert nd == {
        "model_tag": "Qwen/Qwen3-8B",
        "max_model_len": 32768,
        "gpu_memory_utilization": 0.95,
    }


def test_each_line_runs_every_extractor_whose_needle_it_holds_overlaps_included() -> None:
    """The per-line candidate set is exactly the extractors of every needle the line contains, on
    every fixture line (a guard for any faster way of finding them)."""
    import glob

    from kvdoctor.reader import events as ev
    from kvdoctor.reader.lines import normalise

    root = Path(__file__).parent / "fixtures"
    checked = 0
    for name in sorted(glob.glob(str(root / "**" / "*.log"), recursive=True)):
        for line in normalise(Path(name).read_bytes().split(b"\n")):
            present = {n for n in ev._BY_NEEDLE if n in line.text}
            if present:
                checked += 1
                assert ev._candidates(line.text) == sorted({i for n in present for i in ev._BY_NEEDLE[n]}), line.text
    assert checked > 1000
    # a needle inside a longer one at another position, and one that begins a longer one
    text = "RuntimeError: Engine core initialization failed. EngineCore failed to start."
    assert ev._candidates(text) == sorted({i for n in ev._BY_NEEDLE if n in text for i in ev._BY_NEEDLE[n]})


def test_the_gate_matches_exactly_the_lines_that_hold_a_needle(monkeypatch: pytest.MonkeyPatch) -> None:
    """The trie regex that rejects lines after the first few hundred accepts a line exactly when a
    needle is in it, on every fixture line, and the gated and ungated reads find the same events."""
    import glob
    import re

    from kvdoctor.reader import events as ev
    from kvdoctor.reader.lines import normalise

    gate = re.compile(ev.gate_pattern(ev._NEEDLES))
    lines = []
    for name in sorted(glob.glob(str(Path(__file__).parent / "fixtures" / "**" / "*.log"), recursive=True)):
        lines.extend(normalise(Path(name).read_bytes().split(b"\n")))
    assert len(lines) > 5000
    for line in lines:
        assert (gate.search(line.text) is not None) == any(n in line.text for n in ev._NEEDLES), line.text
    assert gate.search("x EngineCore failed to star") is None  # a needle cut short is not one
    sample = lines[:3000]
    monkeypatch.setattr(ev, "_gate", None)
    monkeypatch.setattr(ev, "_ungated_left", 10**9)
    ungated = [e.as_record() for line in sample for e in ev.extract(line)]
    monkeypatch.setattr(ev, "_gate", gate)
    assert [e.as_record() for line in sample for e in ev.extract(line)] == ungated


@pytest.mark.parametrize(
    "call",
    ["nvmlInit_v2_()", "nvmlDeviceGetHandleByPciBusId_v2_( pci_id, &nvml_device)", "r"],
)
def test_the_allocators_nvml_asserts_are_its_oom(call: str) -> None:
    # torch's caching allocator asks NVML about the device's processes only once an allocation has
    # failed (to word the OOM): each of its NVML asserts there replaces an OOM message
    raw = f'RuntimeError: NVML_SUCCESS == DriverAPI::get()->{call} INTERNAL ASSERT FAILED at "../c10/cuda/CUDACachingAllocator.cpp":1123, please report a bug to PyTorch.'
    assert events_of(raw)["cuda_oom"]["nvml_assert"] is True


@pytest.mark.parametrize(
    "line",
    [
        "vLLM 0.9.0 fixed this for me",
        "upgrade to vllm 0.9.1 and it works",
        "    repository: vllm/vllm-openai",
        "  - /srv/hf:/root/.cache/huggingface",
        "  name: vllm/vllm-openai",
    ],
)
def test_prose_and_yaml_that_name_no_release_or_model(line: str) -> None:
    found = events_of(line)
    assert "stated_version" not in found
    assert "model" not in found.get("config_value", {}).get("flags", {})
