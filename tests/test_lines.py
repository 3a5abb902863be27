"""Reading lines: decoding, ANSI, carriage returns and the wrappers real pastes carry."""

from __future__ import annotations

import gzip
import io

import pytest

from kvdoctor.reader.lines import InputError, Line, decode, iter_raw_lines, normalise, open_source, peel

MSG = "Available KV cache memory: 6.51 GiB"


@pytest.mark.parametrize(
    ("raw", "proc", "pid", "rank", "container"),
    [
        # vLLM header, 0.8.0+ with brackets, and the bare message
        (f"INFO 10-03 16:22:17 [gpu_worker.py:298] {MSG}", None, None, None, None),
        # vLLM header before 0.8.0: no opening bracket
        (f"INFO 04-27 10:13:05 llm_engine.py:275] {MSG}", None, None, None, None),
        # DEBUG file path with "/" and "..."
        (f"DEBUG 09-15 08:00:11 [v1/.../gpu_worker.py:298] {MSG}", None, None, None, None),
        # V1 engine core and workers
        (
            f"(EngineCore_DP0 pid=1133552) INFO 10-03 16:22:17 [gpu_worker.py:298] {MSG}",
            "EngineCore_DP0",
            1133552,
            None,
            None,
        ),
        (
            f"(VllmWorker rank=1 pid=2445156) INFO 05-10 16:00:15 [gpu_worker.py:1] {MSG}",
            "VllmWorker rank=1",
            2445156,
            1,
            None,
        ),
        (
            f"(Worker_TP3 pid=150) INFO 05-14 00:04:17 [gpu_worker.py:460] {MSG}",
            "Worker_TP3",
            150,
            3,
            None,
        ),
        (
            f"(RayWorkerWrapper pid=48213, ip=10.0.0.2) INFO 01-05 10:13:05 model_runner.py:501] {MSG}",
            "RayWorkerWrapper",
            48213,
            None,
            None,
        ),
        # the leading "(" lost in a paste (corpus 003)
        (f"EngineCore_0 pid=1597554) {MSG}", "EngineCore_0", 1597554, None, None),
        # raw ESC colour around the prefix (0.4.2..0.11.2), and the "#033[" / "^[[" paste forms
        (
            f"\x1b[1;36m(VllmWorkerProcess pid=3061)\x1b[0;0m INFO 08-06 14:20:43 worker.py:1] {MSG}",
            "VllmWorkerProcess",
            3061,
            None,
            None,
        ),
        (
            f"#033[1;36m(VllmWorkerProcess pid=3061)#033[0;0m INFO 08-06 14:20:43 worker.py:1] {MSG}",
            "VllmWorkerProcess",
            3061,
            None,
            None,
        ),
        (
            f"^[[1;36m(VllmWorkerProcess pid=3061)^[[0;0m INFO 08-06 14:20:43 worker.py:1] {MSG}",
            "VllmWorkerProcess",
            3061,
            None,
            None,
        ),
        # docker compose
        (f"vllm-1  | INFO 10-03 16:22:17 [gpu_worker.py:298] {MSG}", None, None, None, "vllm-1"),
        (
            f"vllm_server_1 | (EngineCore_DP0 pid=7) INFO 10-03 16:22:17 [gpu_worker.py:298] {MSG}",
            "EngineCore_DP0",
            7,
            None,
            "vllm_server_1",
        ),
        # FastChat worker
        (
            f"2024-05-01 12:00:00 | ERROR | stderr | INFO 05-01 12:00:00 gpu_executor.py:1] {MSG}",
            None,
            None,
            None,
            "stderr",
        ),
        # Buildkite
        (
            f"  | [2024-05-01T12:00:00Z] INFO 05-01 12:00:00 [gpu_worker.py:1] {MSG}",
            None,
            None,
            None,
            None,
        ),
        (
            f"_bk;t=1714567890123\x07INFO 05-01 12:00:00 [gpu_worker.py:1] {MSG}",
            None,
            None,
            None,
            None,
        ),
        # Kubernetes CRI and kubectl --timestamps / Cloud Logging / CloudWatch
        (
            f"2024-09-02T16:58:05.768614Z stdout F INFO 09-02 16:58:05 [gpu_worker.py:1] {MSG}",
            None,
            None,
            None,
            "stdout",
        ),
        (
            f"2024-09-02T16:58:05.768614Z INFO 09-02 16:58:05 [gpu_worker.py:1] {MSG}",
            None,
            None,
            None,
            None,
        ),
        (f"2024-09-02T16:58:05.768Z\tabc-123\t{MSG}", None, None, None, None),
        # TorchServe MODEL_LOG (corpus 099)
        (
            f"2024-09-13T22:25:38,258 [INFO ] W-9000-model_1.0-stdout MODEL_LOG - (VllmWorkerProcess pid=2716901) INFO 09-13 22:25:38 model_runner.py:1008] {MSG}",
            "VllmWorkerProcess",
            2716901,
            None,
            "W-9000-model_1.0-stdout",
        ),
        # torch elastic and platform prefixes (corpus 057), nested
        (f"[vllm]: [rank0]: {MSG}", None, None, 0, "vllm"),
        # HF transformers / LlamaFactory logger
        (f"[WARNING|logging.py:329] 2025-03-10 21:43:12,326 >> {MSG}", None, None, None, None),
        # JSON lines: docker json-file and structured loggers
        (
            '{"log": "INFO 10-03 16:22:17 [gpu_worker.py:298] '
            + MSG
            + '\\n", "stream": "stdout", "time": "2024-01-01T00:00:00Z"}',
            None,
            None,
            None,
            "stdout",
        ),
        (
            '{"message": "(EngineCore_DP0 pid=5) ' + MSG + '", "kubernetes": {"container_name": "vllm"}}',
            "EngineCore_DP0",
            5,
            None,
            "vllm",
        ),
    ],
)
def test_peels_wrappers(raw: str, proc: str | None, pid: int | None, rank: int | None, container: str | None) -> None:
    message, origin = peel(decode(raw.encode()))
    assert message == MSG
    assert (origin.proc, origin.pid, origin.rank, origin.container) == (proc, pid, rank, container)


