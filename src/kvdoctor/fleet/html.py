"""`kvdoctor scan --format html`: one self-contained page (no network, no external asset).

A bar chart per grouping (inline SVG; a bar links to the table filtered to its files), and a
table of every file, sortable by a click on a column header. The page's address keeps the view:
`report.html#sort=attempts:desc&filter=by_gpu:NVIDIA%20L4`. Every text from a log or a file name
is escaped; a Content-Security-Policy lets only the page's own script and style run, so even an
escaping mistake could not load or run anything else."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from html import escape
from urllib.parse import quote

from kvdoctor.fleet.record import FileRecord
from kvdoctor.fleet.summary import GROUPINGS, Summary, group_keys
from kvdoctor.fleet.text import headline, share

BARS = 12  # bars per chart; the table filters to any group, charted or not
LABEL = 34  # characters of a bar's label, cut at the front (its title holds the whole key)

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em;margin:0 0 .2em}
.charts{display:flex;flex-wrap:wrap;gap:1em}
figure{margin:0;border:1px solid #ddd;border-radius:6px;padding:.6em}
figcaption{font-weight:600;margin-bottom:.3em}
svg text{font:12px system-ui,sans-serif;fill:#222}
svg a rect{fill:#4a7bd0}
svg a:hover rect{fill:#1f4f9f}
table{border-collapse:collapse;margin-top:1em;width:100%}
th,td{border-bottom:1px solid #eee;padding:.25em .5em;text-align:left;vertical-align:top}
th{cursor:pointer;background:#f6f6f6;position:sticky;top:0;user-select:none}
th[aria-sort=ascending]::after{content:" \\25B2"}
th[aria-sort=descending]::after{content:" \\25BC"}
td.num{text-align:right}
td.err{color:#a00}
code{font-size:12px}
"""

# Sorting and filtering only; no data lives in the script (it reads the table), so no log text
# ever reaches JavaScript source.
_SCRIPT = """
(function () {
  var table = document.getElementById("files");
  var body = table.tBodies[0];
  var heads = table.tHead.rows[0].cells;
  var note = document.getElementById("shown");
  function value(row, col, num) {
    var cell = row.cells[col];
    var v = cell.textContent;
    return num ? (v === "" ? -Infinity : parseFloat(v)) : v.toLowerCase();
  }
  function sort(col, dir) {
    var num = heads[col].hasAttribute("data-num");
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = value(a, col, num), y = value(b, col, num);
      return (x < y ? -1 : x > y ? 1 : 0) * (dir === "desc" ? -1 : 1);
    });
    rows.forEach(function (r) { body.appendChild(r); });
    for (var i = 0; i < heads.length; i++) { heads[i].removeAttribute("aria-sort"); }
    heads[col].setAttribute("aria-sort", dir === "desc" ? "descending" : "ascending");
  }
  function filter(grouping, key) {
    var shown = 0;
    Array.prototype.forEach.call(body.rows, function (r) {
      var hide = grouping !== null && r.getAttribute("data-" + grouping) !== key;
      r.hidden = hide;
      if (!hide) { shown++; }
    });
    note.textContent = shown + " of " + body.rows.length + " files" +
      (grouping === null ? "" : " (" + grouping.replace("by_", "").replace("_", " ") + ": " + key + ")");
    document.getElementById("all").hidden = grouping === null;
  }
  function column(name) {
    for (var i = 0; i < heads.length; i++) { if (heads[i].getAttribute("data-col") === name) { return i; } }
    return -1;
  }
  function apply() {
    var params = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (part) {
      var eq = part.indexOf("=");
      if (eq > 0) { params[part.slice(0, eq)] = decodeURIComponent(part.slice(eq + 1)); }
    });
    var f = params.filter ? params.filter.split(":") : null;
    filter(f ? f[0] : null, f ? f.slice(1).join(":") : null);
    if (params.sort) {
      var s = params.sort.split(":"), col = column(s[0]);
      if (col >= 0) { sort(col, s[1] === "desc" ? "desc" : "asc"); }
    }
  }
  Array.prototype.forEach.call(heads, function (th, col) {
    th.addEventListener("click", function () {
      sort(col, th.getAttribute("aria-sort") === "ascending" ? "desc" : "asc");
    });
  });
  window.addEventListener("hashchange", apply);
  apply();
  table.setAttribute("data-ready", "1");
})();
"""

