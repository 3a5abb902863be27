"""Stage 1: bytes -> normalised lines.

Decodes without ever failing (invalid UTF-8 becomes U+FFFD), drops ANSI colour codes in their raw
and pasted forms, keeps the last frame of carriage-return progress bars, and peels the wrappers that
real pastes carry (docker-compose, Kubernetes/CRI, Cloud Logging, CloudWatch, Buildkite, FastChat,
TorchServe, JSON lines, Ray and vLLM process prefixes, torch `[rankN]:`, vLLM's own header). Every
line keeps its ORIGINAL 1-based number and what was peeled off.
"""

from __future__ import annotations

import io
import os
import re
import zlib
from collections.abc import Iterable, Iterator
from functools import lru_cache

from kvdoctor._record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, BinaryIO

_set = object.__setattr__  # how a frozen record's own __init__ fills it


@record(slots=True)
class Origin:
    """What was peeled off a line: who printed it and through which wrapper."""

    proc: str | None = None  # vLLM/Ray process name, e.g. "EngineCore_DP0", "VllmWorker rank=1"
    pid: int | None = None
    rank: int | None = None  # tensor-parallel / torch rank when the prefix names one
    container: str | None = None  # docker-compose service, k8s container, JSON "stream"
    level: str | None = None  # vLLM log level (INFO, WARNING, …) when the header was present
    stamp: str | None = None  # vLLM header "MM-DD hh:mm:ss"
    src: str | None = None  # vLLM header "file.py:123"
    repeated: int | None = None  # Ray "[repeated Nx across cluster]"

    def __init__(  # written out: one is made per prefixed line (the hot path)
        self,
        proc: str | None = None,
        pid: int | None = None,
        rank: int | None = None,
        container: str | None = None,
        level: str | None = None,
        stamp: str | None = None,
        src: str | None = None,
        repeated: int | None = None,
    ) -> None:
        _set(self, "proc", proc)
        _set(self, "pid", pid)
        _set(self, "rank", rank)
        _set(self, "container", container)
        _set(self, "level", level)
        _set(self, "stamp", stamp)
        _set(self, "src", src)
        _set(self, "repeated", repeated)


NO_ORIGIN = Origin()


@record(slots=True)
class Line:
    number: int  # 1-based line number in the original input
    text: str  # the message, wrappers peeled
    raw: str  # the decoded line before peeling (ANSI stripped), for evidence
    origin: Origin = NO_ORIGIN

    def __init__(self, number: int, text: str, raw: str, origin: Origin = NO_ORIGIN) -> None:
        _set(self, "number", number)  # written out: one is made per line (the hot path)
        _set(self, "text", text)
        _set(self, "raw", raw)
        _set(self, "origin", origin)


# the start of the message a read that fails part-way raises (the CLI exits 2 on it)
READ_ERROR = "read error after partial input"


class InputError(Exception):
    """Unreadable input; the message is one line a user can act on."""


# --- reading bytes -----------------------------------------------------------------------------

CHUNK = 1 << 20


def open_source(path: str) -> BinaryIO:
    """Open a path (or '-' for stdin) for binary reading; transparently gunzip."""
    import sys

    if path == "-":
        stream: BinaryIO = sys.stdin.buffer
    else:
        if os.path.isdir(path):
            raise InputError(f"{path}: is a directory; pass a log file (or '-' for stdin)")
        try:
            stream = open(path, "rb")  # noqa: SIM115 - the caller reads it to the end and closes it
        except FileNotFoundError:
            raise InputError(f"{path}: no such file; check the path") from None
        except PermissionError:
            raise InputError(f"{path}: permission denied; check the file's permissions") from None
        except OSError as exc:
            raise InputError(f"{path}: cannot open ({exc.strerror}); check the path") from None
    return _maybe_gunzip(stream)


def _maybe_gunzip(stream: BinaryIO) -> BinaryIO:
    buffered: Any = stream if isinstance(stream, io.BufferedReader) else io.BufferedReader(stream)
    head = buffered.peek(2)[:2]
    if head == b"\x1f\x8b":
        import gzip  # only for .gz input

        return gzip.GzipFile(fileobj=buffered)  # type: ignore[return-value]
    return buffered  # type: ignore[no-any-return]