def test_ray_repeated_suffix_is_recorded() -> None:
    message, origin = peel(f"(RayWorkerWrapper pid=9, ip=10.0.0.3) {MSG} [repeated 30x across cluster]")
    assert message == MSG and origin.repeated == 30


def test_header_keeps_level_stamp_and_bracket_form() -> None:
    _, new = peel(f"WARNING 05-16 18:43:01 [gpu_model_runner.py:1186] {MSG}")
    _, old = peel(f"WARNING 05-16 18:43:01 gpu_model_runner.py:1186] {MSG}")
    assert (new.level, new.stamp, new.src) == (
        "WARNING",
        "05-16 18:43:01",
        "[gpu_model_runner.py:1186",
    )
    assert old.src == "gpu_model_runner.py:1186"


def test_carriage_return_progress_bar_keeps_last_frame() -> None:
    raw = b"Loading shards:  25%|##  | 1/4\rLoading shards:  50%|#### | 2/4\rLoading shards: 100%|########| 4/4\r"
    assert decode(raw) == "Loading shards: 100%|########| 4/4"


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    assert decode(b"GPU blocks: \xff\xfe 12") == "GPU blocks: \ufffd\ufffd 12"


def test_crlf_and_nul_bytes() -> None:
    assert decode(b"INFO x\r") == "INFO x"
    assert decode(b"a\x00b") == "ab"


def test_line_numbers_are_original() -> None:
    lines = list(normalise([b"first", b"", b"(Worker_TP1 pid=3) third"]))
    assert [(line.number, line.text) for line in lines] == [(1, "first"), (2, ""), (3, "third")]
    assert isinstance(lines[2], Line) and lines[2].origin.rank == 1


