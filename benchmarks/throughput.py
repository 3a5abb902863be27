"""Throughput of `kvdoctor events` against `grep -c -E` with the same anchor words, same file,
same run (issue 2: kvdoctor must reach at least one third of grep's speed).

    python benchmarks/throughput.py [--size-mb 500] [--keep PATH]

Generates a log of realistic vLLM serving traffic (V1 stats lines, uvicorn access lines, request
logging) with real start-up blocks from the corpus inside it and one at the end, then times both
tools over it (page cache warmed first) and prints the figures and the ratio. Also prints the
peak RSS of kvdoctor, which must stay flat however large the log is.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "fixtures" / "corpus"
# the anchor words kvdoctor's reader skips on (kvdoctor.reader.lines.FAST_ANCHORS), for grep too
from kvdoctor.reader.lines import FAST_ANCHORS  # noqa: E402

ANCHORS = [a.decode() for a in FAST_ANCHORS]


def serving_lines(rng: random.Random) -> list[str]:
    out = []
    for i in range(2000):
        t = f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
        kind = rng.random()
        if kind < 0.35:
            out.append(
                f"(APIServer pid=1) INFO 11-02 {t} [loggers.py:123] Engine 000: Avg prompt throughput: "
                f"{rng.uniform(0, 9000):.1f} tokens/s, Avg generation throughput: {rng.uniform(0, 3000):.1f} "
                f"tokens/s, Running: {rng.randint(0, 64)} reqs, Waiting: {rng.randint(0, 9)} reqs, "
                f"GPU KV cache usage: {rng.uniform(0, 90):.1f}%, Prefix cache hit rate: {rng.uniform(0, 60):.1f}%"
            )
        elif kind < 0.75:
            out.append(
                f"(APIServer pid=1) INFO:     10.0.{rng.randint(0, 255)}.{rng.randint(0, 255)}:{rng.randint(1024, 65535)} "  # noqa: E501
                f'- "POST /v1/chat/completions HTTP/1.1" 200 OK'
            )
        else:
            out.append(
                f"(APIServer pid=1) INFO 11-02 {t} [logger.py:41] Received request chatcmpl-{rng.getrandbits(64):016x}: "  # noqa: E501
                f"prompt: 'Summarise the following support ticket for the on-call engineer. {i}', "
                f"params: SamplingParams(n=1, temperature=0.7, top_p=0.95, max_tokens={rng.randint(16, 2048)}), "
                f"lora_request: None."
            )
    return out


def generate(path: Path, size_mb: int) -> None:
    rng = random.Random(7)
    block = "\n".join(serving_lines(rng)).encode() + b"\n"
    startups = [p.read_bytes() for p in sorted(CORPUS.glob("*.log"))]
    target = size_mb << 20
    written = 0
    with path.open("wb") as f:
        while written < target:
            for _ in range(200):
                f.write(block)
                written += len(block)
            start = startups[rng.randrange(len(startups))]
            f.write(start)
            written += len(start)
        f.write(startups[0])


def timed(cmd: list[str]) -> tuple[float, bytes]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, check=False)
    return time.perf_counter() - start, proc.stdout


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--keep", type=Path)
    args = parser.parse_args()
    path = args.keep or Path(tempfile.mkdtemp()) / "serving.log"
    if not path.exists():
        generate(path, args.size_mb)
    size = path.stat().st_size
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=False)  # warm the page cache
    grep_s, grep_out = timed(["grep", "-c", "-E", "|".join(ANCHORS), str(path)])
    kv_cmd = [sys.executable, "-m", "kvdoctor", "events", str(path)]
    kv_s, kv_out = timed(kv_cmd)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(f"file: {path} ({size / 2**20:.0f} MiB)")
    print(
        f"grep -c -E (anchors): {grep_s:6.2f} s  {size / 2**20 / grep_s:7.1f} MiB/s  ({grep_out.decode().strip()} matching lines)"  # noqa: E501
    )
    events = kv_out.count(b"\n")
    print(f"kvdoctor events:      {kv_s:6.2f} s  {size / 2**20 / kv_s:7.1f} MiB/s  ({events} events)")
    print(f"ratio kvdoctor/grep throughput: {grep_s / kv_s:.2f} (target >= 0.33)")
    print(f"peak RSS of children: {before / 1024:.0f} MiB")
    if not args.keep:
        os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
