"""The per-file function every engine runs: a target in, a `FileRecord` out, never an exception.

A local file is diagnosed by `kvdoctor.api.diagnose`, exactly as `kvdoctor diagnose FILE` does; a
bucket object by the same reader and `report_for` over its stream. Whatever the bytes (a corrupt
gzip, random data, one line of 2 GB), a vanished file or a bug on one input, the file gets a record
with its `error` and the scan goes on."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kvdoctor.api import diagnose, input_problem, report_for
from kvdoctor.diagnosis.report import Report
from kvdoctor.diagnosis.rules import Rule
from kvdoctor.fleet.record import FileRecord, record_of, unreadable
from kvdoctor.fleet.targets import Target, open_url
from kvdoctor.reader.lines import READ_ERROR, InputError, _maybe_gunzip, iter_sparse_lines
from kvdoctor.reader.pipeline import analyse_lines


@dataclass(frozen=True, slots=True)
class Settings:
    """What every worker needs besides the rules (small: sent with each batch to Ray)."""

    lang: str = "en"
    fail_on: str = "error"


def _report(target: Target, rules: Sequence[Rule], lang: str) -> Report:
    if not target.is_url:
        return diagnose(Path(target.location), rules=rules, lang=lang, name=target.name)
    with open_url(target.location) as stream:
        # `diagnose(Path)` is open_source + this; open_source reads local paths only
        analysis = analyse_lines(target.name, iter_sparse_lines(_maybe_gunzip(stream)))
    return report_for(analysis, rules=rules, lang=lang)


def _one_line(message: str, target: Target) -> str:
    for prefix in (f"{target.location}: ", f"{target.name}: "):
        message = message.removeprefix(prefix)
    return message


def scan_file(target: Target, rules: Sequence[Rule], settings: Settings) -> FileRecord:
    if target.error is not None:
        return unreadable(target.name, target.error)
    try:
        report = _report(target, rules, settings.lang)
    except InputError as exc:
        return unreadable(target.name, _one_line(str(exc), target))
    except zlib.error as exc:  # a corrupt deflate stream: the reader catches only OSError/EOFError
        return unreadable(target.name, f"{READ_ERROR} (corrupt gzip: {exc}); copy or download the file again")
    except Exception as exc:  # a bug on one file must not stop a fleet scan; its record says so
        return unreadable(
            target.name,
            f"internal error ({type(exc).__name__}: {exc}); please report it with this file",
            internal=True,
        )
    return record_of(target.name, report, problem=input_problem(report, target.name), fail_on=settings.fail_on)


def scan_batch(batch: Sequence[Target], rules: Sequence[Rule], settings: Settings) -> list[FileRecord]:
    return [scan_file(target, rules, settings) for target in batch]
