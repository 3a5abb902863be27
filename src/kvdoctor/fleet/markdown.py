"""`kvdoctor scan --format markdown`: the summary as GitHub tables, for a ticket or a CI summary."""

from __future__ import annotations

import re

from kvdoctor.fleet.summary import GROUPINGS, Summary
from kvdoctor.fleet.text import ERRORS, ROWS, common_folder, headline, share

EXAMPLES = 3


def _code(text: str) -> str:
    """Inline code that survives any file name: pipes escaped, a longer fence than any backtick run."""
    text = text.replace("|", "\\|").replace("\n", " ")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if longest else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def render_markdown(summary: Summary) -> str:
    out = [f"### {headline(summary)}"]
    folder = common_folder(summary)
    if folder:
        out += ["", f"Files under {_code(folder)}."]
    for name, (title, _) in GROUPINGS.items():
        groups = summary.groupings[name]
        out += ["", f"**By {title}**", "", f"| {title} | files | share | files behind it |", "|---|---:|---:|---|"]
        for group in groups[:ROWS]:
            shown = ", ".join(_code(f.removeprefix(folder)) for f in group.files[:EXAMPLES])
            more = len(group.files) - EXAMPLES
            files = f"{shown}, +{more} more" if more > 0 else shown
            out.append(
                f"| {_code(group.key)} | {len(group.files)} | {share(len(group.files), summary.files)} | {files} |"
            )
        if len(groups) > ROWS:
            out.append(f"| … {len(groups) - ROWS} more | | | |")
    if summary.errors:
        out += ["", f"**Unreadable ({summary.unreadable})**", ""]
        out += [f"- {_code(path)}: {problem}" for path, problem in summary.errors[:ERRORS]]
        if len(summary.errors) > ERRORS:
            out.append(f"- … and {len(summary.errors) - ERRORS} more (all of them: `--format json`)")
    return "\n".join(out) + "\n"
