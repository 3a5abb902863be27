"""Helpers shared by command modules: input paths, language, colour."""

from __future__ import annotations

import argparse
import os
import sys

from kvdoctor.reader.lines import InputError, iter_sparse_lines, open_source

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from kvdoctor.diagnosis.rules import Rule


def cache_dir() -> str | None:
    """Where compiled rules are kept between runs: $KVDOCTOR_CACHE_DIR (empty: no cache), else the
    user's cache directory (platformdirs: ~/.cache/kvdoctor on Linux). A plain path string: the
    cached run needs no pathlib."""
    configured = os.environ.get("KVDOCTOR_CACHE_DIR")
    if configured is not None:
        return configured or None
    if sys.platform.startswith("linux"):
        # platformdirs' answer on Linux (the XDG rule), without its import on every run
        base = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.expanduser("~/.cache")
        return os.path.join(base, "kvdoctor")
    from platformdirs import user_cache_dir

    return str(user_cache_dir("kvdoctor", appauthor=False))


def add_input(parser: argparse.ArgumentParser, *, many: bool = False) -> None:
    parser.add_argument(
        "files",
        nargs="*" if many else "?",
        default=["-"] if many else "-",
        metavar="FILE",
        help="log file(s); '-' or nothing reads stdin; .gz is read as gzip",
    )


def raw_lines(path: str):  # type: ignore[no-untyped-def]
    """Open a path for line reading or raise InputError (one line, with the path)."""
    return iter_sparse_lines(open_source(path))


def add_rules_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rules",
        action="append",
        default=[],
        metavar="DIR",
        help="extra rule directory (adds to or overrides built-in rules by id)",
    )


def add_lang_argument(parser: argparse.ArgumentParser, default_help: str = "from the locale") -> None:
    parser.add_argument(
        "--lang", choices=("en", "zh"), default=None, help=f"language of the explanation (default: {default_help})"
    )


def rules_or_error(dirs: Sequence[str]) -> list[Rule] | None:
    """The built-in rules plus `--rules DIR`s, through the user's cache; None after printing every
    problem in them (`file:line:col`) and a one-line error, for the command to exit 2."""
    from kvdoctor.diagnosis.rules import RuleLoadError, rules_for  # not on `facts`' path

    try:
        return rules_for(dirs, cache_dir=cache_dir())
    except RuleLoadError as exc:
        print(str(exc), file=sys.stderr)
        error(f"{len(exc.errors)} problem(s) in rule files; fix them or drop --rules")
        return None


def error(message: str) -> None:
    print(f"kvdoctor: {message}", file=sys.stderr)


def pick_lang(requested: str | None) -> str:
    if requested:
        return requested
    for var in ("KVDOCTOR_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(var)
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    import locale  # only when no variable says which language

    try:
        loc = locale.getlocale()[0] or ""
    except ValueError:
        loc = ""
    return "zh" if loc.lower().startswith("zh") else "en"


def text_width(stream: object = None) -> int | None:
    """A terminal's width to wrap text at; None (one line per paragraph) when not a terminal."""
    stream = stream or sys.stdout
    if not getattr(stream, "isatty", lambda: False)():
        return None
    import shutil

    return max(40, shutil.get_terminal_size((100, 24)).columns)


def use_color(stream: object = None) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    stream = stream or sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)())


__all__ = [
    "InputError",
    "add_input",
    "add_lang_argument",
    "add_rules_argument",
    "error",
    "pick_lang",
    "raw_lines",
    "text_width",
    "use_color",
]