# (column id, header, numeric)
_COLUMNS = (
    ("path", "file", False),
    ("verdict", "verdict", False),
    ("cause", "cause / phase", False),
    ("confidence", "confidence", False),
    ("remedy", "first remedy", False),
    ("attempts", "attempts", True),
    ("vllm", "vLLM", False),
    ("engine", "engine", False),
    ("model", "model", False),
    ("gpu", "GPU", False),
    ("exit", "exit", True),
    ("error", "error", False),
)


def _digest(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _short(text: str) -> str:
    return text if len(text) <= LABEL else "…" + text[len(text) - LABEL + 1 :]


def _chart(name: str, title: str, summary: Summary) -> str:
    groups = summary.groupings[name][:BARS]
    top = max((len(g.files) for g in groups), default=1)
    row, label_w, bar_w = 22, 260, 220
    parts = [
        f'<figure class="chart" id="chart-{name}"><figcaption>By {escape(title)}</figcaption>',
        f'<svg role="img" aria-label="files by {escape(title)}" width="{label_w + bar_w + 60}" '
        f'height="{row * len(groups) + 4}">',
    ]
    for i, group in enumerate(groups):
        n, y = len(group.files), i * row
        width = max(1, round(n / top * bar_w))
        parts.append(
            f'<a href="#filter={escape(name)}:{escape(quote(group.key, safe=""))}">'
            f"<title>{escape(group.key)}: {n} files ({share(n, summary.files)})</title>"
            f'<text x="{label_w - 6}" y="{y + 15}" text-anchor="end">{escape(_short(group.key))}</text>'
            f'<rect x="{label_w}" y="{y + 3}" width="{width}" height="{row - 6}"></rect>'
            f'<text x="{label_w + width + 5}" y="{y + 15}">{n}</text></a>'
        )
    more = len(summary.groupings[name]) - len(groups)
    parts.append("</svg>")
    if more > 0:
        parts.append(f"<p>… and {more} more (filter the table below)</p>")
    parts.append("</figure>")
    return "".join(parts)


def _cells(record: FileRecord) -> list[str]:
    """The text of each column, in `_COLUMNS` order."""
    d = record.diagnosis
    remedy = "" if d is None or d.remedy is None else d.remedy
    if d is not None and d.remedy_value is not None:
        remedy += f" = {d.remedy_value}"
    return [
        record.path,
        record.verdict,
        (d.cause or d.phase or "") if d else "",
        d.confidence if d else "",
        remedy,
        str(record.attempts),
        record.vllm_version or "",
        record.engine or "",
        record.model or "",
        record.gpu or "",
        str(record.exit_code),
        record.error or "",
    ]


def _row(record: FileRecord) -> str:
    keys = "".join(f' data-{name}="{escape(key)}"' for name, key in group_keys(record).items())
    cells = []
    for text, (column, _, numeric) in zip(_cells(record), _COLUMNS, strict=True):
        css = "num" if numeric else "err" if column == "error" and text else ""
        cls = f' class="{css}"' if css else ""
        cells.append(f"<td{cls}>{escape(text)}</td>")
    return f"<tr{keys}>{''.join(cells)}</tr>"


def render_html(summary: Summary, files: Sequence[FileRecord]) -> str:
    policy = f"default-src 'none'; style-src {_digest(_STYLE)}; script-src {_digest(_SCRIPT)}"
    heads = "".join(
        f'<th data-col="{column}"{" data-num" if numeric else ""}>{escape(header)}</th>'
        for column, header, numeric in _COLUMNS
    )
    charts = "".join(_chart(name, title, summary) for name, (title, _) in GROUPINGS.items())
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(headline(summary))}</title><style>{_STYLE}</style></head>\n"
        f'<body><h1>kvdoctor scan</h1><p id="headline">{escape(headline(summary))}</p>\n'
        f'<section class="charts">{charts}</section>\n'
        f'<p><span id="shown">{len(files)} of {len(files)} files</span> '
        '<a id="all" href="#" hidden>show all</a></p>\n'
        f'<table id="files"><thead><tr>{heads}</tr></thead><tbody>\n'
        + "\n".join(_row(r) for r in files)
        + f"\n</tbody></table>\n<script>{_SCRIPT}</script>\n</body></html>\n"
    )
