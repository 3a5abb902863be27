"""The report's notes in the reader's language (issue 16).

Notes are written in English where they arise (`api.py`, `reader/pipeline.py`), and JSON keeps
them so; what a person reads (text, markdown, Slack, tickets) says them in Chinese under
`--lang zh`. A note not listed here is shown as written. Keep the patterns in step with the
sentences they translate: `tests/test_zh_output.py` makes every note kvdoctor writes pass here."""

from __future__ import annotations

import re

from kvdoctor.diagnosis.terms import term

_WHERE = r"(?P<where>the live GPU probe|the GPU snapshot)"
_WHERE_ZH = {"the live GPU probe": "实时 GPU 探测", "the GPU snapshot": "GPU 快照"}
_WHAT_ZH = {"weights per GPU": "每卡权重", "KV cache tokens": "KV 缓存 token 数"}

_ZH: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"^the log is in newest-first order \(timestamps run backwards\); read it oldest-first$"),
        "日志是从新到旧排列的（时间戳倒退）；请按从旧到新的顺序阅读",
    ),
    (
        re.compile(r"^(?P<src>.+): read error after partial input \((?P<exc>.*)\); the rest is ignored$"),
        "{src}：读到一半时读取出错（{exc}）；其余部分被忽略",
    ),
    (
        re.compile(
            r"^nvidia-smi output found in the log \(line (?P<line>\d+)\); its figures are used as gpu\.\* facts$"
        ),
        "日志中有 `nvidia-smi` 输出（第 {line} 行）；其中的数字用作 `gpu.*` 事实",
    ),
    (
        re.compile(
            r"^the last start-up \(lines (?P<a>\d+)-(?P<b>\d+)\) shows no outcome yet; "
            r"the verdict is that of the one before \(lines (?P<c>\d+)-(?P<d>\d+)\)$"
        ),
        "最后一次启动（第 {a}–{b} 行）还没有结果；结论来自前一次启动（第 {c}–{d} 行）",
    ),
    (
        re.compile(
            r"^an earlier start-up in this log \(lines (?P<a>\d+)-(?P<b>\d+)\) failed \((?P<verdict>\w+)\); "
            r"a later one started$"
        ),
        "日志中更早的一次启动（第 {a}–{b} 行）失败了（{verdict}）；之后的一次启动成功",
    ),
    (
        re.compile(
            r"^(?P<what>weights per GPU|KV cache tokens): the log says (?P<a>\S+), "
            r"the catalog estimate for (?P<model>.+) is (?P<b>\S+); the log's figure is used$"
        ),
        "{what}：日志为 {a}，kvdoctor 内置目录对 {model} 的估算为 {b}；采用日志中的数字",
    ),
    (
        re.compile(f"^{_WHERE} is unavailable \\((?P<reason>.*)\\); the diagnosis uses the log only$"),
        "{where}不可用（{reason}）；诊断只依据日志",
    ),
    (
        re.compile(
            f"^{_WHERE} (?P<state>confirms|adds to) the diagnosis: (?P<n>\\d+) other process\\(es\\) "
            r"(?P<pids>\[.*\]) hold (?P<gib>\S+) GiB$"
        ),
        "{where}{state}诊断：{n} 个其他进程 {pids} 占用 {gib} GiB",
    ),
    (
        re.compile(f"^{_WHERE} names no process, but shows (?P<gib>\\S+) GiB in use on the device$"),
        "{where}没有列出进程，但显示设备上已用 {gib} GiB",
    ),
    (
        re.compile(f"^{_WHERE} contradicts the diagnosis: no other process holds memory now$"),
        "{where}与诊断不符：现在没有其他进程占用显存",
    ),
    (re.compile(f"^{_WHERE} was taken at (?P<taken>.+)$"), "{where}的时间：{taken}"),
    (
        re.compile(f"^{_WHERE} was taken after the failure: memory held then may already be released$"),
        "{where}是在失败之后获取的：当时被占用的显存可能已经释放",
    ),
    (
        re.compile(r"^no vLLM start-up lines found: is this the log of the vLLM server \(stdout and stderr\)\?$"),
        "没有找到 vLLM 启动日志：这是 vLLM 服务的日志（stdout 和 stderr）吗？",
    ),
)
_STATE_ZH = {"confirms": "证实了", "adds to": "补充了"}


def note_text(note: str, lang: str) -> str:
    """`note` as a reader of `lang` reads it."""
    if lang != "zh":
        return note
    for pattern, zh in _ZH:
        m = pattern.match(note)
        if m is not None:
            parts = m.groupdict()
            if "where" in parts:
                parts["where"] = _WHERE_ZH[parts["where"]]
            if "state" in parts:
                parts["state"] = _STATE_ZH[parts["state"]]
            if "what" in parts:
                parts["what"] = _WHAT_ZH[parts["what"]]
            if "verdict" in parts:
                parts["verdict"] = term(lang, "class", parts["verdict"])
            return zh.format(**parts)
    return note


__all__ = ["note_text"]
