"""Chinese output a Chinese operator trusts (issue 16).

Golden tests: the exact zh output (text at 80 and 100 columns, markdown, Slack blocks, the ticket
section) of real logs of each class, compared with files in tests/fixtures/zh/ that were read and
checked by eye. A change that alters them is either a regression or a new golden to check the
same way (regenerate with `KVDOCTOR_WRITE_GOLDEN=1 pytest tests/test_zh_output.py`, then read
the diff before committing it).

And a sweep: zh output of every log the rules are tested on shows no English prose and no id
outside flags, file names, code, units, quoted log lines and the words docs/zh-glossary.md keeps
as written."""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from kvdoctor.api import diagnose
from kvdoctor.diagnosis.report import Report
from kvdoctor.diagnosis.rules import ACTIONS, CAUSES, CLASSES, PHASES, rules_for
from kvdoctor.diagnosis.terms import FACT_KINDS, ZH
from kvdoctor.render import render
from kvdoctor.render.notes import note_text
from kvdoctor.render.slack import render_blocks
from kvdoctor.ticket.sections import check_ticket

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "fixtures" / "corpus"
GOLDEN = ROOT / "tests" / "fixtures" / "zh"
WRITE = bool(os.environ.get("KVDOCTOR_WRITE_GOLDEN"))

# one real log per class (and the causes and phases whose texts differ most)
LOGS = {
    "max-len": ROOT / "examples" / "max-model-len-too-large.log",
    "profile-peak": ROOT / "examples" / "profile-peak-no-cache-blocks.log",
    "second-instance": ROOT / "examples" / "second-instance-no-cache-blocks.log",
    "free-memory": next(CORPUS.glob("027-*.log")),
    "graph-capture": next(CORPUS.glob("036-*.log")),
    "co-tenant-oom": next(CORPUS.glob("042-*.log")),
    "mamba": next(CORPUS.glob("078-*.log")),
    "no-root-cause": next(CORPUS.glob("069-*.log")),
    "healthy": next(CORPUS.glob("054-*.log")),
}
TICKETS = ("INC-0021-lowered-maxlen.md", "INC-0081-raised-util.md")


@cache
def report(key: str) -> Report:
    return diagnose(LOGS[key], lang="zh")


def _golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if WRITE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(actual, encoding="utf-8")
    expected = path.read_text(encoding="utf-8")
    assert actual.splitlines() == expected.splitlines()


def _slack_text(blocks: Any) -> str:
    out = []
    for block in blocks:
        text = block.get("text", {}).get("text") or "".join(e.get("text", "") for e in block.get("elements", []))
        out.append(f"[{block['type']}]\n{text}")
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("width", [80, 100])
@pytest.mark.parametrize("key", list(LOGS))
def test_zh_text_at_a_terminal_width_is_the_golden_one(key: str, width: int) -> None:
    _golden(f"{key}.text{width}.txt", render(report(key), "text", lang="zh", width=width))


@pytest.mark.parametrize("key", list(LOGS))
def test_zh_markdown_is_the_golden_one(key: str) -> None:
    _golden(f"{key}.md", render(report(key), "markdown", lang="zh"))


@pytest.mark.parametrize("key", list(LOGS))
def test_zh_slack_blocks_are_the_golden_ones(key: str) -> None:
    message = render_blocks(report(key).as_records())
    _golden(f"{key}.slack.txt", f"[text]\n{message.text}\n" + _slack_text(message.blocks))


@pytest.mark.parametrize("name", TICKETS)
def test_zh_ticket_section_is_the_golden_one(name: str) -> None:
    text = (ROOT / "tests" / "fixtures" / "tickets" / name).read_text(encoding="utf-8")
    result = check_ticket(text, lang="zh", where=name)
    section = result.text[result.text.index("<!-- kvdoctor:begin -->") :]
    _golden(f"{Path(name).stem}.ticket.md", section)


# ---- no English outside what is kept as written ----------------------------------------------


@cache
def kept_words() -> frozenset[str]:
    glossary = (ROOT / "docs" / "zh-glossary.md").read_text(encoding="utf-8")
    return frozenset(re.findall(r"`([^`\s]+)`", glossary.split("## 保留原文的词", 1)[1]))


# strings from the log or the catalog, shown as they are (exception text, frames, device names)
_QUOTED_FACTS = (
    "error_type",
    "error_message",
    "failing_function",
    "failing_file",
    "traceback_function",
    "trainer_oom_file",
    "failed_while_serving",
    "environment_reason",
    "no_gpu_reason",
    "unified_memory_device",
    "process_list_command",
    "oom_while_serving",
    "smallest_card_name",
    "model_catalog_id",
)
_IDS = frozenset(CLASSES + CAUSES + PHASES + ACTIONS)


