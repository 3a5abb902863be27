"""Speed of `kvdoctor scan` (issue 12), each figure beside its baseline in the same run:

- ~6,000 small real logs (copies of tests/fixtures/corpus/*.log and validation/*/*.log):
  `--jobs 1` against `--jobs 2` (goal: at least 1.6x on 2 cores, and at least 300 files/s);
- big serving logs (benchmarks/throughput.py's generator): MB/s of one scan worker against
  `kvdoctor events` on one file (goal: at least 80%), and per worker with `--jobs 2` on two files;
- what `--engine ray` adds per file on this machine (its start-up apart), and its start-up;
- the peak RSS of a one-process scan of 10x fewer files, to show it does not grow with the events.

    python benchmarks/scan_bench.py [--files 6000] [--big-mb 200] [--runs 2] [--only small|big|ray]…

Every command is a fresh `python -m kvdoctor` process writing `--format jsonl` to /dev/null; the
best of `--runs` runs is reported; the page cache is warmed first. Nothing here is a test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
sys.path.insert(0, str(ROOT / "benchmarks"))
from throughput import generate  # noqa: E402  (the serving-log generator of issue 2)


def build_fleet(folder: Path, count: int) -> int:
    """`count` logs, copies of the real fixtures, 500 to a sub-folder (as pods' logs sit); bytes."""
    sources = sorted(FIXTURES.glob("corpus/*.log")) + sorted(FIXTURES.glob("validation/*/*.log"))
    total = 0
    for i in range(count):
        source = sources[i % len(sources)]
        target = folder / f"pod-{i // 500:03}" / f"{i:05}-{source.name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        total += source.stat().st_size
    return total


def timed(argv: list[str], runs: int) -> tuple[float, int]:
    """Best wall time of `runs` runs, and the peak RSS (KiB) of the kvdoctor process itself."""
    best, rss = float("inf"), 0
    env = {**os.environ, "RAY_ADDRESS": ""}
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "kvdoctor", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
        )
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        best = min(best, time.perf_counter() - start)
        rss = max(rss, usage.ru_maxrss)
        if proc.returncode not in (0, 1, 2):
            raise SystemExit(f"kvdoctor {' '.join(argv)} exited {proc.returncode}")
    return best, rss


def warm(folder: Path) -> None:
    subprocess.run(["cat", *map(str, folder.rglob("*.log"))], stdout=subprocess.DEVNULL, check=False)


def small_files(work: Path, count: int, runs: int) -> None:
    fleet = work / "fleet"
    size = build_fleet(fleet, count)
    warm(fleet)
    base = ["scan", "--format", "jsonl", str(fleet)]
    one, rss = timed([*base, "--jobs", "1"], runs)
    two, _ = timed([*base, "--jobs", "2"], runs)
    print(f"{count} small logs ({size / count / 1024:.1f} KiB on average, {size / 2**20:.0f} MiB in all)")
    print(f"  scan --jobs 1: {one:6.2f} s  {count / one:7.0f} files/s")
    print(f"  scan --jobs 2: {two:6.2f} s  {count / two:7.0f} files/s   speed-up {one / two:.2f}x (goal >= 1.6x)")
    small = work / "fleet-small"
    build_fleet(small, count // 10)
    _, rss_small = timed(["scan", "--format", "jsonl", "--jobs", "1", str(small)], 1)
    print(
        f"  peak RSS of a --jobs 1 scan (one process reads every file): {rss_small / 1024:.0f} MiB for "
        f"{count // 10} files, {rss / 1024:.0f} MiB for {count}"
    )


def big_files(work: Path, size_mb: int, runs: int) -> None:
    """MiB/s net of each command's own start-up (timed on a one-line log), so that the figures
    compare reading, not importing."""
    first, second, tiny = work / "serving-1.log", work / "serving-2.log", work / "tiny.log"
    generate(first, size_mb)
    shutil.copyfile(first, second)
    tiny.write_bytes((FIXTURES / "corpus" / "003-v1-qwen25vl-7b-24gb-dynamo-maxlen-128000.log").read_bytes())
    warm(work)
    mib = first.stat().st_size / 2**20
    scan = ["scan", "--format", "jsonl", "--jobs"]
    rows = {
        "kvdoctor events, one file": (["events", str(first)], ["events", str(tiny)]),
        "scan --jobs 1, one file": ([*scan, "1", str(first)], [*scan, "1", str(tiny)]),
        "scan --jobs 2, two files": ([*scan, "2", str(first), str(second)], [*scan, "2", str(tiny), str(tiny)]),
    }
    print(f"big serving logs ({mib:.0f} MiB each), MiB/s per worker net of start-up")
    events_rate = 0.0
    for label, (argv, baseline) in rows.items():
        wall, _ = timed(argv, runs)
        start, _ = timed(baseline, runs)
        rate = mib / max(wall - start, 1e-9)  # two files on two workers: each read one in that time
        events_rate = events_rate or rate
        print(
            f"  {label:27} {wall:6.2f} s (start-up {start:.2f} s)  {rate:7.1f} MiB/s  "
            f"{rate / events_rate:.0%} of events (goal >= 80%)"
        )


def ray_overhead(work: Path, count: int, runs: int) -> None:
    try:
        import ray  # noqa: F401
    except ImportError:
        print("ray: not installed (pip install 'kvdoctor[ray]'); skipped")
        return
    fleet, one = work / "fleet", work / "fleet-one"
    build_fleet(one, 1)
    base = ["scan", "--format", "jsonl", "--jobs", "2"]
    local, _ = timed([*base, str(fleet)], runs)
    start_local, _ = timed([*base, str(one)], runs)
    on_ray, _ = timed([*base, "--engine", "ray", str(fleet)], runs)
    start_ray, _ = timed([*base, "--engine", "ray", str(one)], runs)
    per_local = (local - start_local) / count * 1000
    per_ray = (on_ray - start_ray) / count * 1000
    print(f"--engine ray on this machine (a local Ray with 2 CPUs), {count} small logs")
    print(f"  local: {local:6.2f} s  ({start_local:.2f} s for one file)  {per_local:.3f} ms/file")
    print(f"  ray:   {on_ray:6.2f} s  ({start_ray:.2f} s for one file)  {per_ray:.3f} ms/file")
    print(f"  Ray adds {per_ray - per_local:+.3f} ms per file and {start_ray - start_local:.1f} s of start-up")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=6000)
    parser.add_argument("--big-mb", type=int, default=200)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--only", choices=("small", "big", "ray"), action="append", help="run only these parts")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="kvdoctor-scan-bench-") as tmp:
        work = Path(tmp)
        os.environ["KVDOCTOR_CACHE_DIR"] = str(work / "cache")  # the user's rule cache stays untouched
        timed(["scan", str(FIXTURES / "corpus")], 1)  # compiles the rules into it, as a user's first run does
        parts = args.only or ["small", "big", "ray"]
        if "small" in parts:
            small_files(work, args.files, args.runs)
        if "big" in parts:
            big_files(work, args.big_mb, args.runs)
        if "ray" in parts:
            if not (work / "fleet").exists():
                build_fleet(work / "fleet", args.files)
            ray_overhead(work, args.files, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
