"""Incident tickets in markdown: find the vLLM logs pasted in them, diagnose each, and keep the
result in a managed section between stable markers. Pure: text in, text out (no files here).

A ticket's blocks: fenced code (``` or ~~~, any info string), `<details>` bodies (vLLM's bug
template puts collect_env there), 4-space indented pastes, and `>` quotes of three lines or more (a
GitHub comment quoting a log). A block is a log when
`diagnose` finds a vLLM start-up in it. A block (or the prose) that is an nvidia-smi paste
becomes the gpu.* facts of the logs that carry none of their own.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from kvdoctor.api import diagnose
from kvdoctor.diagnosis.report import Diagnosis, Report
from kvdoctor.diagnosis.rules import Rule
from kvdoctor.diagnosis.terms import term
from kvdoctor.probe.smi import parse_smi_text
from kvdoctor.render.markdown import render_markdown
from kvdoctor.ticket.words import stated_actions

BEGIN = "<!-- kvdoctor:begin -->"
END = "<!-- kvdoctor:end -->"
FRONT_MATTER_KEYS = ("remedy", "action", "fix", "resolution")

_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_DETAILS_OPEN = re.compile(r"^\s*<details\b", re.IGNORECASE)
_DETAILS_ANY = re.compile(r"<details\b", re.IGNORECASE)
_DETAILS_CLOSE = re.compile(r"</details\s*>", re.IGNORECASE)
_TAGS = re.compile(r"<summary\b.*?</summary\s*>|</?details\b[^>]*>|</?summary\b[^>]*>", re.IGNORECASE)
_STATED = re.compile(
    r"^\s*(?:[-*+]\s+)?(?:#+\s*)?(?:\*\*|__)?"
    r"(fix|fixed by|remedy|resolution|resolved by|workaround)"
    r"\s*(?:\*\*|__)?\s*:\s*(?:\*\*|__)?\s*(?P<text>.+?)\s*$",
    re.IGNORECASE,
)
# Opposite turns of the same knob; the ticket-only ids (raise_max_model_len, …) name what a
# ticket may say it did even though kvdoctor never recommends it.
OPPOSITE: dict[str, str] = {
    "raise_gpu_memory_utilization": "lower_gpu_memory_utilization",
    "lower_gpu_memory_utilization": "raise_gpu_memory_utilization",
    "raise_max_model_len": "lower_max_model_len",
    "raise_max_num_seqs": "reduce_max_num_seqs",
    "raise_max_num_batched_tokens": "reduce_max_num_batched_tokens",
}


class TicketError(Exception):
    """A ticket kvdoctor cannot safely rewrite; the message is one line with `where:line:`."""


class BlockKind(str, enum.Enum):
    FENCED = "fenced"
    DETAILS = "details"
    INDENTED = "indented"
    QUOTED = "quoted"


@dataclass(frozen=True)
class Block:
    kind: BlockKind
    line: int  # ticket line (1-based) of the block's first line
    text: str
    info: str = ""  # the fence's info string


@dataclass(frozen=True)
class Stated:
    text: str
    line: int | None  # ticket line; None: the front matter

    @property
    def where(self) -> str:
        return "front matter" if self.line is None else f"line {self.line}"


@dataclass(frozen=True)
class Ticket:
    lines: tuple[str, ...]  # with their line endings, exactly as read
    front_matter: dict[str, Any]
    managed: tuple[int, int] | None  # 0-based indexes of the begin and end marker lines
    blocks: tuple[Block, ...]
    prose: tuple[tuple[int, str], ...]  # (1-based line, text) outside blocks and markers
    stated: tuple[Stated, ...]


@dataclass(frozen=True)
class LogFinding:
    block: Block
    report: Report


@dataclass(frozen=True)
class Check:
    """How one stated remedy compares with one log's diagnosis."""

    log: int  # 1-based index among the ticket's logs
    stated: Stated
    action: str
    verdict: str
    agrees: bool
    contradicts: bool
    why: str


