"""Markdown from the report records (tickets, Slack fallbacks, CI summaries). Deterministic.

In Chinese the ids (class, cause, phase, remedy actions) are shown by their names
(`kvdoctor.diagnosis.terms`) and the notes in Chinese; the JSON keeps the ids."""

from __future__ import annotations

from kvdoctor.render.labels import colon, label, mark, name, sep
from kvdoctor.render.notes import note_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _value(v: Any) -> str:
    return "" if v is None else f" → `{v}`"


def _headline(records: dict[str, Any], lang: str) -> str:
    diagnoses = records["diagnoses"]
    if lang == "zh":
        return f"**{label(lang, 'verdict')}{colon(lang)}{name(lang, 'class', records['verdict'])}**" + (
            f"——{diagnoses[0]['title']}" if diagnoses else ""
        )
    return f"**{label(lang, 'verdict')}{colon(lang)}`{records['verdict']}`**" + (
        f" — {diagnoses[0]['title']}" if diagnoses else ""
    )


def meta_line(d: dict[str, Any], lang: str) -> str:
    """_rule_ (error, high confidence, cause: `…`) in en; _规则 …_（错误，高置信度，起因：…）in zh."""
    if lang == "zh":
        parts = [label(lang, d["severity"]), label(lang, d["confidence"])]
        parts += [f"{label(lang, k)}{colon(lang)}{name(lang, k, d[k])}" for k in ("cause", "phase") if d.get(k)]
        return f"_{label(lang, 'rule')} {d['rule']}_（{'，'.join(parts)}）"
    meta = ", ".join(f"{k}: `{d[k]}`" for k in ("cause", "phase") if d.get(k))
    return f"_{d['rule']}_ ({d['severity']}, {d['confidence']} confidence{', ' + meta if meta else ''})"


def _remedy(n: int, r: dict[str, Any], lang: str) -> str:
    if lang == "zh":
        return f"{n}. {name(lang, 'action', r['action'])}{_value(r['value'])}{colon(lang)}{r['text']}"
    return f"{n}. `{r['action']}`{_value(r['value'])}: {r['text']}"


def _avoid(a: dict[str, Any], lang: str) -> str:
    if lang == "zh":
        return f"- {name(lang, 'action', a['action'])}{colon(lang)}{a['why']}"
    return f"- `{a['action']}`: {a['why']}"


def also_item(d: dict[str, Any], lang: str) -> str:
    if lang == "zh":
        return f"`{d['rule']}`（{name(lang, 'class', d['class'])}）"
    return f"`{d['rule']}` ({d['class']})"


def render_markdown(records: dict[str, Any]) -> str:
    lang = records.get("lang", "en")
    out: list[str] = [_headline(records, lang)]
    diagnoses = records["diagnoses"]
    if not diagnoses:
        out.append("")
        out.append(label(lang, "none") if records["verdict"] == "unknown" else "")
    for d in diagnoses[:1]:
        out += ["", meta_line(d, lang), "", d["explanation"]]
        if d["remedies"]:
            out += ["", f"**{label(lang, 'do')}{mark(lang)}**", ""]
            out += [_remedy(n, r, lang) for n, r in enumerate(d["remedies"], 1)]
        if d["avoid"]:
            out += ["", f"**{label(lang, 'avoid')}{mark(lang)}**", ""]
            out += [_avoid(a, lang) for a in d["avoid"]]
        if d["evidence"]:
            out += ["", f"**{label(lang, 'evidence')}{mark(lang)}**", "", "```"]
            out += [f"{e['line']:>6} | {e['text']}" for e in d["evidence"]]
            out += ["```"]
    others = diagnoses[1:]
    if others:
        gap = "" if lang == "zh" else " "
        out += ["", f"**{label(lang, 'also')}{mark(lang)}**{gap}" + sep(lang).join(also_item(d, lang) for d in others)]
    if records.get("notes"):
        out += ["", f"**{label(lang, 'notes')}{mark(lang)}**", ""]
        out += [f"- {note_text(n, lang)}" for n in records["notes"]]
    return "\n".join(line for line in out if line is not None).rstrip() + "\n"
