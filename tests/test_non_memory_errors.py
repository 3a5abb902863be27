"""Non-memory start-up errors named by their wording: each one's first remedy is the environment
(driver, libraries, network, hub access) or the configuration (a dtype, a TP size, a length, a
feature this model or GPU refuses), never a memory flag."""

from __future__ import annotations

import pytest

from kvdoctor.api import diagnose

HEAD = "(EngineCore_DP0 pid=7) ERROR 05-01 12:00:31 [core.py:700] "

CASES = [
    ("RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)", "fix_environment"),
    (
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled cuda error",
        "fix_environment",
    ),
    ("RuntimeError: CUDA error: no kernel image is available for execution on the device", "fix_environment"),
    ("ImportError: libcudart.so.12: cannot open shared object file: No such file or directory", "fix_environment"),
    ("ModuleNotFoundError: No module named 'flash_attn'", "fix_environment"),
    ("OSError: [Errno 28] No space left on device", "fix_environment"),
    ("RuntimeError: The NVIDIA driver on your system is too old (found version 11040).", "fix_environment"),
    ("RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable", "fix_environment"),
    (
        "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method",
        "fix_config",
    ),
    (
        "OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't find it in the cached files",
        "fix_environment",
    ),
    (
        "OSError: You are trying to access a gated repo. Make sure to have access to it at https://huggingface.co/meta-llama/Llama-3.1-8B.",
        "fix_environment",
    ),
    (
        "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has compute capability 7.5. You can use float16 instead by explicitly setting the `dtype` flag in CLI, for example: --dtype=half.",
        "fix_config",
    ),
    ("ValueError: Total number of attention heads (28) must be divisible by tensor parallel size (8).", "fix_config"),
    (
        "ValueError: User-specified max_model_len (200000) is greater than the derived max_model_len (max_position_embeddings=131072 or model_max_length=None in model's config.json). To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.",
        "fix_config",
    ),
    (
        "ValueError: The checkpoint you are trying to load has model type `qwen3_next` but Transformers does not recognize this architecture.",
        "fix_environment",
    ),
    ("ValueError: Model architectures ['Qwen3NextForCausalLM'] are not supported for now.", "fix_environment"),
    (
        "ValueError: torch.bfloat16 is not supported for quantization method awq. Supported dtypes: [torch.float16]",
        "fix_config",
    ),
    (
        "ValueError: The quantization method fp8 is not supported for the current GPU. Minimum capability: 89. Current capability: 80.",
        "fix_config",
    ),
    (
        "ValueError: max_num_batched_tokens (2048) is smaller than max_model_len (8192). This effectively limits the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. Please increase max_num_batched_tokens or decrease max_model_len.",
        "fix_config",
    ),
    ("ValueError: Cannot find any of ['adapter_name_or_path'] in the model's quantization config.", "fix_config"),
    ("TypeError: __init__() got an unexpected keyword argument 'rope_scaling'", "fix_environment"),
    ("RuntimeError: Triton Error [CUDA]: device kernel image is invalid", "fix_environment"),
    ("RuntimeError: Failed to infer device type", "fix_environment"),
    ("ValueError: Chunked prefill is not supported for this model", "fix_config"),
    (
        "RuntimeError: [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use",
        "fix_environment",
    ),
    ("pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig", "fix_config"),
    (
        "RuntimeError: Failed to import from vllm._C with ImportError('libcudart.so.12: cannot open shared object file')",
        "fix_environment",
    ),
    (
        "ValueError: head_size 80 is not supported by FlashAttention. Supported head sizes are: [32, 64, 96, 128, 160, 192, 224, 256].",
        "fix_environment",
    ),
    ("RuntimeError: Cannot find any model weights with `/models/qwen`", "fix_config"),
    (
        "ValueError: Unrecognized configuration class <class 'transformers_modules.x.configuration_x.XConfig'> for this kind of AutoModel: AutoModelForCausalLM.",
        "fix_environment",
    ),
    ("RuntimeError: FlashAttention only supports Ampere GPUs or newer.", "fix_config"),
    ("AssertionError: Torch not compiled with CUDA enabled", "fix_environment"),
    (
        "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': '/data/models/qwen/'. Use `repo_type` argument if needed.",
        "fix_config",
    ),
    (
        "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: 29500, useIPv6: 0, code: -98, name: EADDRINUSE, message: address already in use",
        "fix_environment",
    ),
    (
        "ValueError: Quantization method specified in the model config (gptq) does not match the quantization method specified in the `quantization` argument (awq).",
        "fix_config",
    ),
    ("ValueError: Tokenizer class QWenTokenizer does not exist or is not currently imported.", "fix_config"),
    ("RuntimeError: CUDA driver version is insufficient for CUDA runtime version", "fix_environment"),
    ("ValueError: max_model_len (32768) must be divisible by block_size", "fix_config"),
    # Ray: the task that starts the engine got no GPU, or the cluster has fewer than TP asks
    (
        "ValueError: Current node has no GPU available. current_node_resource={'CPU': 96.0}. vLLM engine cannot start without GPU.",
        "fix_environment",
    ),
    (
        "ValueError: Cannot provide a placement group requiring 4.0 GPUs (placement_group_specs=[{'GPU': 1.0}]) within 1800 seconds.",
        "fix_environment",
    ),
    # torch's shape check inside the model's forward: the model code or release, not memory
    ("RuntimeError: shape '[7447, -1, 128]' is invalid for input of size 137191424", "fix_environment"),
    # a kernel handed a tensor on the wrong device (a separately installed flash-attn): the library
    ("RuntimeError: cu_seqlens_q must be on CUDA", "fix_environment"),
    # torch_npu's C++ error printed raw, HCCL's "Memory resources are exhausted" for a queue pair after it
    (
        "operator():build/CMakeFiles/torch_npu.dir/compiler_depend.ts:161 NPU function error: call aclnnMoeDistributeDispatchV3 failed, error code is 561000",
        "fix_environment",
    ),
    # a script printing the Hub's refusal without the exception type
    ("Llama 3.2 1B failed: You are trying to access a gated repo.", "fix_environment"),
    # torch's custom-op schema check: a torch too old for the plugin, whatever the block size
    (
        "ValueError: infer_schema(func): Parameter block_size has unsupported type list[int]. The valid types are: dict_keys([<class 'torch.Tensor'>])",
        "fix_environment",
    ),
    # torch's own C++ check (not the allocator's NVML one, which is memory): a device the build
    # or the container does not give it
    (
        'RuntimeError: device >= 0 && device < num_gpus INTERNAL ASSERT FAILED at "../aten/src/ATen/cuda/CUDAContext.cpp":50, please report a bug to PyTorch.',
        "fix_environment",
    ),
    (
        "ValueError: Using V1 AsyncLLMEngine, but envs.VLLM_USE_V1=False. This should not happen. As a workaround, try using AsyncLLMEngine.from_vllm_config(...) or explicitly set VLLM_USE_V1=0 or 1",
        "fix_environment",
    ),
    # round 35: a transformers release that clashes with the model's code or config, torch_npu's
    # operator failure, a kernel launcher that does not compile, an fp8 format the GPU lacks
    ("ValueError: 'aimv2' is already used by a Transformers config, pick another name.", "fix_environment"),
    (
        "ValueError: `rope_scaling` must be a dictionary with two fields, `type` and `factor`, got {'factor': 8.0, 'rope_type': 'llama3'}",
        "fix_environment",
    ),
    (
        "RuntimeError: The Inner error is reported as above. The process exits for this inner error, and the current working operator name is SelfAttentionOperation.",
        "fix_environment",
    ),
    (
        "RuntimeError: NPUModelRunner init failed, error is Failed to compile /tmp/tmphxcyl__n/launcher_cxx11abi1.cxx, error: In file included from <built-in>:1",
        "fix_environment",
    ),
    (
        "ValueError(\"type fp8e4nv not supported in this architecture. The supported fp8 dtypes are ('fp8e4b15', 'fp8e5')\")",
        "fix_config",
    ),
    # round 36: a parallel layout larger than the node or the Ray placement group
    ("ValueError: placement group bundle index 6 is invalid. Valid placement group indexes: 0-4", "fix_config"),
    ("RuntimeError: please ensure that world_size (2) is less than than max local gpu count (1)", "fix_config"),
    # a quantized layer no kernel of this release implements on this GPU; a checkpoint whose
    # parameters the model class does not have (another task, a quantization option)
    ('ValueError: Failed to find a kernel that can implement the WNA16 linear layer. Reasons: "', "fix_config"),
    (
        "ValueError: There is no module or parameter named 'embed_tokens' in Qwen3ForCausalLM",
        "fix_config",
    ),
]