@dataclass(frozen=True)
class TicketResult:
    original: str
    text: str  # the ticket as it should be (== original when nothing changes)
    logs: tuple[LogFinding, ...]
    checks: tuple[Check, ...]

    @property
    def changed(self) -> bool:
        return self.text != self.original

    @property
    def contradictions(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.contradicts)


# ---- parsing -----------------------------------------------------------------------------


def parse_ticket(text: str, *, where: str = "<ticket>") -> Ticket:
    lines = tuple(text.splitlines(keepends=True))
    bare = [line.rstrip("\r\n") for line in lines]
    front, skip = _front_matter(bare, where)
    managed = _managed(bare, skip, where)
    hidden = set(range(skip)) | (set(range(managed[0], managed[1] + 1)) if managed else set())
    blocks, used = _blocks(bare, hidden)
    prose = tuple((i + 1, bare[i]) for i in range(len(bare)) if i not in hidden | used)
    stated = _stated(front, prose)
    return Ticket(lines, front, managed, tuple(blocks), prose, stated)


def _front_matter(bare: list[str], where: str) -> tuple[dict[str, Any], int]:
    if not bare or bare[0].strip() != "---":
        return {}, 0
    end = next((i for i in range(1, len(bare)) if bare[i].strip() in ("---", "...")), None)
    if end is None:
        return {}, 0  # a thematic break, not front matter
    try:
        data = yaml.safe_load("\n".join(bare[1:end]))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = 2 + (mark.line if mark is not None else 0)
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise TicketError(
            f"{where}:{line}: front matter is not valid YAML ({problem}); fix it or remove the --- lines"
        ) from None
    return (data if isinstance(data, dict) else {}), end + 1


def _managed(bare: list[str], start: int, where: str) -> tuple[int, int] | None:
    begin = end = None
    fence: str | None = None
    for i in range(start, len(bare)):
        fence = _fence_state(bare[i], fence)
        if fence is not None or _FENCE.match(bare[i]):
            continue  # markers shown inside code blocks (docs) are not ours
        if bare[i].strip() == BEGIN and begin is None:
            begin = i
        elif bare[i].strip() == END and begin is not None and end is None:
            end = i
    if begin is None:
        return None
    if end is None:
        raise TicketError(
            f"{where}:{begin + 1}: {BEGIN} has no {END} after it; add the end marker or delete the begin marker"
        )
    return begin, end


def _fence_state(line: str, fence: str | None) -> str | None:
    """The open fence after `line` (its marker), given the one open before it."""
    m = _FENCE.match(line)
    if fence is None:
        if m and not (m.group(2)[0] == "`" and "`" in m.group(3)):
            return m.group(2)
        return None
    if m and m.group(2)[0] == fence[0] and len(m.group(2)) >= len(fence) and not m.group(3).strip():
        return None
    return fence


def _blocks(bare: list[str], hidden: set[int]) -> tuple[list[Block], set[int]]:
    blocks: list[Block] = []
    used: set[int] = set()
    i = 0
    while i < len(bare):
        if i in hidden:
            i += 1
            continue
        nxt = (
            _fenced(bare, i, hidden, blocks)
            or _details(bare, i, hidden, blocks)
            or _indented(bare, i, hidden, blocks)
            or _quoted(bare, i, hidden, blocks)
        )
        if nxt:
            used.update(range(i, nxt))
            i = nxt
        else:
            i += 1
    blocks.sort(key=lambda b: b.line)
    return blocks, used


def _fenced(bare: list[str], i: int, hidden: set[int], out: list[Block]) -> int:
    """Take a fenced block opening at line i; return the index after it (0: none opens here).
    An unclosed fence runs to the end of the document (or of the region), as in CommonMark."""
    m = _FENCE.match(bare[i])
    if not m or _fence_state(bare[i], None) is None:
        return 0
    indent, info = len(m.group(1)), m.group(3).strip()
    fence: str | None = m.group(2)
    j = i + 1
    while j < len(bare) and j not in hidden:
        fence = _fence_state(bare[j], fence)
        if fence is None:
            break
        j += 1
    body = [_dedent(line, indent) for line in bare[i + 1 : j]]
    out.append(Block(BlockKind.FENCED, i + 2, "\n".join(body) + "\n", info))
    return j + 1 if fence is None else j