def iter_raw_lines(stream: BinaryIO) -> Iterator[bytes]:
    """Yield physical lines (without the trailing newline) in bounded memory."""
    tail = b""
    read = getattr(stream, "read1", stream.read)  # read1: a truncated gzip still yields its start
    while True:
        try:
            chunk = read(CHUNK)
        except (OSError, EOFError, zlib.error) as exc:  # truncated or corrupt gzip, I/O error: keep what we have
            if tail:
                yield tail
            raise InputError(f"{READ_ERROR} ({exc}); the rest is ignored") from None
        if not chunk:
            break
        parts = (tail + chunk).split(b"\n")
        tail = parts.pop()
        yield from parts
        if len(tail) > CHUNK * 4:  # a pathological line with no newline: cut it, never grow forever
            yield tail
            tail = b""
    if tail:
        yield tail


# Past the first DENSE_BYTES, a huge log is mostly serving traffic; only lines near these anchors
# are read in Python. A start-up block always prints sizes (GiB/MiB, "GB" before 0.8.3), block
# counts, an engine banner/version ("LLM"), an args dump or an error. Serving lines (stats, access
# log, request log) carry none of them. `benchmarks/throughput.py` greps with the same words.
FAST_ANCHORS = (b"iB", b"GB", b"rror", b"RROR", b"blocks", b"LLM", b"args:")
DENSE_BYTES = 4 << 20


def _chunk_has_anchor(body: bytes) -> bool:
    """Whether a chunk may hold a start-up line. A single byte is found at memchr speed, so each
    anchor is first gated on its rarest byte. `blocks`, `args:` and `RROR` are not looked for
    here: they sit within a window of a size, an exception line or the engine banner/version line
    ("LLM"). A traceback cut before its exception line is therefore read in the first 8 MiB only."""
    if b"B" in body and (b"iB" in body or b"GB" in body):
        return True
    if b"rror" in body:  # "…Error:"; an ERROR-level traceback ends in one (RROR is line-level only)
        return True
    return b"L" in body and b"LLM" in body


WINDOW_BEFORE = 64  # lines of context kept before an anchor (banner, phase markers, frames)
WINDOW_AFTER = 256  # a V0 0.2.x banner is followed by download bars before "# GPU blocks"


def iter_sparse_lines(stream: BinaryIO, dense_bytes: int = DENSE_BYTES) -> Iterator[tuple[int, bytes]]:
    """(line number, raw line) for every line of the first `dense_bytes`, then only for lines
    within a window of an anchor. A skipped stretch is marked by one empty line (numbered as its
    last skipped line) so nothing joins across it. Memory: one chunk plus the window."""
    from collections import deque

    read = getattr(stream, "read1", stream.read)
    number = seen = after = 0
    dropped: int | None = None  # the last line number skipped since the previous yield
    before: deque[tuple[int, bytes]] = deque(maxlen=WINDOW_BEFORE)
    skipped: tuple[int, bytes] | None = None  # the last chunk passed over: its end is the log's tail
    tail = b""
    while True:
        try:
            chunk = read(CHUNK)
        except (OSError, EOFError, zlib.error) as exc:
            if tail:
                yield number + 1, tail
            raise InputError(f"{READ_ERROR} ({exc}); the rest is ignored") from None
        if not chunk:
            break
        if seen >= dense_bytes and after == 0 and len(tail) < 4096:
            # the fast path: decide on the chunk itself (no copy); the line cut by the previous
            # chunk is checked with the start of this one
            cut = chunk.rfind(b"\n")
            if cut >= 0 and not _chunk_has_anchor(chunk) and not _chunk_has_anchor(tail + chunk[:64]):
                skipped = (number, tail + chunk[: cut + 1])
                number += chunk.count(b"\n", 0, cut + 1)
                seen += len(tail) + cut + 1
                tail = chunk[cut + 1 :]
                before.clear()
                dropped = number
                continue
        data = tail + chunk
        cut = data.rfind(b"\n")
        if cut < 0 and len(data) <= CHUNK * 4:
            tail = data
            continue
        body, tail = (data[: cut + 1], data[cut + 1 :]) if cut >= 0 else (data + b"\n", b"")
        dense = seen < dense_bytes
        seen += len(body)
        if dense:
            for raw in body[:-1].split(b"\n"):
                number += 1
                yield number, raw
            continue
        if after == 0 and not _chunk_has_anchor(body):
            skipped = (number, body)
            number += body.count(b"\n")
            before.clear()
            dropped = number
            continue
        skipped = None
        for raw in body[:-1].split(b"\n"):
            number += 1
            hit = any(anchor in raw for anchor in FAST_ANCHORS)
            if not hit and after == 0:
                if len(before) == WINDOW_BEFORE:
                    dropped = before[0][0]
                before.append((number, raw))
                continue
            if hit and before:
                if dropped is not None:
                    yield dropped, b""
                yield from before
                before.clear()
            elif dropped is not None and not before and hit:
                yield dropped, b""
            dropped = None
            yield number, raw
            after = WINDOW_AFTER if hit else after - 1
    # the log's last lines are always read: a process that died prints its last words there, and
    # a traceback cut before its exception line carries no anchor (corpus 045)
    if skipped is not None:
        first, body = skipped
        lines = body[:-1].split(b"\n")[-WINDOW_BEFORE:]
        start = first + body.count(b"\n") - len(lines)
        yield start, b""
        for offset, raw in enumerate(lines, 1):
            yield start + offset, raw
    elif before:
        yield before[0][0] - 1, b""
        yield from before
    if tail:
        yield number + 1, tail


