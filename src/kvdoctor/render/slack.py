"""Block Kit from `Report.as_records()`: verdict, cause, remedies, what to avoid, evidence.

Slack refuses a message with more than 50 blocks or a section text over 3000 characters, and
clips very large messages. The diagnosis itself (verdict, explanation, remedies, avoid list) is
never cut: long texts are split over several sections. Evidence is what gives way: when it does
not fit the budget it is summarised in the message and returned whole in `SlackMessage.overflow`
so the adapter can upload it as a snippet (threads) or send it as a follow-up message.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import accumulate

from kvdoctor.render.labels import colon, label, mark, name, sep
from kvdoctor.render.markdown import also_item
from kvdoctor.render.notes import note_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_BLOCKS = 50
MAX_SECTION = 3000
RESERVED_BLOCKS = 2  # room the adapter keeps for its own blocks (the share button)
MESSAGE_BUDGET = 12000  # characters of block text in one message: far under Slack's limits
MESSAGE_HARD_LIMIT = 24000  # even a pathological diagnosis stops here; the rest goes to overflow
EVIDENCE_LINES = 12  # evidence lines shown inline before the rest moves to the snippet
EVIDENCE_LINE_CHARS = 240
FALLBACK_CHARS = 300
SHARE_ACTION = "kvdoctor_share"
BUTTON_VALUE_CHARS = 2000  # Slack's limit for a button value

# Slack-only strings, per language (headings shared with other outputs come from labels.py).
_SLACK_TEXT: dict[str, dict[str, str]] = {
    "en": {
        "more_evidence": "{n} evidence line(s) in full: see the attached snippet / next message.",
        "share": "Share in channel",
        "shared_by": "Shared by <@{user}>",
        "evidence_file": "kvdoctor evidence",
        "working": "Diagnosing the log…",
    },
    "zh": {
        "more_evidence": "完整的 {n} 行证据见附件片段或下一条消息。",
        "share": "分享到频道",
        "shared_by": "由 <@{user}> 分享",
        "evidence_file": "kvdoctor 证据",
        "working": "正在诊断日志…",
    },
}


def slack_text(lang: str, key: str) -> str:
    return _SLACK_TEXT.get(lang, _SLACK_TEXT["en"]).get(key, _SLACK_TEXT["en"][key])


@dataclass(frozen=True)
class SlackMessage:
    """What to post: `blocks`, the notification `text`, and evidence that did not fit."""

    blocks: tuple[dict[str, Any], ...]
    text: str
    overflow: str | None = None


def chunk_text(text: str, limit: int = MAX_SECTION) -> list[str]:
    """Split at line boundaries, overlong lines at a space, so nothing is lost."""
    chunks: list[str] = []
    current = ""
    for line in text.split("\n"):
        while len(line) > limit:
            if current:
                chunks.append(current)
                current = ""
            cut = line.rfind(" ", limit // 2, limit) + 1 or limit
            chunks.append(line[:cut])
            line = line[cut:]
        candidate = f"{current}\n{line}" if current else line
        if len(candidate) > limit:
            chunks.append(current)
            candidate = line
        current = candidate
    if current or not chunks:
        chunks.append(current)
    return chunks


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text[:MAX_SECTION]}]}


def _sections(text: str) -> list[dict[str, Any]]:
    return [_section(c) for c in chunk_text(text)]


def _code_sections(lines: list[str]) -> list[dict[str, Any]]:
    """Code blocks; each chunk gets its own fences so every section renders on its own."""
    return [_section(f"```{c}```") for c in chunk_text("\n".join(lines), MAX_SECTION - 6)]


def esc(text: Any) -> str:
    """Slack reads &, < and > as markup (links, mentions) in every text field: escape them."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _unesc(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _value(v: Any) -> str:
    return "" if v is None else f" → `{esc(v)}`"


def _dash(lang: str) -> str:
    return "——" if lang == "zh" else " — "


def _headline(records: dict[str, Any], lang: str) -> str:
    diagnoses = records.get("diagnoses") or []
    title = f"{_dash(lang)}{esc(diagnoses[0]['title'])}" if diagnoses else ""
    verdict = esc(name(lang, "class", records["verdict"]))
    return f"*{label(lang, 'verdict')}{colon(lang)}{verdict if lang == 'zh' else f'`{verdict}`'}*{title}"