def _details(bare: list[str], i: int, hidden: set[int], out: list[Block]) -> int:
    if not _DETAILS_OPEN.match(bare[i]):
        return 0
    depth, j = 0, i
    while j < len(bare) and j not in hidden:
        depth += len(_DETAILS_ANY.findall(bare[j]))
        depth -= len(_DETAILS_CLOSE.findall(bare[j]))
        if depth <= 0:
            break
        j += 1
    end = min(j, len(bare) - 1)
    body: list[str] = []
    k = i
    while k <= end:  # fences inside become blocks of their own; their lines blank here
        if k > i and k < end and (nxt := _fenced(bare, k, hidden | {end}, out)):
            body.extend([""] * (nxt - k))
            k = nxt
            continue
        body.append(_TAGS.sub("", bare[k]))
        k += 1
    if any(line.strip() for line in body):
        out.append(Block(BlockKind.DETAILS, i + 1, "\n".join(body) + "\n"))
    return end + 1


def _indented(bare: list[str], i: int, hidden: set[int], out: list[Block]) -> int:
    if not _is_indented(bare[i]) or (i > 0 and bare[i - 1].strip() and i - 1 not in hidden):
        return 0
    j = i
    while j < len(bare) and j not in hidden and (_is_indented(bare[j]) or not bare[j].strip()):
        j += 1
    while j > i and not bare[j - 1].strip():
        j -= 1
    body = [line[1:] if line.startswith("\t") else line[4:] for line in bare[i:j]]
    out.append(Block(BlockKind.INDENTED, i + 1, "\n".join(body) + "\n"))
    return j


def _quoted(bare: list[str], i: int, hidden: set[int], out: list[Block]) -> int:
    """A `>` quote of three lines or more (fences inside it are read with the quote marks off)."""
    if not bare[i].startswith(">") or (i > 0 and bare[i - 1].startswith(">")):
        return 0
    j = i
    while j < len(bare) and j not in hidden and bare[j].startswith(">"):
        j += 1
    if j - i < 3:
        return 0
    body = [line[2:] if line.startswith("> ") else line[1:] for line in bare[i:j]]
    body = ["" if _FENCE.match(line) else line for line in body]  # (line numbers kept)
    out.append(Block(BlockKind.QUOTED, i + 1, "\n".join(body) + "\n"))
    return j


def _is_indented(line: str) -> bool:
    return (line.startswith("    ") or line.startswith("\t")) and bool(line.strip())


def _dedent(line: str, indent: int) -> str:
    stripped = line.lstrip(" ")
    return line[min(indent, len(line) - len(stripped)) :]


def _stated(front: dict[str, Any], prose: Sequence[tuple[int, str]]) -> tuple[Stated, ...]:
    found: list[Stated] = []
    for key, value in front.items():
        if str(key).lower() in FRONT_MATTER_KEYS:
            values = value if isinstance(value, list) else [value]
            found += [Stated(str(v).strip(), None) for v in values if v is not None]
    for number, line in prose:
        m = _STATED.match(line)
        if m:
            found.append(Stated(m.group("text").strip("*_ "), number))
    return tuple(s for s in found if s.text)


# ---- diagnosis ---------------------------------------------------------------------------


def check_ticket(
    text: str,
    *,
    rules: Sequence[Rule] | None = None,
    lang: str | None = None,
    where: str = "<ticket>",
) -> TicketResult:
    """Diagnose every vLLM log in a ticket; the ticket text with its managed section updated."""
    ticket = parse_ticket(text, where=where)
    lang = lang or str(ticket.front_matter.get("lang") or "en")
    logs = find_logs(ticket, rules=rules, lang=lang, where=where)
    checks = tuple(check for n, log in enumerate(logs, 1) for check in compare(n, log.report, ticket.stated))
    if not logs:
        return TicketResult(text, text, logs, checks)
    section = render_section(logs, checks, lang)
    if ticket.managed is not None:  # lines below the section move by its change in length
        begin, end = ticket.managed
        delta = len(section) - (end - begin + 1)
        logs = tuple(_moved_log(log, end, delta) for log in logs)
        checks = tuple(_moved_check(c, end, delta) for c in checks)
        section = render_section(logs, checks, lang)  # same length: only numbers differ
    return TicketResult(text, _with_section(ticket, section), logs, checks)


