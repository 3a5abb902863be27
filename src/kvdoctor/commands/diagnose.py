"""`kvdoctor diagnose [FILE…|-]`: what failed, why, what to turn which way, and what not to."""

from __future__ import annotations

import argparse
import json
import sys

from kvdoctor.api import diagnose_file, input_problem
from kvdoctor.commands._common import (
    InputError,
    add_input,
    add_lang_argument,
    add_rules_argument,
    error,
    pick_lang,
    rules_or_error,
    text_width,
    use_color,
)
from kvdoctor.exitcodes import EXIT_USAGE
from kvdoctor.render import FORMATS, render

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_input(parser, many=True)
    parser.add_argument("--format", choices=FORMATS, default="text")
    add_rules_argument(parser)
    parser.add_argument("--fail-on", choices=("error", "warning", "never"), default="error")
    add_lang_argument(parser)
    parser.add_argument(
        "--ascii",
        action="store_true",
        help="draw the budget bar in ASCII (the default in zh, where terminals draw block glyphs double-wide)",
    )
    parser.add_argument("--probe", action="store_true", help="read the live GPU (NVML) and use it")
    parser.add_argument(
        "--probe-file",
        metavar="F",
        help="a saved `kvdoctor probe --format json` or nvidia-smi output",
    )


def _probe(args: argparse.Namespace) -> Any:
    if args.probe_file:
        from kvdoctor.probe import load_snapshot_file

        return load_snapshot_file(args.probe_file)
    if args.probe:
        import os

        from kvdoctor.probe import live_probe

        return live_probe(os.environ.get("CUDA_VISIBLE_DEVICES"))
    return None


def run(args: argparse.Namespace) -> int:
    lang = pick_lang(args.lang)
    rules = rules_or_error(args.rules)
    if rules is None:
        return EXIT_USAGE
    try:
        probe = _probe(args)
    except Exception as exc:  # ProbeError: a one-line message that names the file
        error(str(exc))
        return EXIT_USAGE
    worst = 0
    color = use_color() and args.format == "text"
    several = len(args.files) > 1
    for path in args.files:
        try:
            report = diagnose_file(path, rules=rules, probe=probe, lang=lang)
        except InputError as exc:
            error(str(exc))  # this file is reported and skipped; the others are still diagnosed
            worst = max(worst, EXIT_USAGE)
            continue
        if several and args.format == "json":
            # one report per line (JSON lines), so a consumer can split them
            sys.stdout.write(json.dumps(report.as_records(), ensure_ascii=False) + "\n")
        else:
            if several and args.format == "text":
                sys.stdout.write(f"== {path}\n")
            bar = True if args.ascii else None
            sys.stdout.write(render(report, args.format, lang=lang, color=color, width=text_width(), ascii_bar=bar))
        problem = input_problem(report, path)
        if problem is not None:
            error(problem)
            worst = max(worst, EXIT_USAGE)
            continue
        worst = max(worst, report.exit_code(args.fail_on))
    return worst
