"""CJK-aware layout of the text report (issue 16): lines break between Chinese characters and stay
full, never start with `，。；：）` or end with `（`, keep a number with its unit and a code span
whole, continue a remedy under its text (a hanging indent), and fit the terminal's width in
cells; the budget bar is drawn in ASCII where its glyphs' width is ambiguous."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvdoctor.api import diagnose
from kvdoctor.render import render
from kvdoctor.render.cjk import NO_END, NO_START, cell_width, wrap
from kvdoctor.render.text import render_text

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.log"))
CORPUS = ROOT / "tests" / "fixtures" / "corpus"
LOGS = [*EXAMPLES, *(next(CORPUS.glob(f"{n}-*.log")) for n in ("027", "036", "042", "078", "069", "054", "087"))]


def test_a_run_of_chinese_breaks_between_characters_and_fills_its_lines() -> None:
    text = "显存预算没问题，是上下文长度设得太长" * 4
    lines = wrap(text, 20)
    assert len(lines) > 3 and all(cell_width(line) <= 20 for line in lines)
    assert all(cell_width(line) >= 18 for line in lines[:-1])  # full, not one "word" per line
    assert "".join(lines) == text


def test_no_line_starts_with_closing_punctuation_or_ends_with_an_opening_one() -> None:
    text = "调高它（显卡没有其他占用时可到 0.9–0.95）能给 KV 缓存留出更长序列的空间。然后：再试，好。"
    for width in range(8, 40):
        lines = wrap(text, width)
        assert not any(line[0] in NO_START for line in lines[1:]), (width, lines)
        assert not any(line[-1] in NO_END for line in lines), (width, lines)


@pytest.mark.parametrize("width", range(16, 40))  # the code span is 15 cells wide
def test_a_number_keeps_its_unit_and_a_code_span_stays_whole(width: int) -> None:
    text = "KV 缓存可容纳 17.39 GiB，用 `nvidia-smi -q` 查看，还需 22.5 GiB 和 8192 个 token"
    lines = wrap(text, width)
    joined = "\n".join(lines)
    for whole in ("17.39 GiB", "`nvidia-smi -q`", "22.5 GiB", "8192 个"):
        assert whole in joined, (width, lines)


def test_a_code_span_wider_than_the_line_breaks_at_its_spaces() -> None:
    lines = wrap("用 `nvidia-smi --query-compute-apps=pid,used_memory --format=csv` 查看", 30)
    assert lines == ["用 `nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv` 查看"]


def test_width_is_counted_in_terminal_cells() -> None:
    assert cell_width("显存 GiB") == 8 and cell_width("·") == 1 and cell_width("·", wide_ambiguous=True) == 2


@pytest.mark.parametrize("width", [60, 80, 100])
@pytest.mark.parametrize("log", LOGS, ids=[p.name[:30] for p in LOGS])
def test_zh_text_fits_the_width_and_puts_punctuation_where_chinese_puts_it(log: Path, width: int) -> None:
    out = render(diagnose(log, lang="zh"), "text", lang="zh", width=width)
    lines = out.splitlines()
    for line in lines:
        body = line.strip()
        if cell_width(line, wide_ambiguous=True) > width:  # only past an unbreakable token (a long path)
            assert any(cell_width(token) > width // 2 for token in body.split()), line
        assert not body or body[0] not in "，。；：）、", line
        assert not line.endswith("（"), line


def test_wrapped_remedy_and_avoid_lines_hang_under_their_text() -> None:
    out = render(diagnose(ROOT / "examples" / "max-model-len-too-large.log", lang="zh"), "text", width=80)
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(" 2. 调高 gpu_memory_utilization："))
    assert lines[first + 1].startswith("    --gpu-memory-utilization") and lines[first + 2].startswith("    0.9–0.95")


def test_piped_zh_text_is_one_line_per_paragraph() -> None:
    out = render(diagnose(ROOT / "examples" / "max-model-len-too-large.log", lang="zh"), "text")
    why = out.split("原因\n", 1)[1].split("\n")[0]
    assert why.startswith("--max-model-len 1048576 的一条请求所需的 KV 缓存") and why.endswith("是上下文长度设得太长。")


def test_the_zh_budget_bar_is_ascii_and_its_legend_is_chinese() -> None:
    report = diagnose(ROOT / "examples" / "profile-peak-no-cache-blocks.log", lang="zh")
    out = render(report, "text", width=80)
    bar, legend = out.split("显存预算\n", 1)[1].splitlines()[:2]
    assert bar.startswith("|WAAAA") and bar.split("| ")[0].isascii() and cell_width(bar, wide_ambiguous=True) <= 80
    assert bar.endswith("| 8.00 GiB（预算 = 0.9 × 总显存）")
    assert legend == "  W 权重 0.07  A 激活峰值 7.09  N 非 torch 0.04  - 未用的预算  . 比例之外"


def test_the_english_bar_keeps_its_blocks_unless_ascii_is_asked_for() -> None:
    report = diagnose(ROOT / "examples" / "profile-peak-no-cache-blocks.log")
    assert "█" in render_text(report) and "░ unused budget" in render_text(report)
    plain = render_text(report, ascii_bar=True)
    assert "█" not in plain and "|WAAAA" in plain and "  W weights 0.07  A activation 7.09" in plain


def test_colour_output_wraps_chinese_the_same_way() -> None:
    import re

    report = diagnose(ROOT / "examples" / "max-model-len-too-large.log", lang="zh")
    coloured = re.sub(r"\x1b\[[0-9;]*m", "", render_text(report, color=True, width=80))
    assert coloured == render_text(report, width=80)
