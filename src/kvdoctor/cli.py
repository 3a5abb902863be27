"""The `kvdoctor` command line: one module per subcommand, registered below.

Each command module under ``kvdoctor.commands`` exposes
``add_arguments(parser) -> None`` and ``run(args) -> int``. Modules are imported
only when their command runs, so ``kvdoctor facts`` does not pay for the server.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from kvdoctor._version import __version__
from kvdoctor.exitcodes import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

# name -> (module, one-line help). A literal you can grep.
COMMANDS: dict[str, tuple[str, str]] = {
    "diagnose": ("kvdoctor.commands.diagnose", "diagnose a vLLM start-up log"),
    "events": ("kvdoctor.commands.events", "print the typed events found in a log (JSON lines)"),
    "facts": ("kvdoctor.commands.facts", "print the facts of each start-up attempt"),
    "rules": ("kvdoctor.commands.rules", "list, lint and test diagnosis rules"),
    "plan": ("kvdoctor.commands.plan", "do the memory arithmetic before a launch"),
    "probe": ("kvdoctor.commands.probe", "snapshot GPU memory and the processes holding it"),
    "preflight": ("kvdoctor.commands.preflight", "check the GPUs are free enough to launch"),
    "watch": ("kvdoctor.commands.watch", "pass a live log through and diagnose it as it arrives"),
    "run": ("kvdoctor.commands.run", "launch vllm serve, tee its log and diagnose it live"),
    "ticket": ("kvdoctor.commands.ticket", "diagnose logs inside markdown incident tickets"),
    "scan": ("kvdoctor.commands.scan", "diagnose every log in folders, globs or buckets, and summarise the fleet"),
    "serve": ("kvdoctor.commands.serve", "HTTP API and Slack bot backend"),
}


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter with the terminal width read as `shutil.get_terminal_size` reads it
    ($COLUMNS, else the terminal, else 80): argparse builds one on every `add_argument`, and its
    own default imports `shutil` (with bz2 and lzma), ~2 ms of every cold start."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None):
        if width is None:
            try:
                columns = int(os.environ["COLUMNS"])
            except (KeyError, ValueError):
                columns = 0
            if columns <= 0:
                try:
                    columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
                except (AttributeError, ValueError, OSError):
                    columns = 80
            width = (columns or 80) - 2
        super().__init__(prog, indent_increment, max_help_position, width)


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line, like every other kvdoctor error: what is wrong, where to look."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        where = self.prog if self.prog != "kvdoctor" else (_COMMAND or "kvdoctor")
        where = where.removeprefix("kvdoctor ").strip() or "kvdoctor"
        hint = "kvdoctor --help" if where == "kvdoctor" else f"kvdoctor {where} --help"
        head = "kvdoctor" if where == "kvdoctor" else f"kvdoctor: {where}"
        self.exit(EXIT_USAGE, f"{head}: {message}; see `{hint}`\n")


_COMMAND: str | None = None
_COMMAND_PARSERS: dict[str, argparse.ArgumentParser] = {}
MANY_PATHS = ("scan", "diagnose")  # commands whose options may come between their paths
# commands that are done once their output is written: nothing of theirs runs at interpreter exit
# (no atexit hook, no open file, no child), so the script skips the teardown (~10% of a cold run)
ONE_SHOT = ("diagnose", "events", "facts", "ticket", "plan")


def _parser_for(name: str | None) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kvdoctor",
        description="Diagnose vLLM start-up memory failures from their logs.",
    )
    parser.add_argument("--version", action="version", version=f"kvdoctor {__version__}")
    # an explicit prog keeps argparse from building a help formatter (and importing shutil) up front
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", prog="kvdoctor")
    # a named command gets its own parser only (twelve cost a cold start ~10 ms); help, a typo or
    # no command get all of them, so the listing and argparse's "invalid choice" stay whole
    for cmd, (module, help_text) in COMMANDS.items():
        if name is not None and cmd != name:
            continue
        cmd_parser = sub.add_parser(cmd, help=help_text, description=help_text)
        if cmd == name:
            importlib.import_module(module).add_arguments(cmd_parser)
            _COMMAND_PARSERS[cmd] = cmd_parser
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    name = next((a for a in args_list if not a.startswith("-")), None)
    global _COMMAND
    _COMMAND = name if name in COMMANDS else None
    parser = _parser_for(_COMMAND)
    if _COMMAND in MANY_PATHS and args_list[:1] == [_COMMAND]:
        # paths and options in any order (`scan logs/ --jobs 2 more/`): the command's own parser,
        # intermixed (the top level's subcommands, and `run`'s `-- COMMAND` remainder, cannot be)
        args = _COMMAND_PARSERS[_COMMAND].parse_intermixed_args(args_list[1:])
        args.command = _COMMAND
    else:
        args = parser.parse_args(args_list)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    module = importlib.import_module(COMMANDS[args.command][0])
    try:
        return int(module.run(args))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return 0
    except Exception as exc:  # the one crash handler: a bug, not a user error
        import traceback

        traceback.print_exc(file=sys.stderr)
        print(
            f"kvdoctor: internal error ({type(exc).__name__}: {exc}); please report it with the input that caused it",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def entry() -> None:
    """The `kvdoctor` script and `python -m kvdoctor`: `main`, then the exit. After a one-shot
    command the output is flushed and the process ends without tearing the interpreter down
    (freeing every module and object costs a cold `diagnose` ~8 ms); any other command, and any
    caller of `main` in-process, exits the ordinary way."""
    code = main()
    if _COMMAND not in ONE_SHOT:
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):
            pass  # a reader that went away (`| head`) or a closed stream: nothing left to lose
    os._exit(code)