# lines that are not exceptions but name what the host or the image refused (round 34)
REFUSALS = [
    ("(RayWorker pid=4711) Fatal Python error: Bus error", "shared memory or a mapped file"),
    ("(RayWorker pid=4711) *** SIGBUS received at time=1692322557 on cpu 5 ***", "shared memory or a mapped file"),
    ("ptxas fatal   : Value 'sm_121a' is not defined for option 'gpu-name'", "toolchain"),
    (
        "CUDA error (/__w/xformers/xformers/third_party/flash-attention/hopper/flash_fwd_launch_template.h:188): invalid argument",
        "kernel build",
    ),
    (
        "# title: [Bug]: RTX5080 got CUDA error: no kernel image is available for execution on the device",
        "kernel build",
    ),
    (
        "(Worker_TP0 pid=1070) ERROR 04-30 23:38:48 [multiproc_executor.py:932]         rtMemGetInfoEx execution failed, reason=driver error:no valid device[FUNC:FuncErrorReason]",
        "driver",
    ),
    # round 36: NCCL's InfiniBand transport failing between two nodes (RoCE), warned not raised
    (
        "[2026-04-06 23:02:12] host-a:158:188 [0] transport/net_ib/p2p.cc:651 NCCL WARN NET/IB: Got completion from peer 10.0.0.2<43007> with status=IBV_WC_REM_INV_REQ_ERR(9) opcode=IBV_WC_SEND(0) vendor_err=138",
        "network",
    ),
    # round 36: Ascend's operator package missing for a kernel the model calls
    (
        "ERROR 04-18 08:22:17 engine.py:400] call aclnnSwiGlu failed, detail:EZ1001: [PID: 426] 2025-04-18-08:22:17.195.330 Get path and read binary_info_config.json failed, please check if the opp_kernel package is installed!",
        "operator package",
    ),
]


