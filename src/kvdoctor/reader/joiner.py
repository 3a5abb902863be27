"""Stage 1b: physical lines -> logical lines.

Pastes break records apart: shell commands continued with a trailing backslash, and exception
messages re-wrapped over several lines by whoever pasted them (corpus 075, 093, 042). This stage
joins them back, keeping the first line's number, with one line of look-ahead (so it streams).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator

from kvdoctor._record import replace
from kvdoctor.reader.lines import SERVED, Line, Origin, peel

MAX_JOIN = 8
MAX_COMMAND_JOIN = 64
WRAP_WIDTH = 100  # a physical line at least this long that ends mid-token was cut by a terminal
TERMINAL_WIDTH = 80  # ... or one exactly as long as the classic terminal
# (Ascend's "AclNN_Parameter_Error(EZ1001):" carries a code and puts its message on the next line)
_EXC_START = re.compile(r"^\s*(?:[\w.]+(?:Error|Exception|Interrupt)|AssertionError)\b(?:\(\w+\))?:(?:\s|$)")
# A line that starts a new record rather than continuing the message above it.
_NEW_RECORD = re.compile(
    r"^\s*(?:$|Traceback|File \"|During handling|The above exception|\[|\((?!\d)|\$ |#|\||[│╭╰]|`{3}|~{3}|"
    r"[\w.]+(?:Error|Exception|Interrupt)\b|INFO|WARNING|ERROR|DEBUG|\d{4}-\d\d-\d\d|"
    r"\d\d-\d\d |Process \S+:$|\S+:$|[+=-]{3}"
    # a shell prompt: "host:~$ nvidia-smi …", "user@box:/srv# vllm serve …"
    r"|[\w.@-]+:[~/][^\s$#]*[$#] )"
)
# an nvidia-smi query command ends with its format: the CSV row after it is its output
_SMI_QUERY_DONE = re.compile(r"nvidia-smi\b.*--query-[\w-]+=\S+.*--format=[\w,]+$")
# a Python call that builds an engine, opened on its own line, its keyword arguments below it
_CALL_OPEN = re.compile(r"\b(?:LLM|EngineArgs|AsyncEngineArgs)\(")
_KWARG = re.compile(r"^\s+\w+\s*=\s*\S|^\s*\)")
_PROMPT = re.compile(r"^[\w.@-]+:[~/][^\s$#]*[$#] ")
# Sentences vLLM prints on one line that pastes and log viewers split (corpus 075; the 0.26+
# start-up summary split after "on startup.").
_KNOWN_CONTINUATION = re.compile(
    r"^\s*(?:Desired GPU memory utilization is|Actual usage(?: is| ?:)|Replace gpu_memory_utilization|"
    r"Based on the available memory|the estimated maximum model length|Current kv cache memory|"
    # the max-len error re-wrapped before its "(X GiB KV cache is needed" part
    r"\(\d+(?:\.\d+)? GiB KV cache is needed|Try increasing `gpu_memory_utilization`|"
    # the start-up check re-wrapped ("… on startup is less" / "than desired GPU memory utilization …")
    r"(?:(?:is less )?than )?desired GPU memory utilization \(|on startup is less than desired)"
)
# torch's OOM sentence re-wrapped after a word its figure follows ("… GPU 0 has a total capacity
# of" / "255.98 GiB of which 12.74 GiB is free.")
_FIGURE_FOLLOWS = re.compile(
    r"(?:capacity of|of which|Tried to allocate|memory in use\. Of the allocated memory| has)\s*$"
)
_FIGURE_START = re.compile(r"^\s*-?\d[\d,.]*\s*(?:[KMGT]i?B|bytes)\b")
# a figure's unit re-wrapped onto the next line ("Available KV cache memory: -1.37" / "GiB")
_UNIT_START = re.compile(r"^\s*(?:[KMGT]i?B|bytes)\b")
_WRAP_START = re.compile(r"^[a-z0-9_./)\]},'\"-]")
# a traceback's source line (the statement under a frame) starts a line of its own
_CODE_LINE = re.compile(r"^\s*(?:raise|return|assert|await|yield|import|from|def|class|self\.|super\(\))[\s(.]")
_KLOG = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d")  # a Kubernetes/glog record header (peeled off the text)


def _rest_of_record(previous: Line, line: Line) -> bool:
    """A vLLM record broken mid-sentence, its rest on the next line after one space (a log file
    written through a wrapping pipe: "… Graph capturing finished in 11" / " secs, took 1.00 GiB")."""
    if previous.origin.level is None or _own_prefix(line) or previous.text.rstrip()[-1:] in (".", "!", "?", ""):
        return False
    raw = line.raw
    return raw[:1] == " " and bool(_WRAP_START.match(raw[1:2])) and not _CODE_LINE.match(raw)


# a Kubernetes/Helm/compose manifest's argv, one YAML item per line ("- --gpu-memory-utilization" /
# '- "0.95"'): the items after a flag item are joined to it, so the flags read as one command
_YAML_FLAG = re.compile(r"^\s*- --[a-z][\w-]*")
_YAML_ITEM = re.compile(r"^\s*- [^\s#]")


# a compose/Kubernetes folded or literal block of flags ("command: >" then "  --model m" on lines of
# their own): the flag lines are joined to the key, so they read as one command
_FOLDED_OPEN = re.compile(r"^\s*(?:command|args|entrypoint)\s*:\s*[>|][-+]?(?:\s|$)")
_FOLDED_ITEM = re.compile(r"^\s+--[a-z][\w-]*")


# `kubectl describe pod`'s container argv, one item per line under "Args:" (or "Command:"): the
# items, each a single token, are joined to the key so the flags read as one command
_DESCRIBE_OPEN = re.compile(r"^\s*(?:Args|Command):(?:\s+\S+)*\s*$")
_DESCRIBE_ITEM = re.compile(r"^\s+\S+\s*$")


def _open_list(previous: Line) -> bool:
    """The line opens a Python list of strings that it does not close (`['serve',`), or a JSON
    array on a line of its own (jq's `[`, a manifest's `"args": [`) whose items follow."""
    text = previous.text.lstrip()
    if _ARRAY_OPEN.match(text):
        return True
    return bool(_LIST_OPEN.match(text)) and text.count("[") > text.count("]")


# (or a compose file's / manifest's flow sequence with its key: `command: ["--model", "m",`)
_LIST_OPEN = re.compile(r"""^(?:-\s*)?(?:"?(?:args|command|entrypoint)"?\s*:\s*)?\[\s*['"]""")
_ARRAY_OPEN = re.compile(r'^(?:"?(?:args|command)"?\s*:\s*)?\[$')


def _finished(previous: Line, line: Line) -> bool:
    """The message above ended a sentence and this line starts in lower case: another program's
    line (a wrapper's goodbye), not the rest of the message (a wrapped sentence goes on mid-way,
    and a new sentence starts with a capital)."""
    end = previous.text.rstrip()[-1:]
    # (a message that closes a mapping is whole: V1's "… Failed core proc(s): {}" ends with one)
    return end == "}" or (end in (".", "!", "?") and line.text.lstrip()[:1].islower())


def _own_prefix(line: Line) -> bool:
    """The line carries a prefix of its own (a vLLM header, a process, a container, a time stamp
    or tag peeled off its front): it was printed as a line, not cut from the one above."""
    if line.origin.level is not None or line.origin.proc is not None or line.origin.container is not None:
        return True
    raw, text = line.raw, line.text
    return len(raw) > len(text) and raw.endswith(text) and bool(raw[: len(raw) - len(text)].strip())


def _terminal_wrap(previous: Line, line: Line) -> bool:
    """The previous physical line was cut at the terminal width in the middle of a token."""
    if _own_prefix(line) or _SMI_QUERY_DONE.search(previous.raw):
        return False
    # (at exactly 80 columns only inside an exception message or an open parenthesis: many a short
    # record is 80 characters long by chance)
    at_80 = len(previous.raw) == TERMINAL_WIDTH and (
        bool(_EXC_START.match(previous.text)) or previous.raw.count("(") > previous.raw.count(")")
    )
    cut = len(previous.raw) >= WRAP_WIDTH or at_80
    return cut and previous.raw[-1:].isalnum() and bool(_WRAP_START.match(line.raw)) and not _CODE_LINE.match(line.raw)


def _continues(previous: Line, line: Line, joined: int) -> bool:
    if line.origin.level is not None or _KLOG.match(line.raw):
        return False  # a new vLLM (or Kubernetes) record
    if SERVED in (line.text, previous.text):
        return False  # (the placeholder of a run of access-log lines is a record of its own)
    if previous.text.endswith("\\"):
        return joined < MAX_COMMAND_JOIN
    if (
        _open_list(previous)
        and line.text.lstrip()[:1] in ("'", '"', "]")
        and line.origin.proc in (None, previous.origin.proc)
    ):
        return joined < MAX_COMMAND_JOIN  # a list pretty-printed one item per line (an argv)
    if _YAML_FLAG.match(previous.text) and _YAML_ITEM.match(line.text) and line.origin.proc == previous.origin.proc:
        return joined < MAX_COMMAND_JOIN
    if _FOLDED_OPEN.match(previous.text) and _FOLDED_ITEM.match(line.raw) and line.origin.proc == previous.origin.proc:
        return joined < MAX_COMMAND_JOIN
    if (
        _DESCRIBE_OPEN.match(previous.text)
        and _DESCRIBE_ITEM.match(line.raw)
        and not line.text.rstrip().endswith(":")
        and line.origin.proc == previous.origin.proc
    ):
        return joined < MAX_COMMAND_JOIN
    if (
        _CALL_OPEN.search(previous.text)
        and previous.text.count("(") > previous.text.count(")")
        and _KWARG.match(line.raw)
    ):
        return joined < MAX_COMMAND_JOIN  # an `LLM(` call with one keyword argument per line
    if joined >= MAX_JOIN or not line.text.strip():
        return False
    if line.raw.lstrip()[:2] == '{"' and previous.raw.lstrip()[:2] != '{"':
        return False  # (a JSON log record after plain lines, a record's exc_info: a record of its own)
    if line.origin.proc is not None and line.origin.proc != previous.origin.proc:
        return False
    if _KNOWN_CONTINUATION.match(line.text):
        return True
    if previous.text[-1:].isdigit() and _UNIT_START.match(line.text):
        return True
    if _FIGURE_START.match(line.text) and _FIGURE_FOLLOWS.search(previous.text):
        return True
    if _rest_of_record(previous, line):
        return True
    if _terminal_wrap(previous, line) and not _NEW_RECORD.match(line.text):
        return True
    if not _EXC_START.match(previous.text):
        return False
    if line.raw[:1] in (" ", "\t") or _NEW_RECORD.match(line.text) or _finished(previous, line):
        return False
    return len(previous.text) < 4000


def _join(previous: Line, line: Line) -> Line:
    if _YAML_FLAG.match(previous.text) and _YAML_ITEM.match(line.text):
        return replace(previous, text=f"{previous.text.rstrip()} {line.text.strip()[2:]}", raw=line.raw)
    if previous.text.endswith("\\"):
        return replace(previous, text=f"{previous.text[:-1].rstrip()} {line.text.strip()}", raw=line.raw)
    glue = "" if _terminal_wrap(previous, line) else " "
    return replace(
        previous,
        text=f"{previous.text.rstrip()}{glue}{line.text.strip()}",
        raw=line.raw,
    )


# A paste hard-wrapped at a fixed width (an 80-column terminal, a log viewer): its long lines are
# cut into pieces exactly that wide, whatever they hold. It shows as several lines of exactly the
# greatest length in the log; the first lines decide, so a long log is not held back.
WRAP_SAMPLE = 400
_WRAP_MIN_WIDTH = 60
_TRACEBACK_MARK = re.compile(r"^\s*(?:Traceback \(most recent call last\)|File \"|During handling|The above exception)")


_TERMINAL_WIDTHS = (80, 100, 120, 132, 160, 200)


def wrap_width(lines: list[Line]) -> int | None:
    """The width `lines` were hard-wrapped at, if they were: three lines (and a tenth of the long
    ones) exactly as long as the longest, which is at least 60 columns; two where that is a
    terminal's width; one, if the line after it goes on mid-sentence."""
    lengths = [len(line.raw) for line in lines]
    longest = max(lengths, default=0)
    if longest < _WRAP_MIN_WIDTH:
        return None
    at = lengths.count(longest)
    long_ones = sum(1 for n in lengths if n >= _WRAP_MIN_WIDTH)
    if at * 10 < long_ones:
        return None
    if at >= 3 or (at >= 2 and longest in _TERMINAL_WIDTHS):
        return longest
    if at == 1 and longest in _TERMINAL_WIDTHS:
        # one line cut once: the piece after it goes on mid-sentence (a space, a lower-case word,
        # a digit or a closing bracket), where a record of its own would start afresh
        i = lengths.index(longest)
        if i + 1 < len(lines) and _starts_no_record(lines[i + 1]):
            before, after = lines[i].raw, lines[i + 1].raw
            # (or inside a capitalised word: "desired GP" / "U memory")
            if (
                (after[:1] == " " and after[1:2].strip())
                or _WRAP_START.match(after)
                or (before[-1:].isupper() and after[:1].isupper())
            ):
                return longest
    return None


def _starts_no_record(line: Line) -> bool:
    """Nothing marks `line` as a record of its own: no prefix of its own, no indent (a line
    re-wrapped by hand, or a traceback's), no klog header and no traceback marker."""
    if _own_prefix(line) or line.raw[:2] == "  " or _PROMPT.match(line.raw) or _SHELL_RECORD.match(line.raw):
        return False
    return not _KLOG.match(line.raw) and not _TRACEBACK_MARK.match(line.raw)


# what the shell prints alone on a line when the process dies ("Killed" from the OOM killer):
# a record of its own after a line that happened to be exactly the wrap width
_SHELL_RECORD = re.compile(r"^(?:Killed|Terminated|Aborted|Segmentation fault|Bus error)(?: \(core dumped\))?\s*$")


def _wrapped(previous: Line, line: Line, width: int, joined: int) -> bool:
    """`line` is the next piece of `previous` in a paste hard-wrapped at `width`: the piece above
    filled the width (less a trailing space the paste dropped), and this one starts no record."""
    if joined >= MAX_COMMAND_JOIN or len(previous.raw) not in (width, width - 1) or not line.raw.strip():
        return False
    return _starts_no_record(line)


def _unwrap(previous: Line, line: Line, width: int) -> Line:
    # the pieces side by side are the line as printed (a dropped trailing space comes back)
    # (and a space the cut fell on, that the piece's text lost, stays between the words)
    spaces = previous.raw[len(previous.raw.rstrip()) :]
    glue = spaces if len(previous.raw) == width else " "
    text = f"{previous.text.rstrip()}{glue}{line.raw}"
    if previous.origin.level is None:
        # (the cut fell inside the vLLM header behind a wrapper's prefix, "ERROR 05-08 09:32:4" /
        # "7 [core.py:400] …": whole again, the header comes off as it does on a line never cut)
        again, origin = peel(text)
        if origin.level is not None:
            return replace(previous, text=again, raw=line.raw, origin=_merged(previous.origin, origin))
    return replace(previous, text=text, raw=line.raw)


def _merged(first: Origin, then: Origin) -> Origin:
    """What the first piece's prefixes said, and what the rejoined header adds to it."""
    return Origin(
        proc=first.proc or then.proc,
        pid=first.pid if first.pid is not None else then.pid,
        rank=first.rank if first.rank is not None else then.rank,
        container=first.container or then.container,
        level=then.level,
        stamp=then.stamp,
        src=then.src,
        repeated=first.repeated if first.repeated is not None else then.repeated,
    )


def common_indent(lines: list[Line]) -> str:
    """The indent every non-blank line shares (a log pasted as an indented markdown block), if
    it is two columns or more; else ""."""
    texts = [line.raw for line in lines if line.raw.strip()]
    if not texts:
        return ""
    first = texts[0]
    indent = first[: len(first) - len(first.lstrip(" \t"))]
    for text in texts[1:]:
        while indent and not text.startswith(indent):
            indent = indent[:-1]
    return indent if len(indent) >= 2 else ""


def double_spaced(lines: list[Line]) -> bool:
    """A paste with a blank line after every line (copied from a page that renders each line as a
    paragraph): nine in ten lines with text, of two or more, are followed by a blank one."""
    texts = [i for i, line in enumerate(lines[:-1]) if not _blank(lines[i])]
    if len(texts) < 2:
        return False
    followed = sum(1 for i in texts if _blank(lines[i + 1]))
    return followed * 10 >= len(texts) * 9


def _blank(line: Line) -> bool:
    """Nothing on the line: not even the placeholder a run of serving lines becomes (no raw text)."""
    return not line.raw.strip() and not line.text.strip()


def _dedent(line: Line, indent: str) -> Line:
    if not line.raw.startswith(indent):
        return line
    raw = line.raw[len(indent) :]
    text, origin = peel(raw)  # the prefixes the indent hid (a vLLM header, a process) come off now
    return Line(line.number, text, raw, origin)


def join_lines(lines: Iterable[Line]) -> Iterator[Line]:
    stream = iter(lines)
    head: list[Line] = []
    failure: Exception | None = None
    try:
        for line in stream:
            head.append(line)
            if len(head) >= WRAP_SAMPLE:
                break
    except Exception as exc:  # noqa: BLE001 - a read that fails part-way: what it read still counts
        failure = exc
    spaced = double_spaced(head)
    if spaced:  # the blank lines between are the page's, not the log's: a message may go on across them
        head = [line for line in head if not _blank(line)]
    indent = common_indent(head)
    if indent:
        head = [_dedent(line, indent) for line in head]
    width = wrap_width(head)
    pending: Line | None = None
    joined = 0
    rest: Iterable[Line] = () if failure is not None else stream
    if spaced:
        rest = (line for line in rest if not _blank(line))
    if indent:
        rest = (_dedent(line, indent) for line in rest)
    for line in itertools.chain(head, rest):
        if pending is not None and width is not None and _wrapped(pending, line, width, joined):
            pending = _unwrap(pending, line, width)
            joined += 1
            continue
        if pending is not None and _continues(pending, line, joined):
            pending = _join(pending, line)
            joined += 1
            continue
        if pending is not None:
            yield pending
        pending, joined = line, 0
    if pending is not None:
        yield pending
    if failure is not None:
        raise failure


class Joiner:
    """The push form of :func:`join_lines`, for live streams."""

    def __init__(self) -> None:
        self._pending: Line | None = None
        self._joined = 0

    def push(self, line: Line) -> list[Line]:
        if self._pending is not None and _continues(self._pending, line, self._joined):
            self._pending = _join(self._pending, line)
            self._joined += 1
            return []
        out = [self._pending] if self._pending is not None else []
        self._pending, self._joined = line, 0
        return out

    def flush(self) -> list[Line]:
        out = [self._pending] if self._pending is not None else []
        self._pending, self._joined = None, 0
        return out