# --- normalising text ---------------------------------------------------------------------------

# Raw ESC sequences and the forms they take in pastes: "#033[", "^[[", a literal "\x1b[" / "\033[",
# and the bare "[1;36m" left when a paste drops the ESC byte (seen in docker logs of 0.4.2..0.11.2).
_ANSI = (  # compiled on first use (re caches it): most logs carry no colour
    r"(?:\x1b|#033|\^\[|\\x1b|\\033|\\u001b|\\e)\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|"
    r"\[(?:\d{1,3}(?:;\d{1,3})*)m"
)


# Buildkite's timestamp (an APC sequence, "\x1b_bk;t=1714567890123\x07", or what a paste leaves of it)
# and any other ESC-introduced sequence the ANSI pattern does not cover
_APC = r"\x1b_[^\x07\x1b]*(?:\x07|\x1b\\)?|(?<![\w])_bk;t=\d+\x07?|\x1b"


_ANSI_HINT = re.compile(r"\x1b|033\[|\^\[\[|x1b\[|u001b\[|\\e\[|\[\d")


_ENTITY = r"&(?:#\d+|#x[0-9a-fA-F]+|[a-zA-Z]{2,8});"  # compiled on first use (re caches it)


def decode(raw: bytes) -> str:
    text = raw.decode("utf-8", errors="replace")
    if "\r" in text:
        text = text.rstrip("\r")
        if "\r" in text:  # a progress bar redrawn with CR: keep the last frame that has text
            frames = [f for f in text.split("\r") if f.strip()]
            text = frames[-1] if frames else ""
    if "[" in text and _ANSI_HINT.search(text):
        text = re.sub(_ANSI, "", text)
    if "\x1b" in text or "_bk;t=" in text:  # an APC sequence (Buildkite's "\x1b_bk;t=…\x07") or a stray ESC
        text = re.sub(_APC, "", text)
    if "\x00" in text:
        text = text.replace("\x00", "")
    if "&" in text and re.search(_ENTITY, text):  # pasted from a rendered page: "&nbsp;", "&gt;", "&#39;"
        import html  # rarely needed; its entity table is large

        text = html.unescape(text).replace("\xa0", " ")
    return text


# --- peeling wrappers -----------------------------------------------------------------------------

