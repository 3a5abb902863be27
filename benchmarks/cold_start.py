"""Cold start of what users run, each beside `python -c pass` in the same run (issue 11):

- `kvdoctor facts --format json LOG` (goal: at most 4x bare Python),
- `kvdoctor diagnose --format json LOG` (at most 5x) and `kvdoctor diagnose LOG` as text, not a
  TTY (at most 6x), on real logs that name a model (and a card),
- the pre-commit hook's one process over 20 incident tickets (`kvdoctor ticket --check …`).

    python benchmarks/cold_start.py [--runs 15] [--python PYTHON]

`--python` measures another interpreter, e.g. a venv with the wheel installed (the catalog is
then read as JSON): `python -m venv /tmp/w && /tmp/w/bin/pip install . && python
benchmarks/cold_start.py --python /tmp/w/bin/python`. Each command runs as a fresh process; the
median wall time is reported. The first run of each command fills the compiled-rules cache (a
temporary one, so the user's is untouched) and is not counted, as a user's first run is once.
Bytecode is compiled first, as `pip install` does.
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
LOGS = {
    # a 70B model named in a wrapper's dict, its weights printed (catalog + arithmetic)
    "model named": FIXTURES / "validation" / "round4-a" / "413-v0-063-lm-eval-llama31-70b-tp2-util08-gpu-blocks-0.log",
    # a model and an H100 NVL named, an OOM in the weights
    "model + GPU named": FIXTURES / "corpus" / "039-v1-h100nvl-weights-create-oom-wrong-gpu.log",
}
GOALS = {"facts --format json": 4.0, "diagnose --format json": 5.0, "diagnose (text)": 6.0}


def _wall(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=env)
    return time.perf_counter() - start


def interleaved(cmds: dict[str, list[str]], runs: int, env: dict[str, str]) -> dict[str, float]:
    """Median wall time of each command, run round-robin (one of each per round), so that a busy
    neighbour slows bare Python and kvdoctor alike instead of whichever ran at that moment."""
    for cmd in cmds.values():
        _wall(cmd, env)  # warm-up: fills the compiled-rules cache and the page cache
    times: dict[str, list[float]] = {name: [] for name in cmds}
    for _ in range(runs):
        for name, cmd in cmds.items():
            times[name].append(_wall(cmd, env))
    return {name: statistics.median(t) for name, t in times.items()}


def tickets(folder: Path, n: int = 20) -> list[str]:
    sources = sorted((FIXTURES / "tickets").glob("*.md"))
    out = []
    for i in range(n):
        target = folder / f"INC-{i:04d}.md"
        shutil.copyfile(sources[i % len(sources)], target)
        out.append(str(target))
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    compileall.compile_dir(str(ROOT / "src" / "kvdoctor"), quiet=1)
    py = args.python
    # what users type: the `kvdoctor` script pip put beside that Python (`python -m` adds runpy)
    script = Path(py).parent / "kvdoctor"
    kvdoctor = [str(script)] if script.is_file() else [py, "-m", "kvdoctor"]
    print(f"command: {' '.join(kvdoctor)}")
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "KVDOCTOR_CACHE_DIR": str(Path(tmp) / "cache")}
        cmds: dict[str, list[str]] = {"python -c pass": [py, "-c", "pass"]}
        for name, log in LOGS.items():
            for label, cmd in (
                ("facts --format json", ["facts", "--format", "json"]),
                ("diagnose --format json", ["diagnose", "--format", "json"]),
                ("diagnose (text)", ["diagnose"]),
            ):
                cmds[f"{label}\t{name}"] = [*kvdoctor, *cmd, str(log)]
        cmds["ticket --check\t20 tickets"] = [*kvdoctor, "ticket", "--check", *tickets(Path(tmp))]
        medians = interleaved(cmds, args.runs, env)
        base = medians.pop("python -c pass")
        print(f"python -c pass: {base * 1000:7.1f} ms")
        for key, t in medians.items():
            label, name = key.split("\t")
            goal = f"  (goal <= {GOALS[label]:g}x)" if label in GOALS else ""
            print(f"{label:<24} {name:<18} {t * 1000:7.1f} ms  {t / base:5.1f}x{goal}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