REFUSALS.append(
    # round 42: NIM's model hub client cannot reach the registry (a pod without egress)
    (
        '{"level": "None", "message": "[09-25 19:03:45.989 ERROR  nim_sdk::hub::repo  rust/nim-sdk/src/hub/repo.rs:119] error sending request for url (https://api.ngc.nvidia.com/v2/org/nim/team/meta/models/llama-3_1-70b-instruct/files)"}',
        "network",
    )
)


def test_a_notebooks_traceback_named_only_in_its_header_is_that_exception() -> None:
    # IPython prints the exception's type above the frames and its message at the bottom; a
    # pasted cell cut before the bottom still names the Hub's lookup failure
    log = "\n".join(
        [
            "---------------------------------------------------------------------------",
            "LocalEntryNotFoundError                   Traceback (most recent call last)",
            "Cell In[2], line 1",
            '----> 1 llm = LLM(model="facebook/opt-125m")',
            "File ~/envs/x/lib/python3.8/site-packages/vllm/entrypoints/llm.py:62, in LLM.__init__(self, model)",
            "---> 62 self.llm_engine = LLMEngine.from_engine_args(engine_args)",
        ]
    )
    report = diagnose(log)
    assert (report.verdict, report.facts["error_type"], report.diagnoses[0].remedies[0].action) == (
        "other",
        "LocalEntryNotFoundError",
        "fix_environment",
    )
    # the message at the bottom, where it is there, is the one read (an OOM stays an OOM)
    oom = (
        log
        + "\nOutOfMemoryError: CUDA out of memory. Tried to allocate 1002.00 MiB. GPU 0 has a total capacity of 14.75 GiB of which 823.06 MiB is free."
    )
    assert diagnose(oom.replace("LocalEntryNotFoundError", "OutOfMemoryError", 1)).verdict == "cuda_oom"


