"""How often an answer changes when a log is carried another way (issue 10): every labelled log
(the dev corpus and every validation round) is re-carried through a container, a log shipper, a
paste or a terminal, and its verdict and first remedy are compared with the plain log's.

    python benchmarks/paste_forms.py [FORM …]

Prints, per form, how many logs answered differently, and with `-v` which ones. Lines a
collector added for context (`# reporter: …`) are dropped first: they are not the log's.
`tests/test_paste_forms.py` holds the dev corpus to no difference at all, with these same forms.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

from kvdoctor.api import diagnose

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"

_LEVEL = re.compile(r"^(\(?[^()]*pid=\d+[^)]*\) |)((?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d)")

FORMS: dict[str, Callable[[list[str]], list[str]]] = {
    "compose": lambda ls: [f"vllm-1  | {line}" for line in ls],
    "cri": lambda ls: [f"2025-06-01T10:00:00.123456789Z stderr F {line}" for line in ls],
    "json": lambda ls: [json.dumps({"log": line + "\n", "stream": "stderr"}) for line in ls],
    "journald": lambda ls: [f"Jun 01 10:00:00 host vllm[1234]: {line}" for line in ls],
    "stamp": lambda ls: [f"2025-06-01 10:00:00,123 {line}" for line in ls],
    "ray": lambda ls: [f"(RayWorkerWrapper pid=4242, ip=10.0.0.2) {line}" for line in ls],
    "quote": lambda ls: [f"> {line}" for line in ls],
    "fence": lambda ls: ["```", *ls, "```"],
    "indent": lambda ls: [f"    {line}" for line in ls],
    "double-spaced": lambda ls: [piece for line in ls for piece in (line, "")],
    "colours": lambda ls: [f"\x1b[32m{line}\x1b[0m" for line in ls],
    "crlf": lambda ls: [f"{line}\r" for line in ls],
    "html": lambda ls: [html.escape(line) for line in ls],
    "80-columns": lambda ls: [line[i : i + 80] for line in ls for i in range(0, max(len(line), 1), 80)],
    # VLLM_LOGGING_PREFIX: a literal before the level of every line vLLM's logger writes
    "logging-prefix": lambda ls: [_LEVEL.sub(r"\1[svc-a] \2", line, count=1) for line in ls],
}


def answer(text: str) -> tuple[str, str | None]:
    report = diagnose(text)
    top = report.diagnoses[0] if report.diagnoses else None
    return report.verdict, top.remedies[0].action if top and top.remedies else None


def _logs() -> list[Path]:
    labels = [FIXTURES / "corpus" / "labels.yaml", *sorted((FIXTURES / "validation").glob("*/labels.yaml"))]
    out = []
    for path in labels:
        for entry in yaml.safe_load(path.read_text(encoding="utf-8")) or []:
            out.append(path.parent / entry["file"])
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("forms", nargs="*", default=[], metavar="FORM", help=f"any of {', '.join(FORMS)}")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    forms = args.forms or list(FORMS)
    unknown = [f for f in forms if f not in FORMS]
    if unknown:
        parser.error(f"unknown form {unknown[0]!r}; choose from {', '.join(FORMS)}")
    logs = _logs()
    differ: dict[str, list[str]] = {form: [] for form in forms}
    for log in logs:
        lines = [
            line
            for line in log.read_text(encoding="utf-8", errors="replace").split("\n")
            if not line.startswith("# reporter")
        ]
        plain = answer("\n".join(lines))
        for form in forms:
            got = answer("\n".join(FORMS[form](lines)))
            if got != plain:
                differ[form].append(f"{log.name[:60]}: {plain} -> {got}")
    print(f"{len(logs)} labelled logs")
    for form in forms:
        print(f"{form:<14} {len(differ[form]):4d} answered differently")
        if args.verbose:
            for item in differ[form]:
                print(f"    {item}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