def _rule_id(m: re.Match[str], rule_ids: frozenset[str]) -> str:
    """A rule id (a file name: rules/<id>.yaml) is kept as written; a one-word id ("healthy") only
    where a rule is named: after 规则, or before the （class） of "also considered"."""
    word = m.group(2)
    return " " if word in rule_ids and ("-" in word or m.group(1) or m.group(3)) else m.group(0)


def english_left(out: str, facts: dict[str, Any], rule_ids: frozenset[str]) -> list[str]:
    """The English words of zh output that are not flags, files, code, units, quoted log text,
    rule ids, the budget bar's glyphs or kept words."""
    lines = []
    evidence = False
    for line in re.sub(r"```.*?```", " ", out, flags=re.S).splitlines():  # quoted log lines
        if line == "证据":  # the text report's evidence: the log's lines, indented
            evidence = True
        elif not (evidence and line.startswith(" ")):
            evidence = False
            if not line.startswith("|") and not re.fullmatch(r"\[\w+\]", line):  # the bar; a block's type
                lines.append(line)
    text = "\n".join(lines)
    for name in _QUOTED_FACTS:
        value = facts.get(name)
        if isinstance(value, str) and value:
            text = text.replace(value, " ")
    text = re.sub(r"`[^`]*`", " ", text)  # code (and rule ids in markdown)
    text = re.sub(r'"[^"]*"|“[^”]*”', " ", text)  # quoted log text, a ticket's own words
    text = re.sub(r"<!--.*?-->", " ", text)
    text = re.sub(r"(?<![\w-])--?[A-Za-z][\w.-]*(=\S*)?", " ", text)  # flags
    text = re.sub(r"(规则 )?([A-Za-z][\w-]*)(?=(（)?)", lambda m: _rule_id(m, rule_ids), text)
    # names with a digit, "_", "/" or "." in them: parameters, files, paths, versions, kernels
    text = re.sub(r"[\w./:*+-]*(?:[_/.\d])[\w./:*+-]*", lambda m: " " if m.group(0) not in _IDS else m.group(0), text)
    text = re.sub(r"(?:^|(?<=\s))[WANGK](?= )", " ", text, flags=re.M)  # the ASCII bar's legend glyphs
    text = re.sub(r"&\w+;", " ", text)  # Slack's escapes (&lt;)
    words = re.findall(r"[A-Za-z][A-Za-z'-]*", text)
    return [w for w in words if w not in kept_words() and not re.fullmatch(r"\w*(?:Error|Exception)", w)]


@pytest.mark.parametrize(
    "text",
    [
        "PyTorch 在 unknown 阶段无法分配",
        "启动停在 sampler_warmup 阶段",
        "free 显存从 1 GiB 变为 2 GiB",
        "结论：no_cache_blocks",
    ],
)
def test_the_sweep_sees_english_ids_and_words(text: str) -> None:
    assert english_left(text, {}, frozenset(r.id for r in rules_for([])))


def _sources() -> list[tuple[str, Path | str]]:
    found: dict[str, Path | str] = {p.name: p for p in sorted(CORPUS.glob("*.log"))}
    found.update({p.name: p for p in sorted((ROOT / "examples").glob("*.log"))})
    for rule in rules_for([]):
        for i, example in enumerate(rule.examples):
            if example.expect != "fires":
                continue
            if example.log is not None:
                found[f"{rule.id}#{i}"] = example.log
            elif example.path is not None and Path(example.path).exists():
                found.setdefault(Path(example.path).name, Path(example.path))
    return sorted(found.items())


SOURCES = _sources()


@pytest.mark.parametrize(("where", "source"), SOURCES, ids=[s[0][:48] for s in SOURCES])
def test_zh_output_holds_no_english_prose_or_ids(where: str, source: Path | str) -> None:
    rep = diagnose(source, lang="zh")
    rule_ids = frozenset(r.id for r in rules_for([]))
    records = rep.as_records()
    for fmt in ("text", "markdown"):
        left = english_left(render(rep, fmt, lang="zh", width=100), rep.facts, rule_ids)
        assert not left, f"{where} ({fmt}): English in zh output: {sorted(set(left))}"
    slack = render_blocks(records)
    left = english_left(_slack_text(slack.blocks), rep.facts, rule_ids)
    assert not left, f"{where} (slack): English in zh output: {sorted(set(left))}"


def test_every_rule_fires_in_the_sweep() -> None:
    """The sweep above reaches every built-in rule (a companion note beside another verdict)."""
    fired = {d.rule for _, source in SOURCES for d in diagnose(source, lang="zh").diagnoses}
    assert {r.id for r in rules_for([])} - fired == set()


def _zh_texts() -> list[tuple[str, str]]:
    out = []
    for rule in rules_for([]):
        texts = [("title", rule.title), ("explain", rule.explain)]
        texts += [(f"remedies[{i}]", r.text) for i, r in enumerate(rule.remedies)]
        texts += [(f"avoid[{i}]", a.why) for i, a in enumerate(rule.avoid)]
        out += [(f"{rule.id}:{where}", text.get("zh", "")) for where, text in texts]
    return out


