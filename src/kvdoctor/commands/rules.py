"""`kvdoctor rules list|lint|test [DIR]`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kvdoctor.diagnosis.rules import Rule, RuleLoadError, builtin_rules_dir, load_rules
from kvdoctor.exitcodes import EXIT_FINDING, EXIT_OK, EXIT_USAGE


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("list", "lint", "test"))
    parser.add_argument("dirs", nargs="*", metavar="DIR", help="rule directories (default: the built-in rules)")


def _load(dirs: list[str], *, lint: bool = False) -> list[Rule] | None:
    paths = [Path(d) for d in dirs] or [builtin_rules_dir()]
    try:
        return load_rules(paths, lint=lint)  # lint: also that each text's languages agree
    except RuleLoadError as exc:
        print(str(exc), file=sys.stderr)
        print(f"kvdoctor: {len(exc.errors)} problem(s) in rule files", file=sys.stderr)
        return None


def _list(rules: list[Rule]) -> int:
    for rule in rules:
        tag = rule.cause or rule.phase or ""
        print(f"{rule.priority:>4}  {rule.id:<42} {rule.klass:<36} {tag}")
    return EXIT_OK


def _test(rules: list[Rule]) -> int:
    from kvdoctor.api import log_probe_facts
    from kvdoctor.diagnosis.ruletest import run_examples

    failures = 0
    for rule in rules:
        results = run_examples(rule, rules, log_probe_facts)
        bad = [r for r in results if not r.ok]
        failures += len(bad)
        status = "ok" if not bad else "FAIL"
        print(f"{status:<5} {rule.id} ({len(results) - len(bad)}/{len(results)} examples)")
        for r in bad:
            print(f"      {r.describe()}")
    return EXIT_FINDING if failures else EXIT_OK


def run(args: argparse.Namespace) -> int:
    rules = _load(args.dirs, lint=args.action == "lint")
    if rules is None:
        return EXIT_USAGE
    if args.action == "list":
        return _list(rules)
    if args.action == "lint":
        print(f"{len(rules)} rules OK")
        return EXIT_OK
    return _test(rules)