def test_gzip_and_plain_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    plain = tmp_path / "a.log"
    plain.write_bytes(b"one\ntwo\n")
    packed = tmp_path / "a.log.gz"
    packed.write_bytes(gzip.compress(b"one\ntwo\n"))
    for path in (plain, packed):
        assert list(iter_raw_lines(open_source(str(path)))) == [b"one", b"two"]


def test_truncated_gzip_keeps_what_was_read(tmp_path) -> None:  # type: ignore[no-untyped-def]
    packed = tmp_path / "cut.log.gz"
    packed.write_bytes(gzip.compress(b"line\n" * 10000)[:-20])
    got: list[bytes] = []
    with pytest.raises(InputError):
        for line in iter_raw_lines(open_source(str(packed))):
            got.append(line)
    assert len(got) > 1000


@pytest.mark.parametrize(("path", "expect"), [("missing.log", "no such file"), (".", "is a directory")])
def test_unreadable_paths_give_one_line_errors(tmp_path, monkeypatch, path: str, expect: str) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as info:
        open_source(path)
    assert expect in str(info.value) and "\n" not in str(info.value)


def test_no_newline_pathological_line_is_cut() -> None:
    stream = io.BufferedReader(io.BytesIO(b"x" * (6 << 20)))  # type: ignore[arg-type]
    assert sum(len(part) for part in iter_raw_lines(stream)) == 6 << 20


def test_sparse_reading_keeps_windows_and_numbers() -> None:
    from kvdoctor.reader.lines import WINDOW_BEFORE, iter_sparse_lines

    serving = [
        f"INFO 11-02 10:00:00 [loggers.py:1] Engine 000: Avg prompt throughput: {i}.0 tokens/s".encode()
        for i in range(5000)
    ]
    startup = [
        b"INFO 11-02 10:01:00 [core.py:1] Initializing a V1 LLM engine (v0.10.2) with config: model='m'",
        b"INFO 11-02 10:01:01 [gpu_worker.py:1] Available KV cache memory: 6.51 GiB",
        b"INFO 11-02 10:01:01 [kv_cache_utils.py:1] GPU KV cache size: 42,656 tokens",
    ]
    lines = serving + startup + serving
    stream = io.BufferedReader(io.BytesIO(b"\n".join(lines) + b"\n"))  # type: ignore[arg-type]
    got = dict(iter_sparse_lines(stream, dense_bytes=0))
    assert got[5001] == startup[0] and got[5002] == startup[1] and got[5003] == startup[2]
    assert 5000 - WINDOW_BEFORE in got and got[5000] == serving[-1]  # context before the anchor
    assert len(got) < 400  # the rest was skipped
    assert got[min(got)] == b""  # a skipped stretch is marked


def test_sparse_reading_is_identical_for_small_inputs() -> None:
    from kvdoctor.reader.lines import iter_sparse_lines

    data = b"a\nb\r\n\nlast-without-newline"
    assert list(iter_sparse_lines(io.BufferedReader(io.BytesIO(data)))) == [  # type: ignore[arg-type]
        (1, b"a"),
        (2, b"b\r"),
        (3, b""),
        (4, b"last-without-newline"),
    ]


