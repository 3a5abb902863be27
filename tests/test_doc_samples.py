"""The command samples in README.md and docs/ run as shown (issue 17): each `$ kvdoctor …` line in
a console block that needs no GPU, server or child process is run from the repository root, and
every output line the sample shows (up to `...`, and `…` as a wildcard at a line's end) must
appear, in order, in what it prints; `$ echo $?` after it gives the exit code."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NEEDS_HOST = ("probe", "preflight", "serve", "run", "watch")  # a GPU, a port or a child process


def _samples() -> list[tuple[str, str, list[str], int | None]]:
    found = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in re.findall(r"```(?:console|text)\n(.*?)```", doc.read_text(encoding="utf-8"), re.S):
            lines = block.splitlines()
            for i, line in enumerate(lines):
                if not line.startswith("$ kvdoctor "):
                    continue
                argv = shlex.split(line[2:].split("  #")[0])
                if argv[1] in NEEDS_HOST:
                    continue
                shown: list[str] = []
                code = None
                for after in lines[i + 1 :]:
                    if after.startswith("$ echo $?"):
                        continue
                    if after.startswith("$ "):
                        break
                    if re.fullmatch(r"\d+", after.strip()) and lines[lines.index(after) - 1].startswith("$ echo $?"):
                        code = int(after)
                        break
                    shown.append(after)
                found.append((f"{doc.name}: {line[2:]}", line, shown, code))
    return found


SAMPLES = _samples()


def test_the_docs_have_samples_to_run() -> None:
    assert len(SAMPLES) >= 2


@pytest.mark.parametrize(("where", "line", "shown", "code"), SAMPLES, ids=[s[0] for s in SAMPLES])
def test_a_documented_sample_runs_as_shown(where: str, line: str, shown: list[str], code: int | None) -> None:
    argv = shlex.split(line[2:].split("  #")[0])
    proc = subprocess.run(
        [sys.executable, "-m", "kvdoctor", *argv[1:]], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert proc.returncode in (0, 1), f"{where}: exit {proc.returncode}: {proc.stderr}"
    if code is not None:
        assert proc.returncode == code, where
    out = proc.stdout.splitlines()
    at = 0
    for expected in shown:
        if expected.strip() in ("...", "…"):
            continue
        prefix = expected.rstrip("…").rstrip() if expected.endswith("…") else expected
        hit = next((k for k in range(at, len(out)) if out[k].startswith(prefix)), None)
        assert hit is not None, f"{where}: {expected!r} not in the output:\n{proc.stdout}"
        at = hit + 1
