"""`kvdoctor events [FILE|-]`: one JSON object per event, as they are found (streaming)."""

from __future__ import annotations

import argparse
import json
import sys

from kvdoctor.commands._common import InputError, add_input, error, raw_lines
from kvdoctor.exitcodes import EXIT_OK, EXIT_USAGE
from kvdoctor.reader.lines import normalise
from kvdoctor.reader.pipeline import iter_events, smi_reader


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_input(parser)
    parser.add_argument("--kind", action="append", help="only these event kinds (repeatable)")


def run(args: argparse.Namespace) -> int:
    kinds = set(args.kind or [])
    from kvdoctor.reader.extractors import EXTRACTORS

    known = {e.kind for e in EXTRACTORS} | {"serving", "nvidia_smi"}
    unknown = sorted(kinds - known)
    if unknown:
        error(f"events: unknown --kind {', '.join(unknown)}; known kinds: {', '.join(sorted(known))}")
        return EXIT_USAGE
    out = sys.stdout
    try:
        for event in iter_events(normalise(raw_lines(args.files)), smi_reader()):
            if kinds and event.kind not in kinds:
                continue
            out.write(json.dumps(event.as_record(), ensure_ascii=False) + "\n")
            out.flush()  # events come out while the input still flows (a pipe is block-buffered)
    except InputError as exc:
        error(str(exc))
        return EXIT_USAGE
    return EXIT_OK