@pytest.mark.parametrize(
    ("raw", "message", "proc"),
    [
        # journald / syslog
        (
            'Aug 19 18:34:30 gpu-host vllm[8707]: (APIServer pid=8707)   File "x.py", line 1, in f',
            '  File "x.py", line 1, in f',
            "APIServer",
        ),
        # k9s boxed view
        (f"│ (APIServer pid=1) INFO 10-20 03:21:02 [utils.py:328] {MSG}  │", MSG, "APIServer"),
        # Ray Serve replica names hold colons
        (
            f"(ServeReplica:app:LLMDeployment pid=12249, ip=10.0.0.1) INFO 01-01 00:00:00 [x.py:1] {MSG}",
            MSG,
            "ServeReplica:app:LLMDeployment",
        ),
        # a page pasted with HTML entities
        (
            "(EngineCore_DP0 pid=142) ERROR 01-01 00:00:00 [core.py:718] ValueError: a &gt; b &amp;&nbsp;c",
            "ValueError: a > b & c",
            "EngineCore_DP0",
        ),
    ],
)
def test_more_wrappers(raw: str, message: str, proc: str) -> None:
    text, origin = peel(decode(raw.encode()))
    assert (text, origin.proc) == (message, proc)


def test_nvidia_smi_table_rows_are_not_taken_for_boxes() -> None:
    row = "|   0  NVIDIA H100 80GB HBM3          On  | 00000000:18:00.0 Off |                    0 |"
    assert peel(row)[0] == row


def test_records_run_together_are_split() -> None:
    flat = (
        b'x = raise_for_status(r)(APIServer pid=2960)   File "a.py", line 453, in hf_raise'
        b"(APIServer pid=2960)     raise HTTPError(msg)"
    )
    lines = list(normalise([flat]))
    assert [(line.number, line.text.strip(), line.origin.proc) for line in lines] == [
        (1, "x = raise_for_status(r)", None),
        (1, 'File "a.py", line 453, in hf_raise', "APIServer"),
        (1, "raise HTTPError(msg)", "APIServer"),
    ]


def test_terminal_wrapped_and_split_messages_are_joined() -> None:
    from kvdoctor.reader.joiner import join_lines

    wrapped = [
        b"(EngineCore pid=316) ValueError: To serve at least one request with the model's max seq len (100000), (4.26 GiB KV cach",
        b"e is needed, which is larger than the available KV cache memory (4.25 GiB).",
        b"Free memory on device (110.37/121.69 GiB) on startup.",
    ]
    joined = [line.text for line in join_lines(normalise(wrapped))]
    assert joined[0].startswith("ValueError: To serve") and "(4.26 GiB KV cache is needed" in joined[0]
    summary = [
        line.text
        for line in join_lines(
            normalise(
                [
                    b"Free memory on device (110.37/121.69 GiB) on startup.",
                    b"Desired GPU memory utilization is (0.87, 105.87 GiB).",
                ]
            )
        )
    ]
    assert summary == [
        "Free memory on device (110.37/121.69 GiB) on startup. Desired GPU memory utilization is (0.87, 105.87 GiB)."
    ]


def test_a_unit_rewrapped_onto_its_own_line_rejoins_its_figure() -> None:
    from kvdoctor.api import diagnose

    quoted = "\n".join(
        [
            "▎ INFO 05-11 08:00:30 [gpu_worker.py:232] Available KV cache memory: -1.37",
            "▎ GiB",
            "▎ ERROR 05-11 08:00:31 [core.py:396] ValueError: No available memory for the cache blocks. Try",
            "▎ increasing `gpu_memory_utilization` when initializing the engine.",
        ]
    )
    report = diagnose(quoted)
    assert (report.verdict, report.facts["kv_cache_gib"]) == ("no_cache_blocks", -1.37)


def test_sparse_reading_keeps_exact_numbers_across_skipped_chunks() -> None:
    from kvdoctor.reader.lines import CHUNK, iter_sparse_lines

    filler = [
        f'INFO:     10.0.0.{i % 250}:5000 - "POST /v1/completions HTTP/1.1" 200 OK'.encode() for i in range(120_000)
    ]
    startup = b"INFO 11-02 10:01:01 [gpu_worker.py:1] Available KV cache memory: 6.51 GiB"
    lines = filler + [startup] + filler[:5000]
    data = b"\n".join(lines) + b"\n"
    assert len(data) > 3 * CHUNK  # several chunks are skipped before the start-up
    got = dict(iter_sparse_lines(io.BufferedReader(io.BytesIO(data)), dense_bytes=0))  # type: ignore[arg-type]
    assert got[len(filler) + 1] == startup


