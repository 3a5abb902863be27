"""`kvdoctor scan --format text`: the summary as tables (rich), one per grouping, then the files
that could not be read. The width is given (a terminal's, else 100): the layout never follows
an environment variable, and piped output has no colour and no trailing spaces."""

from __future__ import annotations

import io
import os

from kvdoctor.fleet.summary import GROUPINGS, Group, Summary

ROWS = 10  # groups shown per table; `--format json` or `html` has them all
BAR = 16  # cells of the largest group's bar
ERRORS = 20  # unreadable files listed


def headline(summary: Summary) -> str:
    done = f"interrupted after {summary.files} files; the figures cover those only" if summary.interrupted else ""
    head = f"kvdoctor scan: {summary.files} files, {summary.unreadable} unreadable, exit code {summary.exit_code}"
    return f"{head} ({done})" if done else head


def share(count: int, total: int) -> str:
    return f"{100 * count / total:.0f}%" if total else "0%"


def common_folder(summary: Summary) -> str:
    """The folder every scanned file is under ("" when none): the tables show names below it."""
    groups = next(iter(summary.groupings.values()), ())
    prefix = os.path.commonprefix([f for g in groups for f in g.files[:1]] + [f for g in groups for f in g.files[-1:]])
    return prefix[: prefix.rfind("/") + 1]


def example(group: Group, folder: str, width: int) -> str:
    """The group's first file below `folder`, cut in the middle: its folder and its name stay."""
    first = group.files[0].removeprefix(folder) if group.files else ""
    if len(first) <= width:
        return first
    head = width // 3
    return first[:head] + "…" + first[len(first) - (width - head - 1) :]


def bar(count: int, top: int, width: int = BAR) -> str:
    return "█" * max(1, round(count / top * width)) if top else ""


def render_text(summary: Summary, *, color: bool = False, width: int = 100) -> str:
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width,
        color_system="standard" if color else None,
        force_terminal=color,
        highlight=False,
        emoji=False,
        legacy_windows=False,
    )
    console.print(Text(headline(summary), style="bold"))
    folder = common_folder(summary)
    if folder:
        console.print(Text(f"files under {folder}"))
    for name, (title, _) in GROUPINGS.items():
        groups = summary.groupings[name]
        top = max((len(g.files) for g in groups), default=0)
        table = Table(
            title=f"By {title}", title_justify="left", title_style="bold", box=box.SIMPLE_HEAD, show_edge=False
        )
        key_width = min(max([len(title), *(len(g.key) for g in groups[:ROWS])]), 40)
        eg_width = max(width - key_width - BAR - 24, 12)  # 24: the two counts and the gaps
        table.add_column(title, min_width=key_width, max_width=40, overflow="fold")
        table.add_column("files", justify="right", no_wrap=True)
        table.add_column("share", justify="right", no_wrap=True)
        table.add_column("", style="blue", no_wrap=True, min_width=BAR)
        table.add_column("e.g.", max_width=eg_width)
        for group in groups[:ROWS]:
            count = len(group.files)
            table.add_row(
                Text(group.key),
                str(count),
                share(count, summary.files),
                bar(count, top),
                Text(example(group, folder, eg_width)),
            )
        if len(groups) > ROWS:
            table.add_row(Text(f"… {len(groups) - ROWS} more"), "", "", "", "")
        console.print()
        console.print(table)
    if summary.errors:
        console.print(Text(f"Unreadable ({summary.unreadable})", style="bold"))
        for path, problem in summary.errors[:ERRORS]:
            console.print(Text(f"  {path}: {problem}"), soft_wrap=True)
        if len(summary.errors) > ERRORS:
            console.print(Text(f"  … and {len(summary.errors) - ERRORS} more (all of them: --format json)"))
    text = buffer.getvalue()
    return text if color else "".join(line.rstrip() + "\n" for line in text.splitlines())
