"""The fleet summary: counts per verdict, cause/phase, vLLM release, model, card and first remedy,
with the files behind each group. Built one record at a time (`Tally.add`), so it needs only the
names, never the reports; the result is sorted, so it does not depend on the order of arrival."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kvdoctor.fleet.record import UNKNOWN, FileRecord

NONE = "none"  # the first-remedy key of a file whose verdict has no remedy (healthy, unknown)


def _cause(r: FileRecord) -> str:
    d = r.diagnosis
    if d is None:
        return r.verdict
    detail = d.cause or d.phase
    return f"{d.klass}/{detail}" if detail else d.klass


def _gpu(r: FileRecord) -> str:
    if r.gpu:
        return r.gpu
    return f"unnamed {r.gpu_total_gib:.0f} GiB card" if r.gpu_total_gib else UNKNOWN


# grouping -> (what its key is, how a record gives it). A literal you can grep; the order is the report's.
GROUPINGS: dict[str, tuple[str, Callable[[FileRecord], str]]] = {
    "by_verdict": ("verdict", lambda r: r.verdict),
    "by_cause": ("cause / phase", _cause),
    "by_vllm_version": ("vLLM version", lambda r: r.vllm_version or UNKNOWN),
    "by_model": ("model", lambda r: r.model or UNKNOWN),
    "by_gpu": ("GPU", _gpu),
    "by_first_remedy": ("first remedy", lambda r: (r.diagnosis.remedy if r.diagnosis else None) or NONE),
}


def group_keys(record: FileRecord) -> dict[str, str]:
    """The key of each grouping for one file (the HTML table filters on the same keys)."""
    return {name: key(record) for name, (_, key) in GROUPINGS.items()}


@dataclass(frozen=True, slots=True)
class Group:
    key: str
    files: tuple[str, ...]


@dataclass(frozen=True)
class Summary:
    files: int
    unreadable: int  # files with an error: not (fully) read, or no vLLM start-up in them
    exit_code: int  # the worst file's, against --fail-on
    interrupted: bool
    groupings: dict[str, tuple[Group, ...]]  # GROUPINGS' names -> groups, most files first
    errors: tuple[tuple[str, str], ...]  # (path, error), by path

    def as_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "files": self.files,
            "unreadable": self.unreadable,
            "exit_code": self.exit_code,
            "interrupted": self.interrupted,
        }
        for name, groups in self.groupings.items():
            record[name] = {g.key: {"count": len(g.files), "files": list(g.files)} for g in groups}
        record["errors"] = [{"path": p, "error": e} for p, e in self.errors]
        return record


class Tally:
    """Accumulates records into a Summary; holds only names, keys and error lines."""

    def __init__(self) -> None:
        self.count = 0
        self.worst = 0
        self._groups: dict[str, defaultdict[str, list[str]]] = {name: defaultdict(list) for name in GROUPINGS}
        self._errors: list[tuple[str, str]] = []

    def add(self, record: FileRecord) -> None:
        self.count += 1
        self.worst = max(self.worst, record.exit_code)
        for name, key in group_keys(record).items():
            self._groups[name][key].append(record.path)
        if record.error is not None:
            self._errors.append((record.path, record.error))

    def summary(self, *, interrupted: bool = False) -> Summary:
        return Summary(
            files=self.count,
            unreadable=len(self._errors),
            exit_code=self.worst,
            interrupted=interrupted,
            groupings={name: _sorted(groups) for name, groups in self._groups.items()},
            errors=tuple(sorted(self._errors)),
        )


def _sorted(groups: dict[str, list[str]]) -> tuple[Group, ...]:
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    return tuple(Group(key, tuple(sorted(files))) for key, files in ordered)