def _moved_log(log: LogFinding, end: int, delta: int) -> LogFinding:
    if log.block.line <= end:
        return log
    block = dataclasses.replace(log.block, line=log.block.line + delta)
    return dataclasses.replace(log, block=block)


def _moved_check(check: Check, end: int, delta: int) -> Check:
    line = check.stated.line
    if line is None or line <= end:
        return check
    return dataclasses.replace(check, stated=dataclasses.replace(check.stated, line=line + delta))


def find_logs(ticket: Ticket, *, rules: Sequence[Rule] | None, lang: str, where: str) -> tuple[LogFinding, ...]:
    reports = [
        (b, diagnose(b.text.encode("utf-8", "replace"), rules=rules, lang=lang, name=f"{where}:{b.line}"))
        for b in ticket.blocks
    ]
    logs = [(b, r) for b, r in reports if is_log(r)]
    smi = next(
        (parse_smi_text(b.text) for b, r in reports if not is_log(r) and parse_smi_text(b.text) is not None),
        None,
    )
    smi = smi or parse_smi_text("\n".join(text for _, text in ticket.prose))
    if smi is not None:  # a separate nvidia-smi paste speaks for logs that carry none
        logs = [
            (
                b,
                diagnose(b.text.encode("utf-8", "replace"), rules=rules, lang=lang, probe=smi, name=f"{where}:{b.line}")
                if r.probe is None
                else r,
            )
            for b, r in logs
        ]
    return tuple(LogFinding(b, r) for b, r in logs)


def is_log(report: Report) -> bool:
    """A block holds a vLLM log when a start-up was found and something was concluded
    (a pasted `vllm serve` command alone concludes nothing)."""
    return report.verdict != "unknown" and bool(report.diagnoses)


def compare(log: int, report: Report, stated: Sequence[Stated]) -> list[Check]:
    primary = report.diagnoses[0]
    return [
        _check(log, report.verdict, primary, s, action, report.lang)
        for s in stated
        for action in stated_actions(s.text, report.facts)
    ]


def _check(log: int, verdict: str, d: Diagnosis, stated: Stated, action: str, lang: str = "en") -> Check:
    first = d.remedies[0] if d.remedies else None
    avoid = next((a for a in d.avoid if a.action == action), None)
    if avoid is not None:
        return Check(log, stated, action, verdict, False, True, avoid.why)
    if first is not None and OPPOSITE.get(action) == first.action:
        return Check(
            log,
            stated,
            action,
            verdict,
            False,
            True,
            _WORDS.get(lang, _WORDS["en"])["first"].format(action=_action(first.action, lang), text=first.text),
        )
    agrees = any(r.action == action for r in d.remedies)
    return Check(log, stated, action, verdict, agrees, False, "")


# ---- the managed section -----------------------------------------------------------------

