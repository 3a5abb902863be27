"""Every rule's texts render into clean sentences (issue 17): with every fact they cite known, and
with none known, in English and Chinese — no leftover markers, no empty segments, no dangling
punctuation. A nested `[[ … ]]` is a bug the renderer cannot handle, so it is rejected as written."""

from __future__ import annotations

import re

import pytest

from kvdoctor.diagnosis.engine import _OPTIONAL, _TEMPLATE, pick, render_template
from kvdoctor.diagnosis.rules import rules_for
from kvdoctor.reader.facts import Fact

RULES = rules_for([])
BAD = re.compile(r"\[\[|\]\]|\{|\}|\. \.|\s[.,;:](?!\d)|\(\s*\)|（\s*）|。。|，。|\?\s*GiB")


def _texts(rule):  # type: ignore[no-untyped-def]
    yield "title", rule.title
    yield "explain", rule.explain
    for i, remedy in enumerate(rule.remedies):
        yield f"remedies[{i}]", remedy.text
    for i, avoid in enumerate(rule.avoid):
        yield f"avoid[{i}]", avoid.why


CASES = [(rule, where, text) for rule in RULES for where, text in _texts(rule)]


@pytest.mark.parametrize(("rule", "where", "text"), CASES, ids=[f"{r.id}:{w}" for r, w, _ in CASES])
def test_a_text_renders_cleanly_with_every_fact_and_with_none(rule, where, text) -> None:  # type: ignore[no-untyped-def]
    for lang in ("en", "zh"):
        template = pick(text, lang)
        for segment in _OPTIONAL.findall(template):
            assert "[[" not in segment, f"{rule.id} {where} ({lang}): a nested [[ … ]] is not rendered"
        names = {m.group(1) for m in _TEMPLATE.finditer(template)}
        everything = {n: Fact(n, 1.5, None, None, True, "log") for n in names}
        for facts in (everything, {}):
            out = render_template(template, facts, {"value": 1.5 if facts else None})
            # a required fact that is unknown renders as "?": only the all-known pass must be clean
            if not facts and "?" in out:
                continue
            found = BAD.search(out)
            assert found is None, f"{rule.id} {where} ({lang}): {found.group(0)!r} in {out!r}"


def test_a_figure_that_rounds_to_zero_is_never_negative_zero() -> None:
    out = render_template("left {kv:.2f} GiB", {"kv": Fact("kv", -0.001, None, None, True, "log")})
    assert out == "left 0.00 GiB"


@pytest.mark.parametrize(("rule", "where", "text"), CASES, ids=[f"{r.id}:{w}" for r, w, _ in CASES])
def test_the_chinese_text_cites_the_same_figures_as_the_english(rule, where, text) -> None:  # type: ignore[no-untyped-def]
    """zh must tell the operator the same numbers as en (issue 16): the same facts, no fewer."""
    assert "zh" in text, f"{rule.id} {where}: no zh text"
    en = {m.group(1) for m in _TEMPLATE.finditer(text["en"])}
    zh = {m.group(1) for m in _TEMPLATE.finditer(text["zh"])}
    assert en == zh, f"{rule.id} {where}: en only {sorted(en - zh)}, zh only {sorted(zh - en)}"


def test_chinese_output_says_kvdoctors_own_notes_in_chinese_without_stray_spaces() -> None:
    from kvdoctor.api import diagnose

    log = "python3 -m vllm.entrypoints.openai.api_server --model /LLMs/Qwen-72B-Chat --tensor-parallel-size 4\n"
    log += "ValueError: No available memory for the cache blocks.\n"
    text = diagnose(log, lang="zh").diagnoses[0].explanation
    assert "vLLM 的默认值：日志没有显示比例" in text and "模型名中的 72B 参数量" in text
    assert "vLLM's default" not in text and "。 日志" not in text


def test_the_chinese_meta_line_and_notes_are_in_chinese() -> None:
    from pathlib import Path

    from kvdoctor.api import diagnose
    from kvdoctor.render import render

    out = render(diagnose(Path(__file__).parents[1] / "examples" / "max-model-len-too-large.log", lang="zh"), "text")
    assert "规则 max-model-len-too-large · 错误 · 高置信度" in out and "confidence" not in out


_FULL_WIDTH_GAP = re.compile(r"\s[，。；：（）、！？]|[，。；：（）、！？]\s")


@pytest.mark.parametrize(("rule", "where", "text"), CASES, ids=[f"{r.id}:{w}" for r, w, _ in CASES])
def test_no_half_width_space_sits_beside_full_width_punctuation(rule, where, text) -> None:  # type: ignore[no-untyped-def]
    """YAML folding and optional segments leave spaces ("GiB 。", "， 4"); Chinese puts none there."""
    template = pick(text, "zh")
    names = {m.group(1) for m in _TEMPLATE.finditer(template)}
    for facts in ({n: Fact(n, 1.5, None, None, True, "log") for n in names}, {}):
        out = render_template(template, facts, {"value": 1.5 if facts else None}, "zh")
        found = _FULL_WIDTH_GAP.search(out)
        assert found is None, f"{rule.id} {where}: {found.group(0)!r} in {out!r}"