@pytest.mark.parametrize(("line", "kind"), REFUSALS, ids=[line[:40] for line, _ in REFUSALS])
def test_a_refusal_line_names_the_environment_kind(line: str, kind: str) -> None:
    log = "\n".join(
        [
            "INFO 08-18 01:35:40 llm_engine.py:72] Initializing an LLM engine with config: model='lmsys/vicuna-13b-v1.5'",
            line,
            "RuntimeError: Engine core initialization failed. See root cause above.",
        ]
    )
    report = diagnose(log)
    top = report.diagnoses[0]
    assert (report.verdict, top.remedies[0].action, report.facts["environment_kind"]) == (
        "other",
        "fix_environment",
        kind,
    )


def test_a_kernels_cuda_error_about_memory_stays_memory() -> None:
    line = "CUDA error (/csrc/kernels/foo.cu:12): out of memory"
    assert "environment_kind" not in diagnose(f"{HEAD}EngineCore failed to start.\n{line}").facts


def test_a_zero_beside_another_ranks_communication_failure_is_not_the_kv_cache() -> None:
    # Ascend, two nodes: a rank's HCCL resources ran out while its peers were still profiling and
    # printed "Available memory: 0"; the error raised is the collective's
    worker = "(Worker_DP2_TP0_EP8 pid=9197) INFO 01-19 05:52:54 [worker.py:283] Available memory: 0, total memory: 65464696832"
    log = "\n".join(
        [
            "[rank9]:[E119 05:52:40.886041733 compiler_depend.ts:444] operator():build/CMakeFiles/torch_npu.dir/compiler_depend.ts:161 NPU function error: call aclnnMoeDistributeDispatchV3 failed, error code is 561000",
            worker,
            "(EngineCore_DP2 pid=9164) RuntimeError: Worker failed with error '[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:544] Connection closed by peer [10.0.0.3]:46499', please check the stack trace above for the root cause",
        ]
    )
    report = diagnose(log)
    assert (report.verdict, report.diagnoses[0].remedies[0].action) == ("other", "fix_environment")
    # the same zero with vLLM's own no-blocks error is the KV cache's
    alone = f"{worker}\nValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."
    assert diagnose(alone).verdict == "no_cache_blocks"


def test_a_missing_kernel_library_inside_graph_capture_is_the_environment_not_the_capture() -> None:
    frame = '(Worker pid=9) ERROR 09-20 10:00:00 [multiproc_executor.py:597]   File "/vllm-ascend/vllm_ascend/{}", line {}, in {}'
    log = "\n".join(
        [
            "(Worker pid=9) ERROR 09-20 10:00:00 [multiproc_executor.py:597] WorkerProc hit an exception.",
            "(Worker pid=9) ERROR 09-20 10:00:00 [multiproc_executor.py:597] Traceback (most recent call last):",
            frame.format("worker/model_runner_v1.py", 2900, "capture_model"),
            frame.format("compilation/acl_graph.py", 180, "__call__"),
            "(Worker pid=9) ERROR 09-20 10:00:00 [multiproc_executor.py:597] AttributeError: '_OpNamespace' '_C_ascend' object has no attribute 'weak_ref_tensor'",
        ]
    )
    report = diagnose(log)
    assert (report.verdict, report.diagnoses[0].remedies[0].action) == ("other", "fix_environment")


