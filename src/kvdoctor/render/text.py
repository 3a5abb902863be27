"""Text output: verdict, evidence, remedies, what to avoid, and a budget bar. With colour (a
terminal) it is drawn by rich; without (piped, the usual case in CI and tickets) it is written
plainly, and rich is never imported (it costs ~50 ms of a ~150 ms run).

With a width (a terminal's) every paragraph is broken by `render.cjk`, which knows where Chinese
lines may break, and rich only prints the lines it is given."""

from __future__ import annotations

import io
import re
from collections.abc import Callable

from kvdoctor.diagnosis.report import Report
from kvdoctor.render.cjk import cell_width, wrap
from kvdoctor.render.labels import colon, label, name, sep
from kvdoctor.render.notes import note_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_SEGMENTS = (  # fact, name (en), colour, ASCII glyph
    ("weights_gib", "weights", "blue", "W"),
    ("activation_peak_gib", "activation", "magenta", "A"),
    ("non_torch_gib", "non-torch", "yellow", "N"),
    ("cuda_graph_gib", "graphs", "cyan", "G"),
    ("kv_cache_gib", "KV", "green", "K"),
)
_STYLE = {"error": "bold red", "warning": "bold yellow", "info": "bold green"}
# the bar's glyphs: block elements, or ASCII where their width is ambiguous (CJK terminals draw
# `█ ░ · ■` two cells wide, and the bar skews and wraps)
_GLYPHS = {False: ("█", "░", "·", "■"), True: ("", "-", ".", "")}


def budget_bar(
    facts: dict[str, Any],
    width: int = 60,
    *,
    lang: str = "en",
    ascii_only: bool = False,
    columns: int | None = None,
) -> tuple[list[tuple[str, str]], list[str]] | None:
    """The bar as (text, style) cells plus its legend items (markup), or None without the figures.
    `columns`: the line the bar and its caption must fit in (the bar is then at most `width`)."""
    total = facts.get("total_gpu_gib")
    if not total or facts.get("weights_gib") is None:
        return None
    util = facts.get("gpu_memory_utilization")
    caption = f"| {total:.2f} GiB" + (label(lang, "budget_of").format(util=util) if util else "")
    if columns is not None:
        width = max(10, min(width, columns - 1 - cell_width(caption, wide_ambiguous=lang == "zh")))
    block, unused, outside, swatch = _GLYPHS[ascii_only]
    cells: list[tuple[str, str]] = [("|", "")]
    legend = []
    used_cells = 0
    for fact, title, colour, letter in _SEGMENTS:
        value = facts.get(fact)
        if value is None or value <= 0:
            continue
        n = min(max(1, round(value / total * width)), width - used_cells)
        cells.append(((block or letter) * n, colour))
        used_cells += n
        shown = title if lang == "en" else name(lang, "figure", fact)
        legend.append(f"[{colour}]{swatch or letter}[/] {shown} {value:.2f}")
    budget_cells = round(util * width) if util else width
    if used_cells < budget_cells:
        cells.append((unused * (budget_cells - used_cells), "dim"))
        used_cells = budget_cells
    cells.append((outside * max(width - used_cells, 0), "dim"))
    cells.append((caption, ""))
    legend += [f"[dim]{unused} {label(lang, 'unused')}[/]", f"[dim]{outside} {label(lang, 'outside')}[/]"]
    return cells, legend


# the markup kvdoctor itself writes (never user text: the plain path does not escape it)
_TAG = re.compile(r"\[/?(?:dim|bold(?: red| yellow| green)?|green|red|blue|magenta|yellow|cyan)?\]")


class _Out:
    """rich's console when colour is on; else a plain writer that drops kvdoctor's own tags.
    Lines arrive broken already (`_para`), so rich never re-wraps them."""

    def __init__(self, color: bool, width: int | None, wide_ambiguous: bool) -> None:
        self.buffer = io.StringIO()
        self.color, self.width, self.wide = color, width, wide_ambiguous
        self.console: Any = None
        self.esc: Callable[[str], str] = lambda text: text
        if color:
            from rich.console import Console
            from rich.markup import escape

            self.console = Console(
                file=self.buffer,
                width=10_000,  # `_para` breaks the lines; rich must not break them again
                color_system="standard",
                force_terminal=True,
                highlight=False,
                soft_wrap=True,
            )
            self.esc = escape

    def print(self, markup: str = "") -> None:
        if self.console is not None:
            self.console.print(markup)
        else:
            self.buffer.write(_TAG.sub("", markup) + "\n")

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


