"""Renderers: every output is made from `Report.as_records()` (json, markdown) or the Report."""

from __future__ import annotations

import json

from kvdoctor.diagnosis.report import Report

FORMATS = ("text", "json", "markdown")


def render(
    report: Report,
    fmt: str,
    *,
    lang: str = "en",
    color: bool = False,
    width: int | None = None,
    ascii_bar: bool | None = None,
) -> str:
    if fmt == "json":
        return json.dumps(report.as_records(), indent=2, ensure_ascii=False, sort_keys=False) + "\n"
    if fmt == "markdown":
        from kvdoctor.render.markdown import render_markdown

        return render_markdown(report.as_records())
    from kvdoctor.render.text import render_text

    return render_text(report, color=color, width=width, ascii_bar=ascii_bar)
