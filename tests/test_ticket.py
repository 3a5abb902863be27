"""Markdown incident tickets: block discovery, the managed section, stated-remedy checks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kvdoctor.cli import main
from kvdoctor.ticket.sections import (
    BEGIN,
    END,
    BlockKind,
    TicketError,
    check_ticket,
    parse_ticket,
    stated_actions,
)

TICKETS = Path(__file__).parent / "fixtures" / "tickets"
CORPUS = Path(__file__).parent / "fixtures" / "corpus"


def ticket(name: str) -> str:
    return (TICKETS / name).read_text(encoding="utf-8")


@pytest.fixture
def copies(tmp_path: Path) -> Path:
    for path in TICKETS.glob("*.md"):
        shutil.copy(path, tmp_path / path.name)
    return tmp_path


def test_bug_template_blocks_are_found_in_order() -> None:
    parsed = parse_ticket(ticket("INC-0096-bug-template.md"))
    kinds = [(b.kind, b.info) for b in parsed.blocks]
    # the collect_env <details> holds only a fence: the fence is the block
    assert kinds == [
        (BlockKind.FENCED, "text"),
        (BlockKind.FENCED, "console"),
        (BlockKind.DETAILS, ""),
        (BlockKind.INDENTED, ""),
    ]
    collect_env = parsed.blocks[0]
    assert collect_env.text.startswith("Collecting environment information...")
    indented = parsed.blocks[-1].text
    assert indented == (CORPUS / "027-v1-laptop-4gb-free-memory-322of40.log").read_text()
    assert [s.text for s in parsed.stated] == ["relaunched with `--max-model-len 2048`, it serves now."]


def test_every_log_is_diagnosed_and_other_blocks_are_not_logs() -> None:
    result = check_ticket(ticket("INC-0096-bug-template.md"))
    assert [(log.block.kind, log.report.verdict) for log in result.logs] == [
        (BlockKind.DETAILS, "max_model_len_too_large"),
        (BlockKind.INDENTED, "insufficient_free_memory_at_startup"),
    ]
    [check] = result.checks  # the stated fix only speaks about log 1's knob
    assert (check.log, check.action, check.agrees, check.contradicts) == (
        1,
        "lower_max_model_len",
        True,
        False,
    )


def test_section_is_appended_once_and_byte_identical_on_the_second_run() -> None:
    original = ticket("INC-0096-bug-template.md")
    first = check_ticket(original)
    assert first.changed and first.text.startswith(original + "\n")
    section = first.text[len(original) + 1 :]
    assert section.startswith(BEGIN + "\n") and section.endswith(END + "\n")
    assert "`max_model_len_too_large`" in section and "`lower_max_model_len`" in section
    second = check_ticket(first.text)
    assert not second.changed and second.text == first.text


def test_evidence_lines_are_ticket_lines_even_when_the_section_sits_above_the_logs() -> None:
    original = f"# Incident\n\n{BEGIN}\n{END}\n\n" + ticket("INC-0096-bug-template.md")
    first = check_ticket(original)
    second = check_ticket(first.text)
    assert first.changed and not second.changed
    lines = first.text.splitlines()
    for log in first.logs:
        for evidence in log.report.diagnoses[0].evidence:
            # the evidence line as rendered (ticket numbering) points at the evidence text
            number = evidence.line + log.block.line - 1
            assert evidence.text in lines[number - 1]
            assert f"{number:>6} | {evidence.text}" in first.text


def test_crlf_tickets_stay_crlf_and_stable() -> None:
    original = ticket("INC-0021-lowered-maxlen.md").replace("\n", "\r\n")
    first = check_ticket(original)
    assert first.changed and "\n" not in first.text.replace("\r\n", "")
    assert not check_ticket(first.text).changed


def test_contradiction_from_front_matter_and_from_a_fix_line() -> None:
    result = check_ticket(ticket("INC-0081-raised-util.md"))
    [c] = result.contradictions
    assert (c.stated.where, c.action, c.verdict) == (
        "front matter",
        "raise_gpu_memory_utilization",
        "insufficient_free_memory_at_startup",
    )
    # the separate nvidia-smi paste names the process holding the memory
    assert result.logs[0].report.probe is not None

    result = check_ticket(ticket("INC-0021-lowered-maxlen.md"))
    [c] = result.contradictions
    assert c.stated.where.startswith("line ") and c.action == "lower_max_model_len"
    assert c.verdict == "no_cache_blocks"


def test_ticket_without_a_vllm_log_is_left_alone() -> None:
    original = ticket("INC-0100-no-log.md")
    result = check_ticket(original)
    assert result.logs == () and result.text == original


@pytest.mark.parametrize(
    ("text", "facts", "expected"),
    [
        ("raised gpu_memory_utilization to 0.95", {}, ("raise_gpu_memory_utilization",)),
        (
            "--gpu-memory-utilization 0.95",
            {"gpu_memory_utilization": 0.9},
            ("raise_gpu_memory_utilization",),
        ),
        ("--gpu-memory-utilization=0.5", {}, ("lower_gpu_memory_utilization",)),
        (
            "lowered max_model_len to 8192 and added --enforce-eager",
            {},
            ("lower_max_model_len", "enforce_eager"),
        ),
        ("--max-model-len 4096", {"max_model_len": 32768}, ("lower_max_model_len",)),
        ("--max-model-len 65536", {"max_model_len": 32768}, ("raise_max_model_len",)),
        ("--max-model-len auto", {}, ("max_model_len_auto",)),
        ("killed the stale vLLM process on GPU 0", {}, ("free_gpu_memory",)),
        ("reduce_max_num_seqs", {}, ("reduce_max_num_seqs",)),
        ("served with -tp 2", {}, ("increase_tensor_parallel_size",)),
        ("switched to the AWQ checkpoint", {}, ("use_quantized_checkpoint",)),
        ("set --kv-cache-dtype fp8", {}, ("kv_cache_dtype_fp8",)),
        ("restarted the node", {}, ()),
    ],
)
def test_free_text_remedies_map_to_action_ids(text: str, facts: dict[str, object], expected: tuple[str, ...]) -> None:
    assert stated_actions(text, facts) == expected


def test_markers_inside_code_blocks_are_not_the_managed_section() -> None:
    log = (CORPUS / "090-v1-l40s-second-tinyllama-instance-util02-no-cache-blocks.log").read_text()
    text = f"Docs say:\n\n```markdown\n{BEGIN}\n```\n\n```\n{log}```\n"
    result = check_ticket(text)
    assert result.changed and result.text.count(BEGIN) == 2
    assert not check_ticket(result.text).changed


def test_broken_inputs_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(TicketError, match=r"^t.md:3: front matter is not valid YAML"):
        check_ticket("---\ntitle: x\nremedy: [unclosed\n---\n", where="t.md")
    with pytest.raises(TicketError, match=r"^t.md:2: <!-- kvdoctor:begin --> has no"):
        check_ticket(f"x\n{BEGIN}\n", where="t.md")
    assert main(["ticket", str(tmp_path / "missing.md")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kvdoctor: ") and err.count("\n") == 1


def test_cli_fixer_and_check_exit_codes(copies: Path, capsys: pytest.CaptureFixture[str]) -> None:
    no_log = copies / "INC-0100-no-log.md"
    agreeing = copies / "INC-0096-bug-template.md"
    contradicting = copies / "INC-0081-raised-util.md"
    before = agreeing.read_bytes()

    assert main(["ticket", "--check", str(no_log)]) == 0
    assert main(["ticket", "--check", str(agreeing)]) == 1  # would change
    assert agreeing.read_bytes() == before
    assert main(["ticket", str(agreeing), str(no_log)]) == 1  # modified
    out = capsys.readouterr().out
    assert "wrote the kvdoctor section" in out and str(no_log) not in out
    assert main(["ticket", str(agreeing)]) == 0  # nothing left to change
    assert main(["ticket", "--check", str(agreeing)]) == 0

    assert main(["ticket", str(contradicting)]) == 1
    assert main(["ticket", str(contradicting)]) == 0  # the fixer does not fail on advice
    capsys.readouterr()
    assert main(["ticket", "--check", str(contradicting)]) == 1
    out = capsys.readouterr().out
    assert "contradicts log 1" in out and "raise_gpu_memory_utilization" in out
    assert no_log.read_bytes() == (TICKETS / "INC-0100-no-log.md").read_bytes()


def test_a_log_quoted_with_gt_marks_is_a_log_block() -> None:
    # a GitHub comment quoting the log ("> INFO …" lines, a fence inside the quote)
    result = check_ticket(ticket("INC-0101-quoted-log.md"))
    assert [(log.block.kind, log.report.verdict) for log in result.logs] == [
        (BlockKind.QUOTED, "max_model_len_too_large"),
    ]
    assert result.changed
