"""Text output: verdict, evidence, remedies, what to avoid, and a budget bar. With colour (a
terminal) it is drawn by rich; without (piped, the usual case in CI and tickets) it is written
plainly, and rich is never imported (it costs ~50 ms of a ~150 ms run)."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from typing import Any

from kvdoctor.diagnosis.report import Report
from kvdoctor.render.labels import colon, label

_SEGMENTS = (  # fact, name, colour
    ("weights_gib", "weights", "blue"),
    ("activation_peak_gib", "activation", "magenta"),
    ("non_torch_gib", "non-torch", "yellow"),
    ("cuda_graph_gib", "graphs", "cyan"),
    ("kv_cache_gib", "KV", "green"),
)
_STYLE = {"error": "bold red", "warning": "bold yellow", "info": "bold green"}


def budget_bar(facts: dict[str, Any], width: int = 60) -> tuple[list[tuple[str, str]], str] | None:
    """The bar as (text, style) cells plus its legend (markup), or None without the figures."""
    total = facts.get("total_gpu_gib")
    if not total or facts.get("weights_gib") is None:
        return None
    cells: list[tuple[str, str]] = [("|", "")]
    legend = []
    used_cells = 0
    for name, title, colour in _SEGMENTS:
        value = facts.get(name)
        if value is None or value <= 0:
            continue
        n = min(max(1, round(value / total * width)), width - used_cells)
        cells.append(("█" * n, colour))
        used_cells += n
        legend.append(f"[{colour}]■[/] {title} {value:.2f}")
    util = facts.get("gpu_memory_utilization")
    budget_cells = round(util * width) if util else width
    if used_cells < budget_cells:
        cells.append(("░" * (budget_cells - used_cells), "dim"))
        used_cells = budget_cells
    cells.append(("·" * max(width - used_cells, 0), "dim"))
    cells.append((f"| {total:.2f} GiB" + (f" (budget {util} × total)" if util else ""), ""))
    return cells, "  ".join(legend) + "  [dim]░ unused budget  · outside the fraction[/]"


# the markup kvdoctor itself writes (never user text: the plain path does not escape it)
_TAG = re.compile(r"\[/?(?:dim|bold(?: red| yellow| green)?|green|red|blue|magenta|yellow|cyan)?\]")


class _Out:
    """rich's console when colour is on; else a plain writer that drops kvdoctor's own tags."""

    def __init__(self, color: bool, width: int | None) -> None:
        self.buffer = io.StringIO()
        self.color, self.width = color, width
        self.console: Any = None
        self.esc: Callable[[str], str] = lambda text: text
        if color:
            from rich.console import Console
            from rich.markup import escape

            self.console = Console(
                file=self.buffer,
                width=width or 10_000,
                color_system="standard",
                force_terminal=True,
                highlight=False,
                soft_wrap=width is None,
            )
            self.esc = escape

    def print(self, markup: str = "") -> None:
        if self.console is not None:
            self.console.print(markup)
        else:
            text = _TAG.sub("", markup)
            if self.width is not None and any(len(line) > self.width for line in text.split("\n")):
                import textwrap

                text = "\n".join(
                    textwrap.fill(line, self.width, break_long_words=False, break_on_hyphens=False) or line
                    for line in text.split("\n")
                )
            self.buffer.write(text + "\n")

    def print_cells(self, cells: list[tuple[str, str]]) -> None:
        if self.console is None:
            self.buffer.write("".join(text for text, _ in cells) + "\n")
            return
        from rich.text import Text

        line = Text()
        for text, style in cells:
            line.append(text, style=style or None)
        self.console.print(line)


EVIDENCE_CHARS = 300  # an evidence line longer than this is cut, and the cut is marked "…"


def render_text(report: Report, *, color: bool = False, width: int | None = None) -> str:
    """The report as text. `width` wraps paragraphs with hanging indents (a terminal's width);
    None writes one line per paragraph (piped into a file, a ticket or grep). No line ends in a space."""
    out = _Out(color, width)
    esc = out.esc
    records = report.as_records()
    lang = report.lang
    diagnoses = records["diagnoses"]
    style = _STYLE.get(diagnoses[0]["severity"], "bold") if diagnoses else "bold"
    title = diagnoses[0]["title"] if diagnoses else label(lang, "none")
    out.print(f"[{style}]{esc(label(lang, 'verdict') + colon(lang) + records['verdict'])}[/]  {esc(title)}")
    if len(report.attempts) > 1:
        out.print(
            f"[dim]{len(report.attempts)} start-up attempts in {esc(records['source'])}; "
            f"showing the last (lines {report.attempts[-1].start_line}–{report.attempts[-1].end_line})[/]"
        )
    if diagnoses:
        _diagnosis(out, diagnoses[0], lang, width)
    bar = budget_bar(records["facts"], width=min(60, (width or 100) - 30))
    if bar is not None:
        out.print(f"\n[bold]{label(lang, 'budget')}[/]")
        out.print_cells(bar[0])
        out.print("  " + bar[1])
    if len(diagnoses) > 1:
        out.print(
            f"\n[dim]{label(lang, 'also')}{colon(lang)}"
            + ", ".join(f"{d['rule']} ({d['class']})" for d in diagnoses[1:])
            + "[/]"
        )
    for note in records["notes"]:
        head = label(lang, "note") + colon(lang)
        _para(out, head, head, note, width, hang=6, style="dim")
    return "\n".join(line.rstrip() for line in out.buffer.getvalue().split("\n"))


def _para(
    out: _Out, prefix: str, plain_prefix: str, body: str, width: int | None, *, hang: int = 4, style: str = ""
) -> None:
    """`prefix` (markup; `plain_prefix` is its text) then `body` (plain text). With `width`, the
    paragraph wraps with its continuation lines indented under the body (a hanging indent)."""
    if width is None or len(plain_prefix) + len(body) <= width:
        lines = [prefix + out.esc(body)]
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
        lines = [prefix + out.esc(first), *(out.esc(line) for line in wrapped[1:])]
    for line in lines:
        out.print(f"[{style}]{line}[/]" if style else line)


def _diagnosis(out: _Out, d: dict[str, Any], lang: str, width: int | None = None) -> None:
    meta = " ".join(f"{k}={d[k]}" for k in ("cause", "phase") if d.get(k))
    out.print(
        f"[dim]{label(lang, 'rule')} {d['rule']} · {label(lang, d['severity'])} · {label(lang, d['confidence'])}"
        f"{' · ' + meta if meta else ''}[/]"
    )
    out.print(f"\n[bold]{label(lang, 'why')}[/]")
    _para(out, "", "", d["explanation"], width, hang=0)
    if d["remedies"]:
        out.print(f"\n[bold]{label(lang, 'do')}[/]")
        for n, r in enumerate(d["remedies"], 1):
            value = "" if r["value"] is None else f" = {r['value']}"
            plain = f" {n}. {r['action']}{value}: "
            markup = f" {n}. [green]{r['action']}[/]" + (f"[bold]{out.esc(value)}[/]" if value else "") + ": "
            _para(out, markup, plain, r["text"], width)
    if d["avoid"]:
        out.print(f"\n[bold]{label(lang, 'avoid')}[/]")
        for a in d["avoid"]:
            _para(out, f"  ✗ [red]{a['action']}[/]: ", f"  ✗ {a['action']}: ", a["why"], width)
    if d["evidence"]:
        out.print(f"\n[bold]{label(lang, 'evidence')}[/]")
        for e in d["evidence"]:
            text = e["text"] if len(e["text"]) <= EVIDENCE_CHARS else e["text"][: EVIDENCE_CHARS - 1].rstrip() + "…"
            _para(out, f"  [dim]{e['line']:>6}[/] ", f"  {e['line']:>6} ", text, width, hang=9)
