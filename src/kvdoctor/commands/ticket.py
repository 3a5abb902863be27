"""`kvdoctor ticket [--check] FILE…`: diagnose the vLLM logs pasted in markdown incident tickets.

Pre-commit fixer conventions: rewrite the managed section and exit 1 when a file changed, 0
when nothing did; `--check` writes nothing and exits 1 when it would change a file or when a
ticket's stated remedy contradicts the diagnosis. Unreadable input: one line, exit 2.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kvdoctor.commands._common import add_lang_argument, add_rules_argument, error, rules_or_error
from kvdoctor.diagnosis.rules import Rule
from kvdoctor.exitcodes import EXIT_FINDING, EXIT_OK, EXIT_USAGE
from kvdoctor.ticket.sections import TicketError, TicketResult, check_ticket


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="markdown ticket(s)")
    parser.add_argument(
        "--check",
        action="store_true",
        help="change nothing; exit 1 if a file would change or contradicts itself",
    )
    add_lang_argument(parser, "front matter `lang:`, else en")
    add_rules_argument(parser)


def run(args: argparse.Namespace) -> int:
    rules = rules_or_error(args.rules)
    if rules is None:
        return EXIT_USAGE
    return max(_one(path, rules, args) for path in args.files)


def _one(path: str, rules: list[Rule], args: argparse.Namespace) -> int:
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        error(f"{path}: cannot read ({exc.strerror or exc}); check the path")
        return EXIT_USAGE
    # surrogateescape: bytes that are not UTF-8 survive the round trip untouched
    text = raw.decode("utf-8", "surrogateescape")
    try:
        result = check_ticket(text, rules=rules, lang=args.lang, where=path)
    except TicketError as exc:
        error(str(exc))
        return EXIT_USAGE
    _say_contradictions(path, result)
    if not result.changed:
        return EXIT_FINDING if args.check and result.contradictions else EXIT_OK
    if args.check:
        print(f"{path}: the kvdoctor section is missing or out of date; run `kvdoctor ticket {path}`")
        return EXIT_FINDING
    try:
        Path(path).write_bytes(result.text.encode("utf-8", "surrogateescape"))
    except OSError as exc:
        error(f"{path}: cannot write ({exc.strerror or exc}); check the permissions")
        return EXIT_USAGE
    verdicts = ", ".join(f"log {n}: {log.report.verdict}" for n, log in enumerate(result.logs, 1))
    print(f"{path}: wrote the kvdoctor section ({verdicts})")
    return EXIT_FINDING


def _say_contradictions(path: str, result: TicketResult) -> None:
    for c in result.contradictions:
        print(
            f"{path}: stated remedy “{c.stated.text}” ({c.stated.where}, `{c.action}`) "
            f"contradicts log {c.log} (`{c.verdict}`): {c.why}"
        )