_WORDS = {
    "en": {
        "header": "<!-- written by `kvdoctor ticket`; edits between these markers are replaced -->",
        "title": "kvdoctor: {n} vLLM log(s) in this ticket",
        "log": "Log {i} of {n}: {what}",
        "stated": "Stated remedy",
        "contradicts": "**contradicts** log {log} (`{verdict}`): {why}",
        "agrees": "agrees with log {log} (`{verdict}`)",
        "other": "not among the remedies for log {log} (`{verdict}`)",
        "first": "the diagnosis says {action} first: {text}",
        "front matter": "front matter",
        "line": "line {line}",
        "block": "{kind} at line {line} starting `{first}`",
        "kind": "`{info}` block",
        "fenced": "fenced block",
        "details": "details block",
        "indented": "indented block",
        "quoted": "quoted block",
        "stated_line": "- “{text}” ({where}) → {action}: {outcome}",
    },
    "zh": {
        "header": "<!-- 由 `kvdoctor ticket` 生成；标记之间的修改会被覆盖 -->",
        "title": "kvdoctor：本工单中有 {n} 段 vLLM 日志",
        "log": "日志 {i}/{n}：{what}",
        "stated": "工单中给出的修复",
        "contradicts": "与日志 {log}（{verdict}）**矛盾**：{why}",
        "agrees": "与日志 {log}（{verdict}）一致",
        "other": "不在日志 {log}（{verdict}）的建议之中",
        "first": "诊断的第一条建议是{action}：{text}",
        "front matter": "文件头",
        "line": "第 {line} 行",
        "block": "第 {line} 行起的{kind}，开头为 `{first}`",
        "kind": " `{info}` 代码块",
        "fenced": "代码块",
        "details": " <details> 块",
        "indented": "缩进代码块",
        "quoted": "引用块",
        "stated_line": "- “{text}”（{where}）→ {action}：{outcome}",
    },
}


def render_section(logs: Sequence[LogFinding], checks: Sequence[Check], lang: str) -> list[str]:
    """The section's lines (without endings), markers included; deterministic."""
    w = _WORDS.get(lang, _WORDS["en"])
    out = [BEGIN, w["header"], f"### {w['title'].format(n=len(logs))}"]
    for i, log in enumerate(logs, 1):
        what = _describe(log.block, w)
        out += ["", f"#### {w['log'].format(i=i, n=len(logs), what=what)}", ""]
        records = _ticket_lines(log.report.as_records(), log.block.line - 1)
        out += render_markdown(records).rstrip("\n").split("\n")
    if checks:
        out += ["", f"#### {w['stated']}", ""]
        out += [
            w["stated_line"].format(
                text=c.stated.text,
                where=w["front matter"] if c.stated.line is None else w["line"].format(line=c.stated.line),
                action=_action(c.action, lang),
                outcome=_outcome(c, w, lang),
            )
            for c in checks
        ]
    return out + [END]


def _ticket_lines(records: dict[str, Any], offset: int) -> dict[str, Any]:
    """Evidence line numbers of a block -> line numbers in the ticket file."""
    diagnoses = [
        {**d, "evidence": [{**e, "line": e["line"] + offset} for e in d["evidence"]]} for d in records["diagnoses"]
    ]
    return {**records, "diagnoses": diagnoses}


def _action(action: str, lang: str) -> str:
    """A remedy action as the section shows it: the id in code (en), its name (zh)."""
    return term(lang, "action", action) if lang == "zh" else f"`{action}`"


def _outcome(c: Check, w: dict[str, str], lang: str = "en") -> str:
    key = "contradicts" if c.contradicts else "agrees" if c.agrees else "other"
    return w[key].format(log=c.log, verdict=term(lang, "class", c.verdict), why=c.why)


def _describe(block: Block, w: dict[str, str] = _WORDS["en"]) -> str:
    first = next((line.strip() for line in block.text.splitlines() if line.strip()), "")
    first = first.replace("`", "'")
    first = first if len(first) <= 60 else first[:57] + "..."
    kind = w["kind"].format(info=block.info.split()[0]) if block.info else w[block.kind.value]
    return w["block"].format(kind=kind, line=block.line, first=first)


def _with_section(ticket: Ticket, section: list[str]) -> str:
    lines = list(ticket.lines)
    newline = "\r\n" if any(line.endswith("\r\n") for line in lines) else "\n"
    rendered = [line + newline for line in section]
    if ticket.managed is not None:
        begin, end = ticket.managed
        tail = lines[end][len(lines[end].rstrip("\r\n")) :] or newline
        rendered[-1] = section[-1] + tail
        return "".join(lines[:begin] + rendered + lines[end + 1 :])
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += newline
    if lines and lines[-1].strip():
        lines.append(newline)
    return "".join(lines + rendered)