def test_buildkite_timestamps_are_dropped_with_or_without_their_esc() -> None:
    from kvdoctor.reader.lines import decode

    assert decode(b"\x1b_bk;t=1700000000000\x07INFO x") == "INFO x"
    assert decode(b"_bk;t=1700000000000\x07INFO x") == "INFO x"
    assert decode(b"stray \x1b ESC") == "stray  ESC"


def test_a_paste_hard_wrapped_at_80_columns_reads_as_the_log_it_was() -> None:
    """An 80-column terminal cuts every long line into pieces exactly 80 wide, wherever the cut
    falls (inside a number, before a space); the pieces are put back together."""
    from kvdoctor.api import diagnose

    log = [
        "INFO 04-17 14:19:02 [gpu_worker.py:227] Available KV cache memory: 4.80 GiB",
        "(EngineCore_DP0 pid=8104) ERROR 04-17 14:19:03 [core.py:708] ValueError: To serve at least one request "
        "with the models's max seq len (40960), (5.62 GiB KV cache is needed, which is larger than the "
        "available KV cache memory (4.80 GiB). Based on the available memory, the estimated maximum model "
        "length is 34944. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
        "initializing the engine.",
        "(EngineCore_DP0 pid=8104) ERROR 04-17 14:19:03 [core.py:708] EngineCore failed to start.",
    ]
    wrapped = [line[i : i + 80] for line in log for i in range(0, len(line), 80)]
    assert max(len(line) for line in wrapped) == 80
    whole, cut = diagnose("\n".join(log)), diagnose("\n".join(wrapped))
    assert cut.verdict == whole.verdict == "max_model_len_too_large"
    facts = cut.primary.facts  # type: ignore[union-attr]
    assert (facts["max_model_len"]["value"], facts["estimated_max_model_len"]["value"]) == (40960, 34944)
    assert cut.diagnoses[0].remedies[0].value == whole.diagnoses[0].remedies[0].value


def test_a_long_line_is_not_glued_to_a_prefixed_line_or_a_code_line_below_it() -> None:
    from kvdoctor.reader.joiner import join_lines

    long_cmd = "python -m vllm.entrypoints.openai.api_server --model data/Qwen1.5-14B-Chat --dtype half --gpu-memory-utilization 0.95"
    lines = [Line(1, long_cmd, long_cmd), Line(2, 'raise ValueError("x")', 'raise ValueError("x")')]
    assert [line.text for line in join_lines(lines)] == [long_cmd, 'raise ValueError("x")']
    blocks = "INFO 11-20 10:45:57 gpu_executor.py:102] # GPU blocks: 12453, # CPU blocks: 2730" + " " * 30 + "2730"
    raw = "2025-06-01T10:00:00.123456789Z stderr F Killed"
    text, origin = peel(raw)
    joined = list(join_lines([Line(1, blocks, blocks), Line(2, text, raw, origin)]))
    assert [line.text for line in joined][-1] == "Killed"


def test_a_numbered_compose_service_keeps_a_traceback_s_indented_lines() -> None:
    text, origin = peel("vllm-1  |     self.model_executor.determine_num_available_blocks())")
    assert (text, origin.container) == ("    self.model_executor.determine_num_available_blocks())", "vllm-1")
    assert peel("a  |   b")[1].container is None  # a table cell is not a service


def test_a_json_log_record_holding_a_process_prefix_is_peeled_whole() -> None:
    import json

    raw = json.dumps({"log": "(EngineCore_DP0 pid=43) ERROR 03-20 17:39:14 [core.py:1100] boom\n", "stream": "stderr"})
    (line,) = list(normalise([raw.encode()]))
    assert (line.text, line.origin.proc, line.origin.container) == ("boom", "EngineCore_DP0", "stderr")


