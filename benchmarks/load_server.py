"""Load check for `kvdoctor serve` (bounded, loopback only).

Starts `kvdoctor serve` on a free 127.0.0.1 port, sends N `/v1/diagnose` requests of a real
200-line failing log (corpus 087, a TP=2 sampler warm-up OOM, preceded by the start-up lines a
vLLM server prints before it) over C keep-alive connections, and reports throughput, p50/p99
latency and errors. Every answer must be 200 with the expected verdict, or it counts as an error;
afterwards the server's own count (`GET /metrics`) must agree.

    .venv/bin/python benchmarks/load_server.py [--requests 2000] [--concurrency 32] [--workers 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAILURE = next((ROOT / "tests" / "fixtures" / "corpus").glob("087-*.log"))
EXPECTED = "cuda_oom"
KVDOCTOR = Path(sys.executable).with_name("kvdoctor")

# What vLLM 0.8.x prints on the way to the failure (model, config, parallel set-up, loading,
# profiling); numbers vary per line so the log looks like a real one, not one line repeated.
START = [
    "INFO 05-10 15:58:{s:02d} [__init__.py:239] Automatically detected platform cuda.",
    "INFO 05-10 15:58:{s:02d} [api_server.py:1043] vLLM API server version 0.8.5.post1",
    "INFO 05-10 15:58:{s:02d} [config.py:717] This model supports multiple tasks: {{'generate', "
    "'embed', 'reward', 'score', 'classify'}}. Defaulting to 'generate'.",
    "INFO 05-10 15:58:{s:02d} [config.py:1770] Defaulting to use mp for distributed inference",
    "INFO 05-10 15:58:{s:02d} [config.py:2003] Chunked prefill is enabled with max_num_batched_tokens=8192.",
    "INFO 05-10 15:58:{s:02d} [core.py:58] Initializing a V1 LLM engine (v0.8.5.post1) with "
    "config: model='Qwen/Qwen2.5-32B-Instruct', tensor_parallel_size=2, max_seq_len=32768",
]
WORKER = [
    "(VllmWorker rank={r} pid=244515{p}) INFO 05-10 15:59:{s:02d} [parallel_state.py:1004] rank "
    "{r} in world size 2 is assigned as DP rank 0, PP rank 0, TP rank {r}",
    "(VllmWorker rank={r} pid=244515{p}) INFO 05-10 15:59:{s:02d} [cuda.py:221] Using Flash "
    "Attention backend on V1 engine.",
    "(VllmWorker rank={r} pid=244515{p}) INFO 05-10 15:59:{s:02d} [weight_utils.py:265] Using "
    "model weights format ['*.safetensors']",
    "(VllmWorker rank={r} pid=244515{p}) INFO 05-10 15:59:{s:02d} [loader.py:458] Loading weights took {t:.2f} seconds",
    "(VllmWorker rank={r} pid=244515{p}) INFO 05-10 15:59:{s:02d} [gpu_model_runner.py:1347] "
    "Model loading took 30.7{n} GiB and {t:.6f} seconds",
    "(VllmWorker rank={r} pid=244515{p}) INFO 05-10 15:59:{s:02d} [backends.py:420] Using cache "
    "directory: /root/.cache/vllm/torch_compile_cache/8f3c/rank_{r}_0 for vLLM's torch.compile",
    "Loading safetensors checkpoint shards: {pct:3d}% Completed | {k}/17 [00:{s:02d}<00:30, 1.{n}4it/s]",
]


def build_log(lines: int = 200) -> bytes:
    tail = FAILURE.read_text().splitlines()
    head = [line.format(s=i % 60) for i, line in enumerate(START)]
    i = 0
    while len(head) + len(tail) < lines:
        line = WORKER[i % len(WORKER)]
        k = i // len(WORKER) % 17 + 1
        head.append(
            line.format(
                r=i % 2,
                p=5 + i % 2,
                s=(i // 3) % 60,
                t=3.1 + i / 7,
                n=i % 10,
                pct=k * 100 // 17,
                k=k,
            )
        )
        i += 1
    return ("\n".join(head + tail) + "\n").encode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(port: int, workers: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
    proc = subprocess.Popen(
        [
            str(KVDOCTOR),
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            str(workers),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("kvdoctor serve did not start within 60 s")


async def client(port: int, body: bytes, jobs: asyncio.Queue[int], latencies: list[float], errors: list[str]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        f"POST /v1/diagnose HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    try:
        while not jobs.empty():
            jobs.get_nowait()
            started = time.perf_counter()
            writer.write(head + body)
            status, payload = await asyncio.wait_for(read_response(reader), 60)
            latencies.append(time.perf_counter() - started)
            if status != 200 or json.loads(payload).get("verdict") != EXPECTED:
                errors.append(f"status {status}: {payload[:200]!r}")
    finally:
        writer.close()


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    status_line = await reader.readline()
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    return int(status_line.split()[1]), await reader.readexactly(length)


async def load(port: int, body: bytes, requests: int, concurrency: int) -> dict[str, float]:
    jobs: asyncio.Queue[int] = asyncio.Queue()
    for n in range(requests):
        jobs.put_nowait(n)
    latencies: list[float] = []
    errors: list[str] = []
    started = time.perf_counter()
    results = await asyncio.gather(
        *(client(port, body, jobs, latencies, errors) for _ in range(concurrency)),
        return_exceptions=True,
    )
    elapsed = time.perf_counter() - started
    errors += [repr(r) for r in results if isinstance(r, BaseException)]
    latencies.sort()
    return {
        "requests": len(latencies),
        "concurrency": concurrency,
        "errors": len(errors),
        "seconds": round(elapsed, 2),
        "throughput_rps": round(len(latencies) / elapsed, 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 1),
        "p99_ms": round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000, 1),
        "max_ms": round(latencies[-1] * 1000, 1),
    }


def diagnoses_counted(port: int) -> float:
    """`kvdoctor_diagnoses_total` for the expected verdict, as the server's /metrics says."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    wanted = f'kvdoctor_diagnoses_total{{verdict="{EXPECTED}"}} '
    return sum(float(line[len(wanted) :]) for line in text.splitlines() if line.startswith(wanted))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    body = build_log()
    port = free_port()
    proc = start_server(port, args.workers)
    try:
        result = asyncio.run(load(port, body, args.requests, args.concurrency))
        result["server_counted"] = diagnoses_counted(port)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    result.update(
        workers=args.workers,
        log_lines=body.count(b"\n"),
        log_bytes=len(body),
        cpus=os.cpu_count() or 0,
    )
    print(json.dumps(result))
    return 1 if result["errors"] or result["server_counted"] != result["requests"] else 0


if __name__ == "__main__":
    sys.exit(main())
