"""Block Kit rendering: the right verdict and remedy values, within Slack's limits."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from kvdoctor.api import diagnose
from kvdoctor.render.slack import (
    BUTTON_VALUE_CHARS,
    MAX_BLOCKS,
    MAX_SECTION,
    SHARE_ACTION,
    overflow_messages,
    pack_share,
    render_blocks,
    share_button,
    unpack_share,
)

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
SAMPLER_OOM = next(CORPUS.glob("087-*.log"))
FREE_MEMORY = next(CORPUS.glob("027-*.log"))
SECOND_INSTANCE = next(CORPUS.glob("021-*.log"))

PADDING = [
    "INFO 05-10 15:59:{s:02d} [config.py:717] This model supports multiple tasks: "
    "{{'generate', 'embed'}}. Defaulting to 'generate'.",
    "INFO 05-10 15:59:{s:02d} [weight_utils.py:265] Using model weights format ['*.safetensors']",
    "INFO 05-10 15:59:{s:02d} [parallel_state.py:1004] rank 0 in world size 2 is assigned as "
    "DP rank 0, PP rank 0, TP rank 0",
]


def records_for(path: Path, *, lang: str = "en", pad: int = 0) -> dict[str, Any]:
    lines = [PADDING[i % len(PADDING)].format(s=i % 60) for i in range(pad)]
    body = ("\n".join(lines) + "\n").encode() + path.read_bytes() if pad else path.read_bytes()
    return diagnose(body, lang=lang).as_records()


def block_texts(blocks: Any) -> list[str]:
    out = []
    for b in blocks:
        if "text" in b:
            out.append(b["text"]["text"])
        for e in b.get("elements", []):
            text = e.get("text", "")
            out.append(text if isinstance(text, str) else text.get("text", ""))
    return out


def assert_within_limits(blocks: Any) -> None:
    assert len(blocks) <= MAX_BLOCKS
    for text in block_texts(blocks):
        assert len(text) <= MAX_SECTION
    assert len(json.dumps(list(blocks))) < 16000  # far under Slack's message size


def test_verdict_and_remedy_values_are_in_the_blocks() -> None:
    records = records_for(SAMPLER_OOM)
    assert records["verdict"] == "cuda_oom"
    message = render_blocks(records)
    joined = "\n".join(block_texts(message.blocks))
    assert "`cuda_oom`" in block_texts(message.blocks)[0]
    primary = records["diagnoses"][0]
    assert primary["remedies"], "the rule should propose remedies"
    for remedy in primary["remedies"]:
        assert f"`{remedy['action']}`" in joined
        if remedy["value"] is not None:
            assert f"`{remedy['action']}` → `{remedy['value']}`" in joined
    for avoid in primary["avoid"]:
        assert f"`{avoid['action']}`" in joined
    for ev in primary["evidence"]:
        assert str(ev["line"]) in joined
    assert message.overflow is None
    assert "cuda_oom" in message.text
    assert_within_limits(message.blocks)


def test_cause_of_no_cache_blocks_is_shown() -> None:
    records = records_for(SECOND_INSTANCE)
    assert records["verdict"] == "no_cache_blocks"
    joined = "\n".join(block_texts(render_blocks(records).blocks))
    assert f"cause: `{records['diagnoses'][0]['cause']}`" in joined
    assert "`free_gpu_memory`" in joined


def test_chinese_headings_follow_lang() -> None:
    records = records_for(FREE_MEMORY, lang="zh")
    texts = block_texts(render_blocks(records).blocks)
    assert texts[0].startswith("*结论：启动时空闲显存不足*")  # the class by its zh name (issue 16)
    assert any(t.startswith("*按顺序这样做：*") for t in texts)


def test_huge_real_log_stays_within_limits() -> None:
    records = records_for(SAMPLER_OOM, pad=50_000)
    assert records["verdict"] == "cuda_oom"
    message = render_blocks(records)
    assert_within_limits(message.blocks)
    assert "`reduce_max_num_seqs`" in "\n".join(block_texts(message.blocks))


def test_long_evidence_moves_to_overflow_without_cutting_the_diagnosis() -> None:
    records = copy.deepcopy(records_for(SAMPLER_OOM))
    primary = records["diagnoses"][0]
    primary["evidence"] = [{"line": n, "text": f"ERROR line {n} " + "x" * 900} for n in range(1, 401)]
    primary["explanation"] = "Because. " * 1500  # 13,500 characters: several sections
    message = render_blocks(records)
    assert_within_limits(message.blocks)
    texts = block_texts(message.blocks)
    joined = "\n".join(texts)
    # the whole explanation survives, split over sections
    assert joined.count("Because.") == 1500
    for remedy in primary["remedies"]:
        assert f"`{remedy['action']}`" in joined
    assert message.overflow is not None
    assert message.overflow.count("\n") == 399
    assert "400 evidence line(s)" in joined
    follow_ups = overflow_messages(message.overflow, "en")
    for more in follow_ups:
        assert_within_limits(more.blocks)
    carried = "".join(block_texts([b for m in follow_ups for b in m.blocks]))
    assert all(f"ERROR line {n} " in carried for n in (1, 200, 400))


def test_many_diagnoses_and_remedies_stay_under_the_block_limit() -> None:
    records = copy.deepcopy(records_for(SAMPLER_OOM))
    primary = records["diagnoses"][0]
    primary["remedies"] = [{"action": "fix_config", "text": "t" * 2500, "value": n} for n in range(80)]
    records["diagnoses"] += [dict(primary, rule=f"r{n}") for n in range(30)]
    message = render_blocks(records)
    assert len(message.blocks) <= MAX_BLOCKS - 2  # room kept for the share button
    assert len(message.blocks) == len({id(b) for b in message.blocks})
    for text in block_texts(message.blocks):
        assert len(text) <= MAX_SECTION
    assert sum(len(t) for t in block_texts(message.blocks)) < 30000
    # what did not fit is carried whole by the overflow, not dropped
    shown = "\n".join(block_texts(message.blocks))
    assert message.overflow is not None
    assert all(f"`fix_config` → `{n}`" in shown + message.overflow for n in range(80))


def test_share_button_round_trips_the_report() -> None:
    records = records_for(SAMPLER_OOM, lang="zh")
    [actions] = share_button(records, "zh")
    button = actions["elements"][0]
    assert button["action_id"] == SHARE_ACTION
    assert len(button["value"]) <= BUTTON_VALUE_CHARS
    back = unpack_share(button["value"])
    assert back is not None
    assert back["verdict"] == "cuda_oom" and back["lang"] == "zh"
    assert back["diagnoses"][0]["remedies"] == records["diagnoses"][0]["remedies"]
    shared = block_texts(render_blocks(back).blocks)
    assert shared[0] == block_texts(render_blocks(records).blocks)[0]


def test_share_value_drops_evidence_before_giving_up() -> None:
    records = copy.deepcopy(records_for(SAMPLER_OOM))
    records["diagnoses"][0]["evidence"] = [
        {"line": n, "text": "".join(chr(0x4E00 + (n * 97 + k) % 20000) for k in range(200))} for n in range(12)
    ]
    value = pack_share(records)
    assert value is not None and len(value) <= BUTTON_VALUE_CHARS
    back = unpack_share(value)
    assert back is not None and len(back["diagnoses"][0]["evidence"]) < 12


@pytest.mark.parametrize("value", ["", "not base64!", "eJwrSS0uAQAEXQHB"])
def test_damaged_share_value_is_refused(value: str) -> None:
    assert unpack_share(value) is None


def test_unknown_input_says_so() -> None:
    records = diagnose(b"hello\nworld\n").as_records()
    message = render_blocks(records)
    assert "`unknown`" in block_texts(message.blocks)[0]
    assert_within_limits(message.blocks)


def test_markup_characters_in_the_log_are_escaped() -> None:
    records = copy.deepcopy(records_for(SAMPLER_OOM))
    primary = records["diagnoses"][0]
    primary["evidence"] = [{"line": 7, "text": 'File "<frozen runpy>", line 198 & <!channel>'}]
    message = render_blocks(records)
    joined = "\n".join(block_texts(message.blocks))
    assert "&lt;frozen runpy&gt;" in joined and "&amp; &lt;!channel&gt;" in joined
    assert "<!channel>" not in joined
