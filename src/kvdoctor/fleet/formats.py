"""Output of a scan: a `Sink` takes each record as it arrives and the summary at the end.

`jsonl` writes every record at once (and keeps none); `text` and `markdown` print the summary
only (and keep none); `json` and `html` list every file, so they keep the small records and
write one document at the end, its files sorted by path."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TextIO

from kvdoctor._version import __version__
from kvdoctor.diagnosis.report import SCHEMA_VERSION
from kvdoctor.fleet.record import FileRecord
from kvdoctor.fleet.summary import Summary

FORMATS = ("text", "json", "jsonl", "markdown", "html")


class Sink(Protocol):
    def add(self, record: FileRecord) -> None: ...

    def finish(self, summary: Summary) -> None: ...


def document(summary: Summary, files: Sequence[FileRecord]) -> dict[str, Any]:
    """The `--format json` document."""
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "kvdoctor", "version": __version__},
        "summary": summary.as_record(),
        "files": [f.as_record() for f in files],
    }


class JsonLines:
    """One object per file as results arrive, then `{"summary": …}`: a consumer can stop early."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def add(self, record: FileRecord) -> None:
        self.out.write(json.dumps(record.as_record(), ensure_ascii=False) + "\n")
        self.out.flush()  # a pipe is block-buffered: records must leave while the scan runs

    def finish(self, summary: Summary) -> None:
        json.dump({"summary": summary.as_record()}, self.out, ensure_ascii=False)  # never one big string
        self.out.write("\n")
        self.out.flush()


Render = Callable[[Summary, Sequence[FileRecord], TextIO], None]


class Document:
    """Written once, at the end; keeps the records only when the document lists every file."""

    def __init__(self, out: TextIO, render: Render, *, keep: bool) -> None:
        self.out, self.render, self.keep = out, render, keep
        self.records: list[FileRecord] = []

    def add(self, record: FileRecord) -> None:
        if self.keep:
            self.records.append(record)

    def finish(self, summary: Summary) -> None:
        self.render(summary, sorted(self.records, key=lambda r: r.path), self.out)
        self.out.flush()


def _json(summary: Summary, files: Sequence[FileRecord], out: TextIO) -> None:
    # json.dump writes as it encodes: the document is never one string in memory
    json.dump(document(summary, files), out, indent=2, ensure_ascii=False)
    out.write("\n")


def _text(text: Callable[[Summary, Sequence[FileRecord]], str]) -> Render:
    def write(summary: Summary, files: Sequence[FileRecord], out: TextIO) -> None:
        out.write(text(summary, files))

    return write


def open_sink(fmt: str, out: TextIO, *, color: bool = False, width: int = 100) -> Sink:
    if fmt == "jsonl":
        return JsonLines(out)
    if fmt == "json":
        return Document(out, _json, keep=True)
    if fmt == "html":
        from kvdoctor.fleet.html import render_html

        return Document(out, _text(render_html), keep=True)
    if fmt == "markdown":
        from kvdoctor.fleet.markdown import render_markdown

        return Document(out, _text(lambda summary, _: render_markdown(summary)), keep=False)
    from kvdoctor.fleet.text import render_text

    return Document(out, _text(lambda summary, _: render_text(summary, color=color, width=width)), keep=False)
