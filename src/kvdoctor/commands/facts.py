"""`kvdoctor facts [FILE|-] --format json|text`: the facts of each start-up attempt."""

from __future__ import annotations

import argparse
import json
import sys

from kvdoctor.commands._common import InputError, add_input, error, raw_lines
from kvdoctor.exitcodes import EXIT_OK, EXIT_USAGE
from kvdoctor.reader.pipeline import Analysis, analyse_lines

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_input(parser)
    parser.add_argument("--format", choices=("json", "text"), default="text")


def as_records(analysis: Analysis) -> dict[str, Any]:
    attempts = [
        {
            "index": a.index,
            "start_line": a.start_line,
            "end_line": a.end_line,
            "facts": {name: fact.value for name, fact in sorted(a.facts.items())},
            "sources": {name: fact.as_record() for name, fact in sorted(a.facts.items())},
            "ranks": list(a.ranks),
        }
        for a in analysis.attempts
    ]
    return {
        "schema_version": 1,
        "source": analysis.source,
        "facts": attempts[-1]["facts"] if attempts else {},
        "attempts": attempts,
        "notes": list(analysis.notes),
    }


def _text(records: dict[str, Any]) -> str:
    lines = []
    for attempt in records["attempts"]:
        lines.append(f"attempt {attempt['index']} (lines {attempt['start_line']}–{attempt['end_line']})")
        width = max((len(n) for n in attempt["facts"]), default=10)
        for name, value in attempt["facts"].items():
            source = attempt["sources"][name]
            where = f"line {source['line']}" if "line" in source else source["source"]
            lines.append(f"  {name:<{width}}  {json.dumps(value, ensure_ascii=False):<24}  {where}")
    lines += [f"note: {n}" for n in records["notes"]]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    try:
        analysis = analyse_lines(args.files, raw_lines(args.files))
    except InputError as exc:
        error(str(exc))
        return EXIT_USAGE
    records = as_records(analysis)
    if args.format == "json":
        sys.stdout.write(json.dumps(records, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(_text(records))
    return EXIT_OK