def test_a_short_paste_indented_as_a_block_keeps_its_exception_line() -> None:
    from kvdoctor.api import diagnose

    log = (
        "    ValueError: Free memory on device cuda:0 (30.12/31.84 GiB) on startup is\n"
        "    less than desired GPU memory utilization (0.95, 30.25 GiB)."
    )
    assert diagnose(log).verdict == "insufficient_free_memory_at_startup"


def test_one_message_cut_once_at_80_columns_is_put_back() -> None:
    from kvdoctor.api import diagnose

    line = "The model's max seq len (56000) is larger than the maximum number of tokens that can be stored in KV cache (43328)"
    cut = diagnose("\n".join([line[:80], line[80:]]))
    assert cut.verdict == "max_model_len_too_large"
    assert cut.primary.facts["max_tokens_in_kv_cache"]["value"] == 43328  # type: ignore[union-attr]
    # a cut inside a capitalised word
    free = "Free memory on device cuda:0 (27.07/32.0 GiB) on startup is less than desired GPU memory utilization (0.92, 29.44 GiB)"
    assert diagnose("\n".join([free[:80], free[80:]])).verdict == "insufficient_free_memory_at_startup"
    # two lines re-wrapped by hand and indented are not a terminal's cut
    rewrapped = (
        "     ValueError: Free memory on device cuda:0 (1.33/23.98 GiB) on startup is less\n"
        "     than desired GPU memory utilization (0.95, 22.79 GiB)."
    )
    assert diagnose("```\n" + rewrapped + "\n```").verdict == "insufficient_free_memory_at_startup"


def test_the_stats_loggers_start_up_kv_line_is_read_not_passed_over_as_serving() -> None:
    from kvdoctor.api import diagnose

    log = "\n".join(
        [
            "(APIServer pid=417108) INFO 08-03 15:22:15 [loggers.py:147] Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: 3518",
            "(APIServer pid=417108) INFO 08-03 15:22:25 [loggers.py:116] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s",
        ]
    )
    report = diagnose(log)
    assert (report.verdict, report.facts["gpu_blocks"]) == ("healthy", 3518)


def test_the_data_parallel_block_sum_is_not_read_as_one_engines_blocks() -> None:
    # "%d Engines: …" prints the sum over the data-parallel engines: each engine holds a share
    from kvdoctor.api import diagnose

    line = "(APIServer pid=7) INFO 10-02 11:04:51 [loggers.py:205] {} Engines: vllm cache_config_info with initialization after num_gpu_blocks is: {}"
    assert "gpu_blocks" not in diagnose(line.format(4, 93612)).facts
    assert diagnose(line.format(4, 0)).facts["gpu_blocks"] == 0
    assert diagnose(line.format(1, 5924)).facts["gpu_blocks"] == 5924


def test_a_bare_exception_name_ending_a_traceback_is_the_error() -> None:
    from kvdoctor.api import diagnose

    log = "\n".join(
        [
            "[rank0]: Traceback (most recent call last):",
            '[rank0]:   File "/venv/lib/python3.10/site-packages/vllm/worker/worker_base.py", line 107, in determine_num_available_blocks',
            "[rank0]:     raise NotImplementedError",
            "[rank0]: NotImplementedError",
        ]
    )
    report = diagnose(log)
    assert (report.facts["error_type"], report.verdict) == ("NotImplementedError", "other")


def test_an_exception_a_warning_names_does_not_hide_the_one_raised() -> None:
    from kvdoctor.api import diagnose

    log = "\n".join(
        [
            "(EngineCore pid=7) WARNING 06-23 15:43:18 [import_utils.py:408] AssertionError",
            "(EngineCore pid=7) ERROR 06-23 15:43:20 [core.py:700] RuntimeError: Could not find nvcc and default cuda_home='/usr/local/cuda' doesn't exist",
        ]
    )
    assert diagnose(log).facts["error_type"] == "RuntimeError"