def fallback_text(records: dict[str, Any], lang: str | None = None) -> str:
    """The notification / screen-reader text of the message."""
    lang = lang or records.get("lang", "en")
    diagnoses = records.get("diagnoses") or []
    title = f"{_dash(lang)}{diagnoses[0]['title']}" if diagnoses else ""
    return esc(f"kvdoctor{colon(lang)}{name(lang, 'class', records['verdict'])}{title}"[:FALLBACK_CHARS])


def _meta(d: dict[str, Any], lang: str) -> str:
    parts = [f"`{d['rule']}`", label(lang, d["severity"]), label(lang, d["confidence"])]
    if lang == "zh":
        parts += [f"{label(lang, k)}{colon(lang)}{esc(name(lang, k, d[k]))}" for k in ("cause", "phase") if d.get(k)]
    else:
        parts += [f"{k}: `{d[k]}`" for k in ("cause", "phase") if d.get(k)]
    return " · ".join(parts)


def _action(action: str, lang: str) -> str:
    return esc(name(lang, "action", action)) if lang == "zh" else f"`{action}`"


def _diagnosis_blocks(d: dict[str, Any], lang: str) -> list[dict[str, Any]]:
    blocks = [_context(_meta(d, lang)), *_sections(f"*{label(lang, 'why')}{mark(lang)}* {esc(d['explanation'])}")]
    if d.get("remedies"):
        lines = [
            f"{n}. {_action(r['action'], lang)}{_value(r['value'])}{colon(lang)}{esc(r['text'])}"
            for n, r in enumerate(d["remedies"], 1)
        ]
        blocks += _sections(f"*{label(lang, 'do')}{mark(lang)}*\n" + "\n".join(lines))
    if d.get("avoid"):
        lines = [f"• {_action(a['action'], lang)}{colon(lang)}{esc(a['why'])}" for a in d["avoid"]]
        blocks += _sections(f"*{label(lang, 'avoid')}{mark(lang)}* :no_entry_sign:\n" + "\n".join(lines))
    return blocks


def evidence_lines(d: dict[str, Any]) -> list[str]:
    return [f"{e['line']:>6} | {e['text']}" for e in d.get("evidence") or []]


def _clip(line: str) -> str:
    return line if len(line) <= EVIDENCE_LINE_CHARS else line[: EVIDENCE_LINE_CHARS - 1] + "…"


def _evidence_blocks(full: list[str], lang: str, room: int) -> tuple[list[dict[str, Any]], bool]:
    """Inline evidence that fits `room` characters; True when some of it went to the overflow."""
    shown = [esc(_clip(x)) for x in full[:EVIDENCE_LINES]]
    cut = len(shown) < len(full) or any(len(x) > EVIDENCE_LINE_CHARS for x in full[:EVIDENCE_LINES])
    while shown and len("\n".join(shown)) > room:
        shown.pop()
        cut = True
    blocks = [_section(f"*{label(lang, 'evidence')}{mark(lang)}*")] if full else []
    if shown:
        blocks += _code_sections(shown)
    if cut:
        blocks.append(_context(slack_text(lang, "more_evidence").format(n=len(full))))
    return blocks, cut


def _size(blocks: list[dict[str, Any]]) -> int:
    return sum(len(_block_text(b)) for b in blocks)


def _block_text(block: dict[str, Any]) -> str:
    if "text" in block:
        return str(block["text"]["text"])
    return "".join(str(e.get("text", "")) for e in block.get("elements", []))


