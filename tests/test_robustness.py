"""kvdoctor never dies on a log, whatever bytes it holds."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvdoctor.api import diagnose

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
# fragments of real lines, so the generator reaches the extractors and not only the decoder
FRAGMENTS = [
    b"INFO 01-15 11:06:48 worker.py:240] ",
    b"(EngineCore_DP0 pid=5) ",
    b"# GPU blocks: ",
    b"GiB",
    b"Available KV cache memory: -",
    b"ValueError: ",
    b"No available memory for the cache blocks",
    b"max seq len (",
    b") is larger than the maximum number of tokens that can be stored in KV cache (",
    b"Free memory on device (",
    b"/",
    b" GiB) on startup is less than desired GPU memory utilization (",
    b"CUDA out of memory. Tried to allocate ",
    b" MiB",
    b"Process 12 has ",
    b"args: Namespace(",
    b"gpu_memory_utilization=",
    b"non-default args: {'",
    b"Traceback (most recent call last)",
    b'  File "x.py", line 1, in capture_model',
    b"\x1b[1;36m",
    b"\r",
    b"\n",
    b"\xff\xfe",
    b'{"log": "',
    b"\\",
    b"0.9",
    b"-1e309",
    b"99999999999999999999999",
    b"\t",
    b"\x00",
    b"|",
    b"\xe2\x94\x82",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.binary(max_size=40)), max_size=60))
def test_arbitrary_bytes_never_raise(parts: list[bytes]) -> None:
    report = diagnose(b"".join(parts))
    assert report.verdict in {
        "no_cache_blocks",
        "max_model_len_too_large",
        "insufficient_free_memory_at_startup",
        "cuda_oom",
        "healthy",
        "other",
        "unknown",
    }
    report.as_records()


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=2000), st.binary(min_size=1, max_size=8))
def test_corrupted_real_log_never_raises(position: int, junk: bytes) -> None:
    data = (CORPUS / "054-v1-new-format-tp-h100-kv-cache-memory-hint-healthy.log").read_bytes()
    cut = position % len(data)
    diagnose(data[:cut] + junk + data[cut:])


def test_a_gzip_with_a_corrupt_deflate_stream_is_a_read_error_not_a_crash(tmp_path: Path) -> None:
    import gzip
    import subprocess
    import sys

    good = gzip.compress(b"INFO 01-01 00:00:00 api_server.py:1] vLLM API server version 0.6.3\n" * 50)
    bad = tmp_path / "vllm.log.gz"
    bad.write_bytes(good[:10] + b"\xff" * 16 + good[26:])  # the header survives, the deflate data does not
    report = diagnose(bad)
    assert any("read error" in n for n in report.notes)
    done = subprocess.run([sys.executable, "-m", "kvdoctor", "diagnose", str(bad)], capture_output=True, check=False)
    assert done.returncode == 2
    assert done.stderr.decode().strip().endswith("copy or download the file again")