def test_a_python_signature_in_a_traceback_is_not_a_launch_args_line() -> None:
    from kvdoctor.api import diagnose

    log = "\n".join(
        [
            "INFO 07-31 15:57:27 [utils.py:233] non-default args: {'model': 'Qwen/Qwen3-VL-Embedding-2B', 'max_model_len': 2048, 'gpu_memory_utilization': 0.8}",
            "(EngineCore_DP0 pid=9) INFO 07-31 15:57:48 [gpu_model_runner.py:2653] Model loading took 3.4554 GiB and 4.118646 seconds",
            "(EngineCore_DP0 pid=9) ERROR 07-31 15:57:54 [core.py:710]     return lambda *args, **kwargs: self.run(grid=grid, warmup=False, *args, **kwargs)",
        ]
    )
    report = diagnose(log)
    assert len(report.attempts) == 1
    assert (report.facts["max_model_len"], report.facts["weights_gib"]) == (2048, 3.4554)


def test_a_max_len_error_rewrapped_before_its_parenthesised_length_is_joined() -> None:
    from kvdoctor.api import diagnose

    log = "\n".join(
        [
            "ValueError: To serve at least one request with the models's max seq len",
            "(200000), (3.31 GiB KV cache is needed, which is larger than the",
            "available KV cache memory (2.19 GiB). Based on the available memory,",
            "the estimated maximum model length is 111456.",
        ]
    )
    report = diagnose(log)
    assert (report.verdict, report.facts["max_model_len"], report.facts["estimated_max_model_len"]) == (
        "max_model_len_too_large",
        200000,
        111456,
    )


def test_the_calling_programs_own_error_after_vllm_started_is_not_a_start_up_failure() -> None:
    from kvdoctor.api import diagnose

    log = "\n".join(
        [
            "INFO 09-18 09:25:10 [executor_base.py:112] # cuda blocks: 5542, # CPU blocks: 2340",
            "INFO 09-18 09:25:40 [llm_engine.py:437] init engine (profile, create kv cache, warmup model) took 30.06 seconds",
            "Traceback (most recent call last):",
            '  File "/workspace/ART/src/art/local/backend.py", line 279, in done_callback',
            "    close_proxy(self._services.pop(model.name))",
            "asyncio.exceptions.CancelledError",
        ]
    )
    assert diagnose(log).verdict == "healthy"


def test_the_free_memory_check_rewrapped_before_desired_is_joined() -> None:
    from kvdoctor.api import diagnose

    log = "Free memory on device (21.96/79.25 GiB) on startup is less than \ndesired GPU memory utilization (0.7, 55.48 GiB)"
    report = diagnose(log)
    assert (report.verdict, report.facts["free_gpu_gib_at_startup"], report.facts["requested_gib"]) == (
        "insufficient_free_memory_at_startup",
        21.96,
        55.48,
    )


def test_a_json_records_exc_info_traceback_is_read_line_by_line() -> None:
    # NVIDIA NIM's JSON logger: the message is empty, the traceback sits in "exc_info"
    import json

    from kvdoctor.api import diagnose

    record = {
        "level": "ERROR",
        "file_name": "launch.py",
        "message": "",
        "exc_info": "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.10/dist-packages/vllm/worker/worker.py", line 230, in determine_num_available_blocks\n'
        "    self.model_runner.profile_run()\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 22.06 GiB of which 1.2 GiB is free.",
        "stack_info": "None",
    }
    report = diagnose(json.dumps(record))
    assert (report.verdict, report.facts["oom_phase"]) == ("cuda_oom", "profile_run")
    # a record cut by the paste inside its exc_info still gives the lines it holds
    cut = json.dumps(record)[:-60]
    assert diagnose(cut).facts["failing_function"] == "determine_num_available_blocks"