def render_text(report: Report, *, color: bool = False, width: int | None = None, ascii_bar: bool | None = None) -> str:
    """The report as text. `width` wraps paragraphs with hanging indents (a terminal's width);
    None writes one line per paragraph (piped into a file, a ticket or grep). No line ends in a
    space. `ascii_bar` draws the budget bar in ASCII (default: in Chinese, whose terminals draw
    the block glyphs two cells wide)."""
    lang = report.lang
    out = _Out(color, width, wide_ambiguous=lang == "zh")
    records = report.as_records()
    diagnoses = records["diagnoses"]
    style = _STYLE.get(diagnoses[0]["severity"], "bold") if diagnoses else "bold"
    title = diagnoses[0]["title"] if diagnoses else label(lang, "none")
    head = label(lang, "verdict") + colon(lang) + name(lang, "class", records["verdict"])
    _para(out, f"[{style}]{out.esc(head)}[/]  ", head + "  ", title, width, hang=0)
    if len(report.attempts) > 1:
        attempts = label(lang, "attempts").format(
            n=len(report.attempts),
            source=records["source"],
            start=report.attempts[-1].start_line,
            end=report.attempts[-1].end_line,
        )
        _para(out, "", "", attempts, width, hang=0, style="dim")
    if diagnoses:
        _diagnosis(out, diagnoses[0], lang, width)
    ascii_only = lang == "zh" if ascii_bar is None else ascii_bar
    bar = budget_bar(records["facts"], 60, lang=lang, ascii_only=ascii_only, columns=width or 100)
    if bar is not None:
        out.print(f"\n[bold]{label(lang, 'budget')}[/]")
        out.print_cells(bar[0])
        _items(out, bar[1], width)
    if len(diagnoses) > 1:
        others = sep(lang).join(_also(d, lang) for d in diagnoses[1:])
        out.print()
        _para(out, "", "", label(lang, "also") + colon(lang) + others, width, hang=0, style="dim")
    for note in records["notes"]:
        head = label(lang, "note") + colon(lang)
        _para(out, head, head, note_text(note, lang), width, hang=cell_width(head, out.wide), style="dim")
    return "\n".join(line.rstrip() for line in out.buffer.getvalue().split("\n"))


def _also(d: dict[str, Any], lang: str) -> str:
    klass = name(lang, "class", d["class"])
    return f"{d['rule']}（{klass}）" if lang == "zh" else f"{d['rule']} ({klass})"


def _items(
    out: _Out, items: list[str], width: int | None, *, between: str = "  ", indent: str = "  ", style: str = ""
) -> None:
    """Items (markup) `between` apart after `indent`, a line broken only between two items."""
    lines: list[str] = []
    for item in items:
        if lines and width is not None and cell_width(_TAG.sub("", lines[-1] + between + item), out.wide) > width:
            lines.append(indent + item)
        else:
            lines[-1:] = [(lines[-1] + between if lines else indent) + item]
    for line in lines:
        out.print(f"[{style}]{line}[/]" if style else line)


def _para(
    out: _Out, prefix: str, plain_prefix: str, body: str, width: int | None, *, hang: int = 4, style: str = ""
) -> None:
    """`prefix` (markup; `plain_prefix` is its text) then `body` (plain text). With `width`, the
    paragraph wraps with its continuation lines indented under the body (a hanging indent)."""
    if width is None:
        lines = [prefix + out.esc(body)]
    else:
        first, *rest = wrap(body, width, first=cell_width(plain_prefix, out.wide), hang=hang, wide_ambiguous=out.wide)
        lines = [prefix + out.esc(first), *(" " * hang + out.esc(line) for line in rest)]
    for line in lines:
        out.print(f"[{style}]{line}[/]" if style else line)


def _meta(d: dict[str, Any], lang: str) -> list[str]:
    """rule … · error · high confidence · cause=… (en); 规则 … · 错误 · 高置信度 · 起因：… (zh)."""
    parts = [f"{label(lang, 'rule')} {d['rule']}", label(lang, d["severity"]), label(lang, d["confidence"])]
    for key in ("cause", "phase"):
        if d.get(key):
            parts.append(
                f"{label(lang, key)}{colon(lang)}{name(lang, key, d[key])}" if lang == "zh" else f"{key}={d[key]}"
            )
    return parts


def _diagnosis(out: _Out, d: dict[str, Any], lang: str, width: int | None = None) -> None:
    _items(out, [out.esc(part) for part in _meta(d, lang)], width, between=" · ", indent="", style="dim")
    out.print(f"\n[bold]{label(lang, 'why')}[/]")
    _para(out, "", "", d["explanation"], width, hang=0)
    if d["remedies"]:
        out.print(f"\n[bold]{label(lang, 'do')}[/]")
        for n, r in enumerate(d["remedies"], 1):
            action = name(lang, "action", r["action"])
            value = "" if r["value"] is None else f" = {r['value']}"
            plain = f" {n}. {action}{value}{colon(lang)}"
            markup = (
                f" {n}. [green]{out.esc(action)}[/]" + (f"[bold]{out.esc(value)}[/]" if value else "") + colon(lang)
            )
            _para(out, markup, plain, r["text"], width)
    if d["avoid"]:
        out.print(f"\n[bold]{label(lang, 'avoid')}[/]")
        for a in d["avoid"]:
            action = name(lang, "action", a["action"])
            _para(out, f"  ✗ [red]{out.esc(action)}[/]{colon(lang)}", f"  ✗ {action}{colon(lang)}", a["why"], width)
    if d["evidence"]:
        out.print(f"\n[bold]{label(lang, 'evidence')}[/]")
        for e in d["evidence"]:
            text = e["text"] if len(e["text"]) <= EVIDENCE_CHARS else e["text"][: EVIDENCE_CHARS - 1].rstrip() + "…"
            _para(out, f"  [dim]{e['line']:>6}[/] ", f"  {e['line']:>6} ", text, width, hang=9)
