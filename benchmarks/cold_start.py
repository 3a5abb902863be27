"""Cold start of `kvdoctor facts` on a small log against `python3 -c pass` (issue 2: at most 6x).

    python benchmarks/cold_start.py [--runs 15]

Both are started as fresh processes; the median wall time of each is compared. Bytecode is
compiled first (as `pip install` does), whatever PYTHONDONTWRITEBYTECODE says, so a source edit
does not count as start-up time.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

LOG = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "corpus" / "051-v1-011-qwen3-14b-lmcache-healthy.log"


def median_wall(cmd: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    import compileall

    compileall.compile_dir(str(Path(__file__).resolve().parents[1] / "src" / "kvdoctor"), quiet=1)
    median_wall([sys.executable, "-c", "pass"], 3)  # warm the page cache
    base = median_wall([sys.executable, "-c", "pass"], args.runs)
    facts = median_wall([sys.executable, "-m", "kvdoctor", "facts", str(LOG)], args.runs)
    diag = median_wall([sys.executable, "-m", "kvdoctor", "diagnose", str(LOG)], args.runs)
    print(f"python3 -c pass:          {base * 1000:7.1f} ms")
    print(f"kvdoctor facts (small):   {facts * 1000:7.1f} ms  ratio {facts / base:.1f}x (target <= 6x)")
    print(f"kvdoctor diagnose (small):{diag * 1000:7.1f} ms  ratio {diag / base:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
