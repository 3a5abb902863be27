"""Headings in each language the built-in rules ship."""

from __future__ import annotations

from kvdoctor.diagnosis.terms import term

TYPE_CHECKING = False
if TYPE_CHECKING:
    from kvdoctor.diagnosis.terms import Kind

LABELS: dict[str, dict[str, str]] = {
    "en": {
        "verdict": "Verdict",
        "why": "Why",
        "do": "Do this, in order",
        "avoid": "Do NOT",
        "evidence": "Evidence",
        "budget": "Memory budget",
        "attempt": "attempt",
        "notes": "Notes",
        "also": "Also considered",
        "none": "No vLLM start-up found in this input.",
        "rule": "rule",
        "note": "note",
        "error": "error",
        "warning": "warning",
        "info": "info",
        "high": "high confidence",
        "medium": "medium confidence",
        "low": "low confidence",
        "cause": "cause",
        "phase": "phase",
        "attempts": "{n} start-up attempts in {source}; showing the last (lines {start}–{end})",
        "budget_of": " (budget {util} × total)",
        "unused": "unused budget",
        "outside": "outside the fraction",
        "shortened": "… (message shortened: the rest is in the attached snippet / next message)",
    },
    "zh": {
        "verdict": "结论",
        "why": "原因",
        "do": "按顺序这样做",
        "avoid": "不要这样做",
        "evidence": "证据",
        "budget": "显存预算",
        "attempt": "启动尝试",
        "notes": "备注",
        "also": "其他可能",
        "none": "输入中没有找到 vLLM 启动日志。",
        "rule": "规则",
        "note": "备注",
        "error": "错误",
        "warning": "警告",
        "info": "信息",
        "high": "高置信度",
        "medium": "中等置信度",
        "low": "低置信度",
        "cause": "起因",
        "phase": "阶段",
        "attempts": "{source} 中有 {n} 次启动尝试；显示最后一次（第 {start}–{end} 行）",
        "budget_of": "（预算 = {util} × 总显存）",
        "unused": "未用的预算",
        "outside": "比例之外",
        "shortened": "…（消息已缩短：其余内容见附件片段或下一条消息）",
    },
}


def name(lang: str, kind: Kind, value: str) -> str:
    """An id (a class, cause, phase, remedy action, budget figure) as a reader of `lang` calls it;
    the one table is `kvdoctor.diagnosis.terms`, which rule sentences use too."""
    return term(lang, kind, value)


def sep(lang: str) -> str:
    """Between the items of a list: "、" in Chinese, ", " otherwise."""
    return "、" if lang == "zh" else ", "


def label(lang: str, key: str) -> str:
    return LABELS.get(lang, LABELS["en"]).get(key, LABELS["en"][key])


def colon(lang: str) -> str:
    """The colon after a label: full-width in Chinese ("结论："), ": " otherwise."""
    return "：" if lang == "zh" else ": "


def mark(lang: str) -> str:
    """The colon alone (before markup or a line break): "：" in Chinese, ":" otherwise."""
    return "：" if lang == "zh" else ":"