def test_a_shape_error_logged_bare_above_its_traceback_is_the_failure() -> None:
    # V0's MQ engine logs str(e) above the traceback; the traceback's last line is cut
    log = "\n".join(
        [
            "ERROR 07-17 11:55:38 [engine.py:458] shape '[7447, -1, 128]' is invalid for input of size 137191424",
            "ERROR 07-17 11:55:38 [engine.py:458] Traceback (most recent call last):",
            'ERROR 07-17 11:55:38 [engine.py:458]   File "/venv/lib/python3.10/site-packages/vllm/worker/model_runner.py", line 1302, in profile_run',
            "ERROR 07-17 11:55:38 [engine.py:458]     self.execute_model(model_input, kv_caches, intermediate_tensors)",
        ]
    )
    report = diagnose(log)
    assert (report.verdict, report.diagnoses[0].remedies[0].action) == ("other", "fix_environment")


def test_nccls_own_cuda_failure_warning_names_the_environment() -> None:
    # NCCL_DEBUG=INFO output, then the worker's traceback with its exception cut
    log = "\n".join(
        [
            "[2026-04-13 19:52:24] host:508:508 [0] init.cc:426 NCCL WARN Cuda failure 'operation not supported'",
            "host:508:508 [0] NCCL INFO init.cc:1437 -> 1",
            "(Worker pid=509) ERROR 04-13 19:52:24 [multiproc_executor.py:800] WorkerProc failed to start.",
            "(Worker pid=509) ERROR 04-13 19:52:24 [multiproc_executor.py:800] Traceback (most recent call last):",
            '(Worker pid=509) ERROR 04-13 19:52:24 [multiproc_executor.py:800]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/multiproc_executor.py", line 771, in worker_main',
        ]
    )
    report = diagnose(log)
    top = report.diagnoses[0]
    assert (report.verdict, top.remedies[0].action) == ("other", "fix_environment")
    assert "NCCL's CUDA call" in top.remedies[0].text


def test_a_traceback_cut_inside_torch_compile_leads_with_eager_mode() -> None:
    frame = '(EngineCore_0 pid=7) ERROR 07-15 03:02:32 [core.py:586]   File "/venv/lib/python3.12/site-packages/{}", line {}, in {}'
    log = "\n".join(
        [
            "(EngineCore_0 pid=7) ERROR 07-15 03:02:32 [core.py:586] EngineCore failed to start.",
            "(EngineCore_0 pid=7) ERROR 07-15 03:02:32 [core.py:586] Traceback (most recent call last):",
            frame.format("vllm/v1/worker/gpu_model_runner.py", 2021, "profile_run"),
            frame.format("torch/_dynamo/output_graph.py", 1539, "_call_user_compiler"),
            frame.format("torch/_dynamo/repro/after_dynamo.py", 150, "__call__"),
        ]
    )
    report = diagnose(log)
    assert (report.verdict, report.diagnoses[0].remedies[0].action) == ("other", "enforce_eager")
    # a compiled model only running through Dynamo's frames on its forward is no compile failure
    running = log.replace("torch/_dynamo/output_graph.py", "torch/_dynamo/eval_frame.py").replace(
        "torch/_dynamo/repro/after_dynamo.py", "torch/nn/modules/module.py"
    )
    assert diagnose(running).diagnoses[0].remedies[0].action != "enforce_eager"


@pytest.mark.parametrize(("line", "first"), CASES, ids=[c[0][:48] for c in CASES])
def test_a_non_memory_error_names_its_fix(line: str, first: str) -> None:
    report = diagnose(f"{HEAD}EngineCore failed to start.\n{HEAD}{line}")
    top = report.diagnoses[0]
    assert (report.verdict, top.remedies[0].action) == ("other", first)
    assert "lower_gpu_memory_utilization" not in [r.action for r in top.remedies]
