"""`GET /` and `POST /`: a page where someone without Slack pastes a log and reads the diagnosis.

Server-rendered HTML from `Report.as_records()`: verdict, cause, remedies with their values, what
not to do, the memory budget as a bar, the evidence lines. No script and no external asset (it
works offline); everything taken from the request or the log is escaped, and the
Content-Security-Policy forbids scripts in case an escape is ever missed.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from kvdoctor.render.labels import colon, label, mark

HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

_TEXT: dict[str, dict[str, str]] = {
    "en": {
        "title": "kvdoctor: diagnose a vLLM start-up log",
        "intro": "Paste what the vLLM server printed while it started (stdout and stderr), or choose the log "
        "file. kvdoctor says what failed, why, and which flag to turn which way. Nothing is stored.",
        "paste": "vLLM server log",
        "file": "or a log file (.log, .txt, .gz)",
        "lang": "Language",
        "submit": "Diagnose",
        "source": "Log",
        "failed": "Could not diagnose",
        "total": "total",
        "weights_gib": "weights",
        "activation_peak_gib": "activation peak",
        "non_torch_gib": "non-torch",
        "cuda_graph_gib": "CUDA graphs",
        "kv_cache_gib": "KV cache",
        "unused": "unused budget",
        "outside": "outside the fraction",
        "budget_of": "budget {util} × total",
    },
    "zh": {
        "title": "kvdoctor：诊断 vLLM 启动日志",
        "intro": "粘贴 vLLM 服务启动时打印的内容（stdout 和 stderr），或选择日志文件。kvdoctor 会说明失败的是什么、"
        "原因是什么、哪个参数该往哪个方向调。不会保存任何内容。",
        "paste": "vLLM 服务日志",
        "file": "或选择日志文件（.log、.txt、.gz）",
        "lang": "语言",
        "submit": "诊断",
        "source": "日志",
        "failed": "无法诊断",
        "total": "总计",
        "weights_gib": "权重",
        "activation_peak_gib": "激活峰值",
        "non_torch_gib": "非 torch",
        "cuda_graph_gib": "CUDA 图",
        "kv_cache_gib": "KV 缓存",
        "unused": "未用的预算",
        "outside": "比例之外",
        "budget_of": "预算 {util} × 总计",
    },
}
_LANG_NAMES = (("en", "English"), ("zh", "中文"))
_SEGMENTS = ("weights_gib", "activation_peak_gib", "non_torch_gib", "cuda_graph_gib", "kv_cache_gib")

_STYLE = """
body{font:15px/1.5 system-ui,sans-serif;margin:0 auto;max-width:960px;padding:1rem 1.5rem;color:#1b1f24}
h1{font-size:1.4rem;margin:.5rem 0}h2{font-size:1.15rem;margin:1.4rem 0 .4rem}
textarea{width:100%;box-sizing:border-box;font:13px/1.4 ui-monospace,monospace}
form p{margin:.6rem 0}button{font-size:1rem;padding:.3rem 1.2rem}
code,pre{font-family:ui-monospace,monospace;font-size:13px}
pre{background:#f4f5f7;padding:.6rem;overflow-x:auto;white-space:pre-wrap;word-break:break-all}
.verdict{font-size:1.2rem;margin-top:1rem}.meta{color:#57606a}
.error{border-left:4px solid #cf222e;background:#ffebe9;padding:.5rem 1rem}
.avoid li{color:#82071e}
.bar{display:flex;height:1.4rem;border:1px solid #57606a;margin:.3rem 0}
.bar span{display:block;height:100%}
.weights_gib{background:#0969da}.activation_peak_gib{background:#8250df}.non_torch_gib{background:#bf8700}
.cuda_graph_gib{background:#1b7c83}.kv_cache_gib{background:#1a7f37}
.unused{background:repeating-linear-gradient(45deg,#eaeef2,#eaeef2 4px,#d0d7de 4px,#d0d7de 8px)}
.outside{background:#fff}
.legend span{display:inline-block;margin-right:1rem}
.legend i{display:inline-block;width:.8rem;height:.8rem;margin-right:.3rem;vertical-align:-1px;border:1px solid #57606a}
"""


def page_text(lang: str, key: str) -> str:
    return _TEXT.get(lang, _TEXT["en"])[key]


def preferred_lang(accept_language: str | None) -> str:
    """en or zh from an Accept-Language header (`zh-CN,zh;q=0.9,en;q=0.8` → zh); en by default."""
    ranked: list[tuple[float, int, str]] = []
    for position, item in enumerate((accept_language or "").split(",")):
        tag, _, params = item.strip().partition(";")
        q = params.strip()[2:] if params.strip().startswith("q=") else "1"
        try:
            weight = float(q)
        except ValueError:
            continue
        primary = tag.strip().lower().split("-", 1)[0]
        if primary in ("en", "zh") and weight > 0:
            ranked.append((-weight, position, primary))
    return min(ranked)[2] if ranked else "en"


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def render_page(
    lang: str,
    *,
    records: Mapping[str, Any] | None = None,
    error: str | None = None,
    log_text: str = "",
) -> str:
    """The whole page: the answer (a report or an error) above the form, filled in again."""
    parts = [
        f'<!doctype html>\n<html lang="{_e(lang)}"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(page_text(lang, 'title'))}</title><style>{_STYLE}</style></head><body>",
        f"<header><h1>kvdoctor</h1><p>{_e(page_text(lang, 'intro'))}</p></header><main>",
    ]
    if error is not None:
        parts.append(
            f'<section class="error" role="alert"><h2>{_e(page_text(lang, "failed"))}</h2><p>{_e(error)}</p></section>'
        )
    if records is not None:
        parts.append(report_html(records, lang))
    parts += [_form(lang, log_text), "</main></body></html>\n"]
    return "".join(parts)


def _form(lang: str, log_text: str) -> str:
    options = "".join(
        f'<option value="{code}"{" selected" if code == lang else ""}>{name}</option>' for code, name in _LANG_NAMES
    )
    return (
        '<form method="post" action="/" enctype="multipart/form-data">'
        f'<p><label for="log">{_e(page_text(lang, "paste"))}</label><br>'
        f'<textarea id="log" name="log" rows="14" spellcheck="false">{_e(log_text)}</textarea></p>'
        f'<p><label for="file">{_e(page_text(lang, "file"))}</label> <input id="file" type="file" name="file"></p>'
        f'<p><label for="lang">{_e(page_text(lang, "lang"))}</label> <select id="lang" name="lang">{options}</select> '
        f'<button type="submit">{_e(page_text(lang, "submit"))}</button></p></form>'
    )


def report_html(records: Mapping[str, Any], lang: str) -> str:
    diagnoses = list(records.get("diagnoses") or [])
    head = f"{_e(label(lang, 'verdict'))}{_e(colon(lang))}<code>{_e(records.get('verdict'))}</code>"
    title = f" — {_e(diagnoses[0]['title'])}" if diagnoses else ""
    parts = [
        '<section class="report">',
        f'<p class="verdict"><strong>{head}</strong>{title}</p>',
        f'<p class="meta">{_e(page_text(lang, "source"))}{_e(colon(lang))}<code>{_e(records.get("source"))}</code></p>',
    ]
    if not diagnoses:
        parts.append(f"<p>{_e(label(lang, 'none'))}</p>" if records.get("verdict") == "unknown" else "")
    else:
        parts.append(_diagnosis_html(diagnoses[0], lang))
    parts.append(_budget_html(records.get("facts") or {}, lang))
    if diagnoses and diagnoses[0].get("evidence"):
        lines = "\n".join(f"{e['line']:>6} | {_e(e['text'])}" for e in diagnoses[0]["evidence"])
        parts.append(f'<h2>{_e(label(lang, "evidence"))}</h2><pre class="evidence"><code>{lines}</code></pre>')
    if diagnoses[1:]:
        others = ", ".join(f"<code>{_e(d['rule'])}</code> ({_e(d['class'])})" for d in diagnoses[1:])
        parts.append(f'<p class="also"><strong>{_e(label(lang, "also"))}{_e(mark(lang))}</strong> {others}</p>')
    if records.get("notes"):
        notes = "".join(f"<li>{_e(n)}</li>" for n in records["notes"])
        parts.append(f'<h2>{_e(label(lang, "notes"))}</h2><ul class="notes">{notes}</ul>')
    parts.append("</section>")
    return "".join(parts)


def _diagnosis_html(d: Mapping[str, Any], lang: str) -> str:
    meta = [f"{_e(label(lang, 'rule'))} <code>{_e(d['rule'])}</code>", _e(label(lang, d["severity"]))]
    meta.append(_e(label(lang, d["confidence"])))
    meta += [f"{k}: <code>{_e(d[k])}</code>" for k in ("cause", "phase") if d.get(k)]
    parts = [
        f'<p class="meta">{" · ".join(meta)}</p>',
        f'<h2>{_e(label(lang, "why"))}</h2><p class="explanation">{_e(d["explanation"])}</p>',
    ]
    if d.get("remedies"):
        items = "".join(
            f"<li><code>{_e(r['action'])}</code>"
            + ("" if r.get("value") is None else f" → <code>{_e(r['value'])}</code>")
            + f"{_e(colon(lang))}{_e(r['text'])}</li>"
            for r in d["remedies"]
        )
        parts.append(f'<h2>{_e(label(lang, "do"))}</h2><ol class="remedies">{items}</ol>')
    if d.get("avoid"):
        items = "".join(f"<li><code>{_e(a['action'])}</code>{_e(colon(lang))}{_e(a['why'])}</li>" for a in d["avoid"])
        parts.append(f'<h2>{_e(label(lang, "avoid"))}</h2><ul class="avoid">{items}</ul>')
    return "".join(parts)


def _gib(facts: Mapping[str, Any], name: str) -> float | None:
    value = facts.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _budget_html(facts: Mapping[str, Any], lang: str) -> str:
    """The bar of text output in HTML: each use of the card's memory as a share of its total."""
    total, util = _gib(facts, "total_gpu_gib"), _gib(facts, "gpu_memory_utilization")
    if not total or total <= 0 or _gib(facts, "weights_gib") is None:
        return ""
    cells, legend, used = [], [], 0.0
    for name in _SEGMENTS:
        value = _gib(facts, name)
        if value is None or value <= 0:
            continue
        share = min(value / total * 100, 100 - used)
        used += share
        title = f"{page_text(lang, name)} {value:.2f} GiB"
        cells.append(f'<span class="{name}" style="width:{share:.2f}%" title="{_e(title)}"></span>')
        legend.append(f'<span><i class="{name}"></i>{_e(title)}</span>')
    budget = min(util * 100, 100) if util is not None and 0 < util <= 1 else 100.0
    if used < budget:
        cells.append(f'<span class="unused" style="width:{budget - used:.2f}%"></span>')
        legend.append(f'<span><i class="unused"></i>{_e(page_text(lang, "unused"))}</span>')
        used = budget
    if used < 100:
        cells.append(f'<span class="outside" style="width:{100 - used:.2f}%"></span>')
        legend.append(f'<span><i class="outside"></i>{_e(page_text(lang, "outside"))}</span>')
    basis = f" ({page_text(lang, 'budget_of').format(util=util)})" if util is not None else ""
    caption = f"{page_text(lang, 'total')} {total:.2f} GiB{basis}"
    return (
        f'<h2>{_e(label(lang, "budget"))}</h2><figure class="budget">'
        f'<div class="bar" role="img" aria-label="{_e(caption)}">{"".join(cells)}</div>'
        f'<figcaption class="legend">{"".join(legend)}<span>{_e(caption)}</span></figcaption></figure>'
    )