_ISO = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
_WRAPPER_SOURCES: tuple[tuple[str, str], ...] = (
    # docker compose: "vllm-1  | …", "vllm_1 | …"
    ("compose", r"^(?P<container>[A-Za-z0-9][\w.-]*)\s+\|\s?(?=\S|$)"),
    # (a numbered service, "vllm-1 |", also before an indented line: a traceback's frames)
    ("compose", r"^(?P<container>[A-Za-z0-9][\w.-]*[-_]\d+)\s+\| ?(?=\s)"),
    # FastChat: "2024-01-01 12:00:00 | ERROR | stderr | …"
    ("fastchat", rf"^{_ISO} \| [A-Z]+ \| (?P<container>[\w.-]+) \| "),
    # TorchServe: "2024-09-13T22:25:38,258 [INFO ] W-9000-model_1.0-stdout MODEL_LOG - …"
    ("torchserve", rf"^{_ISO} \[[A-Z]+ *\] (?P<container>\S+) MODEL_LOG - "),
    # Kubernetes CRI: "2024-…Z stdout F …"
    ("cri", rf"^{_ISO} (?P<container>stdout|stderr) [FP] "),
    # Buildkite: "  | [2024-…Z] …" and "_bk;t=1714567890123\x07"
    ("buildkite", rf"^(?:\s*\|\s*)?\[{_ISO}\]\s?|^_bk;t=\d+\x07?"),
    # HF transformers / LlamaFactory: "[WARNING|logging.py:329] 2025-03-10 21:43:12,326 >> "
    ("hf", r"^\[[A-Z]+\|[\w.]+:\d+\] [\d-]+ [\d:,]+ >> "),
    # CloudWatch / Cloud Logging / kubectl --timestamps: a leading ISO timestamp, optional severity
    (
        "stamp",
        rf"^\[?{_ISO}\]?(?:\t[\w-]*\t|\s+)(?:\[?(?:info|INFO|warn|WARN|error|ERROR|DEFAULT)\]?\s+(?!\d\d-\d\d \d\d:))?",
    ),
    # DJL / LMI serving: "WARN  PyProcess W-252-model-stderr: "
    ("djl", r"^(?:WARN|INFO|ERROR|DEBUG)\s+PyProcess (?P<container>W-\d+-\S+?):\s?"),
    # Ray's C++ core worker: "[2023-07-11 15:20:41,680 E 42067 42067] logging.cc:97: "
    ("raycore", r"^\[\d{4}-\d\d-\d\d [\d:,.]+ [IWEF] \d+ \d+\] [\w.]+:\d+: "),
    # a markdown fence glued to the first log line: "```[vllm]: (VllmWorkerProcess pid=90) ERROR …"
    ("fence", r"^(?:`{3,}|~{3,})[\w-]*\s*(?=\S)"),
    # journald / syslog: "Aug 19 18:34:30 host vllm[8707]: "
    ("syslog", r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ (?P<container>[\w.@/-]+)(?:\[\d+\])?: "),
    # k9s / boxed terminal views: "│ (APIServer pid=1) INFO … │"
    ("box", r"^[│┃] (?=.*[│┃]\s*$)"),  # not "|": nvidia-smi tables are read as they are
    # a quoted block as GitHub renders it when copied ("▎ ValueError: …") or as markdown ("> …")
    ("quote", r"^(?:[▎▍▌┃│]|>(?!>))[ \t]?"),
    # glog (torch, klog): "W1223 23:34:22.775000 1116 torch/utils/x.py:2425] "
    ("glog", r"^\[?[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [\w./-]+:\d+\]\s?"),
    # platform prefixes: "[vllm]: " (Akash), torch elastic "[rank0]: "
    ("rank", r"^\[rank(?P<rank>\d+)\]:\s?"),
    ("tag", r"^\[(?P<container>[A-Za-z][\w.-]{0,30})\]:\s"),
)


@lru_cache(maxsize=1)
def _wrappers() -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((name, re.compile(source)) for name, source in _WRAPPER_SOURCES)


# Ray / vLLM process prefix; the leading "(" is sometimes lost in pastes (corpus 003).
_PROC = re.compile(
    r"^\(?(?P<proc>[A-Za-z_][\w\-: ]*?(?: rank=\d+| TP\d+| PP\d+_TP\d+)?) pid=(?P<pid>\d+)"
    r"(?:, ip=[\w.:-]+)?\)\s?"
)
_RANK_IN_PROC = re.compile(r"(?:rank=|TP)(\d+)")  # the tensor-parallel rank, not a DP index
_REPEATED = r"\s*\[repeated (\d+)x across cluster\]\s*$"  # Ray only: compiled on first use
# vLLM's own header, every era: "INFO 04-27 10:13:05 llm_engine.py:275] " and
# "INFO 05-16 18:43:01 [gpu_model_runner.py:1186] " (DEBUG paths may hold "/" and "...").
_HEADER = re.compile(
    r"^(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) (?P<stamp>\d\d-\d\d \d\d:\d\d:\d\d)"
    r"(?:[.,]\d+)? \[?(?P<src>[^\]\s]+?):(?P<lineno>\d+)\] ?"
)
# the same header after a short literal prefix (VLLM_LOGGING_PREFIX)
_PREFIXED_HEADER = re.compile(r" (?=(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d)")
_JSON_KEYS = ("log", "message", "msg", "textPayload", "MESSAGE")
# Cheap gate before the wrapper table: only lines that could start with one are tried.
_MAYBE_WRAPPED = re.compile(
    r"^(?:[\d\[_{\s│┃▎▍▌>`~]|(?:WARN|INFO|ERROR|DEBUG)\s+PyProcess |[IWEF]\d{4} |[A-Z][a-z]{2} [ \d]\d "
    r"|[A-Za-z0-9][\w.-]*\s+\|)"
)


def _peel_json(text: str) -> tuple[str, str | None] | None:
    import json  # only for JSON-lines input

    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    container = None
    for key in ("container_name", "container", "stream"):
        if isinstance(obj.get(key), str):
            container = obj[key]
            break
    k8s = obj.get("kubernetes")
    if isinstance(k8s, dict) and isinstance(k8s.get("container_name"), str):
        container = k8s["container_name"]
    payload = obj.get("jsonPayload")
    if isinstance(payload, dict):
        obj = {**obj, **payload}
    for key in _JSON_KEYS:
        value = obj.get(key)
        if isinstance(value, str):
            return value.rstrip("\n"), container
    return None


# a record logged below ERROR: its exc_info is an exception handled and logged, not the failure
_HANDLED = re.compile(r'"(?:level|levelname|severity)": "(?i:debug|info|warn|warning|notice)"')
_EXC_INFO = re.compile(r'"exc_info": "((?:[^"\\]|\\.)*)(")?')


def _exc_info_lines(text: str) -> list[str]:
    """The lines of a JSON record's "exc_info" traceback, also where a paste cut the record."""
    import json  # only for JSON-lines input

    m = _EXC_INFO.search(text)
    if m is None or m.group(1) in ("", "None"):
        return []
    body = m.group(1)
    if m.group(2) is None:  # cut: drop a half escape at the end
        body = re.sub(r"\\(?:u[0-9a-fA-F]{0,3})?$", "", body)
    try:
        value = json.loads(f'"{body}"')
    except ValueError:
        return []
    return [line for line in str(value).splitlines() if line.strip()]


def _vllm_header(text: str) -> tuple[str, str, str, str] | None:
    """vLLM's own header at the start of the text: its level, clock, "[file:line" and the message."""
    m = _HEADER.match(text)
    if not m:
        return None
    bracket = "[" if text[m.start("src") - 1] == "[" else ""
    return m.group("level"), m.group("stamp"), f"{bracket}{m.group('src')}:{m.group('lineno')}", text[m.end() :]


def peel(text: str) -> tuple[str, Origin]:
    """Strip wrappers repeatedly (they nest) and return the message and its origin."""
    proc = container = level = stamp = src = None
    pid = rank = repeated = None
    for _ in range(8):
        before = text
        stripped = text.lstrip()
        if stripped is not text and (_PROC.match(stripped) or _HEADER.match(stripped)):
            text = stripped  # a quoted block indents every line (corpus 054)
        if stripped.startswith("{") and stripped.endswith("}"):
            peeled = _peel_json(stripped)
            if peeled is not None:
                text, container = peeled[0], peeled[1] or container
                text = decode(text.encode("utf-8", "replace"))
                continue
        if text.startswith((" ", "\t")) and "|" in text[:8]:  # Buildkite "  | …" indent
            text = re.sub(r"^\s*\|\s?", "", text, count=1)
        for _name, pattern in _wrappers() if _MAYBE_WRAPPED.match(text) else ():
            m = pattern.match(text)
            if m and _name == "box":
                text = re.sub(r"\s*[│┃]\s*$", "", text[m.end() :])
                break
            if m and m.end() > 0:
                groups = m.groupdict()
                if groups.get("container"):
                    container = groups["container"]
                if groups.get("rank") is not None:
                    rank = int(groups["rank"])
                text = text[m.end() :]
                break
        m = _PROC.match(text)
        if m:
            proc, pid = m.group("proc").strip(), int(m.group("pid"))
            rm = _RANK_IN_PROC.search(proc)
            if rm:
                rank = int(rm.group(1))
            text = text[m.end() :]
        if text.endswith("]") and "repeated" in text:
            rep = re.search(_REPEATED, text)
            if rep:
                repeated = int(rep.group(1))
                text = text[: rep.start()]
        header = _vllm_header(text)
        if header:
            level, stamp, src, text = header
            break  # vLLM's own header is the innermost wrapper
        if text == before:
            break
    if level is None and not text[:1].isspace():
        # VLLM_LOGGING_PREFIX (0.6.4+): a literal the operator set, before vLLM's header
        # ("[svc-a] INFO 05-01 12:00:00 [api_server.py:1000] …", or a clock `ts` adds)
        found = _PREFIXED_HEADER.search(text, 0, 80)
        header = _vllm_header(text[found.start() + 1 :]) if found and found.start() > 0 else None
        if header:
            level, stamp, src, text = header
    if text.startswith("**") and text.endswith("**") and len(text) > 4:
        text = text[2:-2]  # a message a paste set in markdown bold ("**CUDA error: …**")
    origin = Origin(proc, pid, rank, container, level, stamp, src, repeated)
    return text, (NO_ORIGIN if origin == NO_ORIGIN else origin)


_EMBEDDED_PROC = r"(?<=\S)\s*(?=\((?:[A-Za-z_][\w\-: ]*?) pid=\d+(?:, ip=[\w.:-]+)?\) )"  # compiled on first use


def _maybe_embedded(text: str) -> bool:
    """Cheap gate for the per-line hot path: a second process prefix, or one not at the start.
    Most V1 lines hold exactly one `pid=`, in their own leading prefix."""
    count = text.count("pid=")
    if count == 0 or text.lstrip().startswith('{"'):
        return False  # a JSON log record (docker, k8s) carries its line in a field: peeled whole
    return count > 1 or not text.lstrip().startswith("(")


def _split_records(text: str) -> list[str]:
    pieces = [p for p in re.split(_EMBEDDED_PROC, text) if p.strip()]
    out: list[str] = []
    carry = ""
    for piece in pieces:
        if not peel(piece)[0].strip() and piece is not pieces[-1]:
            # a wrapper's prefix alone ("vllm-1  |" of docker compose) belongs to the record after it
            carry += piece + " "
            continue
        out.append(carry + piece)
        carry = ""
    return out or [text]


# High-volume serving lines (stats, access log, request log). They never carry start-up facts,
# and user prompts inside them must not be read as errors, so they are passed over unpeeled.
SERVING_MARKERS = (
    "Avg prompt throughput",
    'HTTP/1.1" ',
    'HTTP/1.1\\" ',  # (the access log inside a JSON log record, its quote escaped)
    "Received request ",
    "Added request ",
    "Finished request ",
    "Aborted request ",
    "Engine 000: ",
)


_SERVING_BYTES = tuple(m.encode() for m in SERVING_MARKERS)


# what a run of serving lines becomes: their text is never read, but that the engine served is
# the start-up's outcome (a log pasted from a running server, an RL rollout)
SERVED = "<vLLM served requests: stats or access-log lines>"


def is_serving(text: str | bytes) -> bool:
    markers = _SERVING_BYTES if isinstance(text, bytes) else SERVING_MARKERS
    if not any(marker in text for marker in markers):  # type: ignore[operator]
        return False
    # (the stats logger also prints the KV cache's size once, at start-up: "Engine 000: vllm
    # cache_config_info with initialization after num_gpu_blocks is: 3518")
    return (b"cache_config_info" if isinstance(text, bytes) else "cache_config_info") not in text  # type: ignore[operator]


def normalise(raw_lines: Iterable[bytes | str | tuple[int, bytes]], start: int = 1) -> Iterator[Line]:
    """Decode and peel each physical line, keeping its original number (given as a pair by
    :func:`iter_sparse_lines`, else counted from `start`)."""
    number = start - 1
    raw: bytes | str
    serving = False
    for item in raw_lines:
        if isinstance(item, tuple):
            number, raw = item
        else:
            number, raw = number + 1, item
        if is_serving(raw):  # checked before decoding: most lines of a long log are these
            yield Line(number, "" if serving else SERVED, "", NO_ORIGIN)  # the first of a run says so
            serving = True
            continue
        serving = False
        text = decode(raw) if isinstance(raw, bytes) else decode(raw.encode("utf-8", "replace"))
        if _maybe_embedded(text) and re.compile(_EMBEDDED_PROC).search(text, 1):
            for piece in _split_records(text):  # records run together in a flattened paste
                message, origin = peel(piece)
                yield Line(number, message, piece, origin)
            continue
        message, origin = peel(text)
        yield Line(number, message, text, origin)
        if '"exc_info": "' in text and text.lstrip().startswith("{") and not _HANDLED.search(text):
            # a JSON log record that carries its traceback in a field of its own (NVIDIA NIM's
            # logger: "message" empty, "exc_info": "Traceback …\n  File …"): one line each
            for extra in _exc_info_lines(text):
                yield Line(number, extra, extra, origin)