def _tail_blocks(records: dict[str, Any], lang: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    others = (records.get("diagnoses") or [])[1:]
    if others:
        out.append(
            _context(f"*{label(lang, 'also')}{mark(lang)}* " + sep(lang).join(also_item(d, lang) for d in others))
        )
    notes = records.get("notes") or []
    if notes:
        shown = " / ".join(esc(note_text(n, lang)) for n in notes)
        out.append(_context(f"*{label(lang, 'notes')}{mark(lang)}* {shown}"))
    return out


def render_blocks(records: dict[str, Any], *, lang: str | None = None) -> SlackMessage:
    """Block Kit message for a report record (the dict of `Report.as_records()`)."""
    lang = lang or records.get("lang", "en")
    diagnoses = records.get("diagnoses") or []
    blocks = _sections(_headline(records, lang))
    if not diagnoses:
        blocks += _sections(label(lang, "none") if records["verdict"] == "unknown" else "—")
    primary = diagnoses[0] if diagnoses else None
    if primary is not None:
        blocks += _diagnosis_blocks(primary, lang)
    tail = _tail_blocks(records, lang)
    overflow = None
    if primary is not None and primary.get("evidence"):
        full = evidence_lines(primary)
        block_room = MAX_BLOCKS - RESERVED_BLOCKS - len(blocks) - len(tail) - 2
        room = min(MESSAGE_BUDGET - _size(blocks) - _size(tail), max(block_room, 0) * (MAX_SECTION - 6))
        ev_blocks, cut = _evidence_blocks(full, lang, max(room, 0))
        blocks += ev_blocks
        overflow = "\n".join(full) if cut else None
    blocks += tail
    kept, spilled = _fit(blocks, lang)
    if spilled:
        overflow = "\n\n".join([spilled, overflow] if overflow else [spilled])
    return SlackMessage(tuple(kept), fallback_text(records, lang), overflow)


def _fit(blocks: list[dict[str, Any]], lang: str = "en") -> tuple[list[dict[str, Any]], str]:
    """Last guard for a pathological diagnosis (dozens of long remedies): keep the blocks that
    fit the block and size limits, and hand the text of the rest back for the overflow."""
    limit = MAX_BLOCKS - RESERVED_BLOCKS
    sizes = list(accumulate(len(_block_text(b)) for b in blocks))
    if len(blocks) <= limit and (not sizes or sizes[-1] <= MESSAGE_HARD_LIMIT):
        return blocks, ""
    keep = min(limit - 1, sum(1 for total in sizes if total <= MESSAGE_HARD_LIMIT))
    note = _context(label(lang, "shortened"))
    rest = "\n".join(_block_text(b) for b in blocks[keep:])
    return blocks[:keep] + [note], _unesc(rest)


def overflow_messages(overflow: str, lang: str, *, per_message: int = 4) -> list[SlackMessage]:
    """Full evidence as follow-up messages (for replies that cannot carry a file)."""
    chunks = chunk_text(esc(overflow), MAX_SECTION - 6)
    out = []
    for start in range(0, len(chunks), per_message):
        part = chunks[start : start + per_message]
        blocks = [_section(f"*{label(lang, 'evidence')}{mark(lang)}*")] + [_section(f"```{c}```") for c in part]
        out.append(SlackMessage(tuple(blocks), f"kvdoctor {label(lang, 'evidence')}"))
    return out


# ---- the share button carries its own report (no server-side state) ----


def pack_share(records: Mapping[str, Any]) -> str | None:
    """The report, slimmed, zlib'ed and base64'ed into a button value; None if it cannot fit."""
    diagnoses = list(records.get("diagnoses") or [])
    for evidence_lines in (EVIDENCE_LINES, 3, 0):
        slim = {
            "verdict": records["verdict"],
            "lang": records.get("lang", "en"),
            "diagnoses": [_slim(d, evidence_lines) for d in diagnoses[:1]]
            + [{"rule": d["rule"], "class": d["class"]} for d in diagnoses[1:]],
            "notes": [],
        }
        raw = json.dumps(slim, ensure_ascii=False, separators=(",", ":")).encode()
        value = base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode()
        if len(value) <= BUTTON_VALUE_CHARS:
            return value
    return None


def _slim(d: Mapping[str, Any], evidence_lines: int) -> dict[str, Any]:
    out = {
        k: d[k]
        for k in (
            "rule",
            "class",
            "cause",
            "phase",
            "severity",
            "confidence",
            "title",
            "explanation",
            "remedies",
            "avoid",
        )
    }
    out["evidence"] = [
        {"line": e["line"], "text": e["text"][:EVIDENCE_LINE_CHARS]} for e in (d.get("evidence") or [])[:evidence_lines]
    ]
    return out


def unpack_share(value: str) -> dict[str, Any] | None:
    try:
        raw = zlib.decompressobj().decompress(base64.urlsafe_b64decode(value.encode()), 1 << 20)
        data = json.loads(raw)
    except (ValueError, zlib.error):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("verdict"), str) else None


def share_button(records: Mapping[str, Any], lang: str) -> list[dict[str, Any]]:
    value = pack_share(records)
    if value is None:
        return []
    button = {
        "type": "button",
        "action_id": SHARE_ACTION,
        "value": value,
        "text": {"type": "plain_text", "text": slack_text(lang, "share")},
    }
    return [{"type": "actions", "elements": [button]}]


def message_payload(
    message: SlackMessage,
    extra_blocks: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {"text": message.text, "blocks": [*message.blocks, *(extra_blocks or [])]}
