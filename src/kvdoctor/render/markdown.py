"""Markdown from the report records (tickets, Slack fallbacks, CI summaries). Deterministic."""

from __future__ import annotations

from typing import Any

from kvdoctor.render.labels import colon, label, mark


def _value(v: Any) -> str:
    return "" if v is None else f" → `{v}`"


def render_markdown(records: dict[str, Any]) -> str:
    lang = records.get("lang", "en")
    out: list[str] = []
    diagnoses = records["diagnoses"]
    out.append(
        f"**{label(lang, 'verdict')}{colon(lang)}`{records['verdict']}`**"
        + (f" — {diagnoses[0]['title']}" if diagnoses else "")
    )
    if not diagnoses:
        out.append("")
        out.append(label(lang, "none") if records["verdict"] == "unknown" else "")
    for d in diagnoses[:1]:
        meta = ", ".join(f"{k}: `{d[k]}`" for k in ("cause", "phase") if d.get(k))
        out += [
            "",
            f"_{d['rule']}_ ({d['severity']}, {d['confidence']} confidence{', ' + meta if meta else ''})",
            "",
            d["explanation"],
        ]
        if d["remedies"]:
            out += ["", f"**{label(lang, 'do')}{mark(lang)}**", ""]
            out += [f"{n}. `{r['action']}`{_value(r['value'])}: {r['text']}" for n, r in enumerate(d["remedies"], 1)]
        if d["avoid"]:
            out += ["", f"**{label(lang, 'avoid')}{mark(lang)}**", ""]
            out += [f"- `{a['action']}`: {a['why']}" for a in d["avoid"]]
        if d["evidence"]:
            out += ["", f"**{label(lang, 'evidence')}{mark(lang)}**", "", "```"]
            out += [f"{e['line']:>6} | {e['text']}" for e in d["evidence"]]
            out += ["```"]
    others = diagnoses[1:]
    if others:
        out += [
            "",
            f"**{label(lang, 'also')}{mark(lang)}** " + ", ".join(f"`{d['rule']}` ({d['class']})" for d in others),
        ]
    if records.get("notes"):
        out += ["", f"**{label(lang, 'notes')}{mark(lang)}**", ""] + [f"- {n}" for n in records["notes"]]
    return "\n".join(line for line in out if line is not None).rstrip() + "\n"