ZH_TEXTS = _zh_texts()


@pytest.mark.parametrize(("where", "text"), ZH_TEXTS, ids=[w for w, _ in ZH_TEXTS])
def test_no_zh_rule_text_holds_english_prose(where: str, text: str) -> None:
    """Every zh text as written, the cited figures aside (a companion rule's remedies never reach
    the sweep's output in full)."""
    bare = re.sub(r"\{[^{}]*\}|\[\[|\]\]", " ", text)
    left = english_left(bare, {}, frozenset())
    assert not left, f"{where}: English in a zh text: {sorted(set(left))}"


def test_every_id_and_fact_value_has_a_zh_name() -> None:
    assert set(CLASSES) <= set(ZH["class"]) and set(CAUSES) <= set(ZH["cause"])
    assert set(PHASES) <= set(ZH["phase"]) and set(ACTIONS) <= set(ZH["action"])
    assert set(FACT_KINDS.values()) <= set(ZH)


@pytest.mark.parametrize(
    ("note", "zh"),
    [
        (
            "the log is in newest-first order (timestamps run backwards); read it oldest-first",
            "日志是从新到旧排列的（时间戳倒退）；请按从旧到新的顺序阅读",
        ),
        (
            "nvidia-smi output found in the log (line 12); its figures are used as gpu.* facts",
            "日志中有 `nvidia-smi` 输出（第 12 行）；其中的数字用作 `gpu.*` 事实",
        ),
        (
            "the last start-up (lines 40-52) shows no outcome yet; the verdict is that of the one before (lines 1-39)",
            "最后一次启动（第 40–52 行）还没有结果；结论来自前一次启动（第 1–39 行）",
        ),
        (
            "weights per GPU: the log says 14.99, the catalog estimate for qwen2.5-7b is 15.2; the log's figure is used",
            "每卡权重：日志为 14.99，kvdoctor 内置目录对 qwen2.5-7b 的估算为 15.2；采用日志中的数字",
        ),
        (
            "the GPU snapshot confirms the diagnosis: 1 other process(es) [733104] hold 30.0 GiB",
            "GPU 快照证实了诊断：1 个其他进程 [733104] 占用 30.0 GiB",
        ),
        (
            "the live GPU probe is unavailable (no NVML); the diagnosis uses the log only",
            "实时 GPU 探测不可用（no NVML）；诊断只依据日志",
        ),
        (
            "the GPU snapshot contradicts the diagnosis: no other process holds memory now",
            "GPU 快照与诊断不符：现在没有其他进程占用显存",
        ),
        ("the GPU snapshot was taken at 2025-01-02 10:00", "GPU 快照的时间：2025-01-02 10:00"),
        (
            "the live GPU probe was taken after the failure: memory held then may already be released",
            "实时 GPU 探测是在失败之后获取的：当时被占用的显存可能已经释放",
        ),
        (
            "no vLLM start-up lines found: is this the log of the vLLM server (stdout and stderr)?",
            "没有找到 vLLM 启动日志：这是 vLLM 服务的日志（stdout 和 stderr）吗？",
        ),
        (
            "x.log.gz: read error after partial input (CRC check failed); the rest is ignored",
            "x.log.gz：读到一半时读取出错（CRC check failed）；其余部分被忽略",
        ),
    ],
)
def test_every_note_kvdoctor_writes_is_said_in_chinese(note: str, zh: str) -> None:
    assert note_text(note, "zh") == zh and note_text(note, "en") == note


def test_the_notes_written_in_code_are_the_ones_translated() -> None:
    """The fixed notes of api.py and reader/pipeline.py match a zh pattern as they are written."""
    from kvdoctor.api import NO_STARTUP_NOTE

    assert note_text(NO_STARTUP_NOTE, "zh") != NO_STARTUP_NOTE
    rep = diagnose(next(CORPUS.glob("036-*.log")), lang="zh")
    assert rep.notes and all(note_text(n, "zh") != n for n in rep.notes)


def test_a_stated_fix_against_the_first_remedy_is_said_in_chinese() -> None:
    log = LOGS["max-len"].read_text(encoding="utf-8")
    result = check_ticket(f"# incident\n\nFix: raised --max-model-len to 2000000\n\n```\n{log}```\n", lang="zh")
    assert result.text.splitlines()[-2] == (
        "- “raised --max-model-len to 2000000”（第 3 行）→ 调高 max_model_len：与日志 1（max_model_len 过大）"
        "**矛盾**：诊断的第一条建议是降低 max_model_len：降低 --max-model-len 到 809984（不超过可容纳长度的任意值）。"
    )
