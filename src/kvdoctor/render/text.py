"""Terminal output with rich: verdict, evidence, remedies, what to avoid, and a budget bar."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from kvdoctor.diagnosis.report import Report
from kvdoctor.render.labels import label

_SEGMENTS = (  # fact, name, colour
    ("weights_gib", "weights", "blue"),
    ("activation_peak_gib", "activation", "magenta"),
    ("non_torch_gib", "non-torch", "yellow"),
    ("cuda_graph_gib", "graphs", "cyan"),
    ("kv_cache_gib", "KV", "green"),
)
_STYLE = {"error": "bold red", "warning": "bold yellow", "info": "bold green"}


def budget_bar(facts: dict[str, Any], width: int = 60) -> Text | None:
    total = facts.get("total_gpu_gib")
    if not total or facts.get("weights_gib") is None:
        return None
    bar = Text()
    legend = []
    used_cells = 0
    for name, title, colour in _SEGMENTS:
        value = facts.get(name)
        if value is None or value <= 0:
            continue
        cells = max(1, round(value / total * width))
        cells = min(cells, width - used_cells)
        bar.append("█" * cells, style=colour)
        used_cells += cells
        legend.append(f"[{colour}]■[/] {title} {value:.2f}")
    util = facts.get("gpu_memory_utilization")
    budget_cells = round(util * width) if util else width
    if used_cells < budget_cells:
        bar.append("░" * (budget_cells - used_cells), style="dim")
        used_cells = budget_cells
    bar.append("·" * max(width - used_cells, 0), style="dim")
    head = Text.from_markup(f"|{'' if util is None else ''}")
    head.append_text(bar)
    head.append(f"| {total:.2f} GiB" + (f" (budget {util} × total)" if util else ""))
    head.append("\n  ")
    head.append_text(Text.from_markup("  ".join(legend) + "  [dim]░ unused budget  · outside the fraction[/]"))
    return head


EVIDENCE_CHARS = 300  # an evidence line longer than this is cut, and the cut is marked "…"


def render_text(report: Report, *, color: bool = False, width: int | None = None) -> str:
    """The report as text. `width` wraps paragraphs with hanging indents (a terminal's width);
    None writes one line per paragraph (piped into a file, a ticket or grep). No line ends in a space."""
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width or 10_000,
        color_system="standard" if color else None,
        force_terminal=color,
        no_color=not color,
        highlight=False,
        soft_wrap=width is None,
    )
    records = report.as_records()
    lang = report.lang
    diagnoses = records["diagnoses"]
    style = _STYLE.get(diagnoses[0]["severity"], "bold") if diagnoses else "bold"
    title = diagnoses[0]["title"] if diagnoses else label(lang, "none")
    console.print(Text.assemble((f"{label(lang, 'verdict')}: {records['verdict']}", style), "  ", title))
    if len(report.attempts) > 1:
        console.print(
            f"[dim]{len(report.attempts)} start-up attempts in {escape(records['source'])}; "
            f"showing the last (lines {report.attempts[-1].start_line}–{report.attempts[-1].end_line})[/]"
        )
    if diagnoses:
        _diagnosis(console, diagnoses[0], lang, width)
    bar = budget_bar(records["facts"], width=min(60, (width or 100) - 30))
    if bar is not None:
        console.print(f"\n[bold]{label(lang, 'budget')}[/]")
        console.print(bar)
    if len(diagnoses) > 1:
        console.print(
            f"\n[dim]{label(lang, 'also')}: " + ", ".join(f"{d['rule']} ({d['class']})" for d in diagnoses[1:]) + "[/]"
        )
    for note in records["notes"]:
        _para(console, "note: ", "note: ", note, width, hang=6, style="dim")
    return "\n".join(line.rstrip() for line in buffer.getvalue().split("\n"))


def _para(
    console: Console, prefix: str, plain_prefix: str, body: str, width: int | None, *, hang: int = 4, style: str = ""
) -> None:
    """`prefix` (markup; `plain_prefix` is its text) then `body` (plain text). With `width`, the
    paragraph wraps with its continuation lines indented under the body (a hanging indent)."""
    if width is None or len(plain_prefix) + len(body) <= width:
        lines = [prefix + escape(body)]
    else:
        import textwrap

        wrapped = textwrap.wrap(
            plain_prefix + body,
            width=width,
            subsequent_indent=" " * hang,
            break_long_words=False,
            break_on_hyphens=False,  # flags and paths stay whole
        )
        first = wrapped[0][len(plain_prefix) :] if wrapped[0].startswith(plain_prefix) else wrapped[0]
        lines = [prefix + escape(first), *(escape(line) for line in wrapped[1:])]
    for line in lines:
        console.print(f"[{style}]{line}[/]" if style else line)


def _diagnosis(console: Console, d: dict[str, Any], lang: str, width: int | None = None) -> None:
    meta = " ".join(f"{k}={d[k]}" for k in ("cause", "phase") if d.get(k))
    console.print(
        f"[dim]rule {d['rule']} · {d['severity']} · {d['confidence']} confidence{' · ' + meta if meta else ''}[/]"
    )
    console.print(f"\n[bold]{label(lang, 'why')}[/]")
    _para(console, "", "", d["explanation"], width, hang=0)
    if d["remedies"]:
        console.print(f"\n[bold]{label(lang, 'do')}[/]")
        for n, r in enumerate(d["remedies"], 1):
            value = "" if r["value"] is None else f" = {r['value']}"
            plain = f" {n}. {r['action']}{value}: "
            markup = f" {n}. [green]{r['action']}[/]" + (f"[bold]{escape(value)}[/]" if value else "") + ": "
            _para(console, markup, plain, r["text"], width)
    if d["avoid"]:
        console.print(f"\n[bold]{label(lang, 'avoid')}[/]")
        for a in d["avoid"]:
            _para(console, f"  ✗ [red]{a['action']}[/]: ", f"  ✗ {a['action']}: ", a["why"], width)
    if d["evidence"]:
        console.print(f"\n[bold]{label(lang, 'evidence')}[/]")
        for e in d["evidence"]:
            text = e["text"] if len(e["text"]) <= EVIDENCE_CHARS else e["text"][: EVIDENCE_CHARS - 1].rstrip() + "…"
            _para(console, f"  [dim]{e['line']:>6}[/] ", f"  {e['line']:>6} ", text, width, hang=9)
