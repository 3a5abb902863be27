"""Stage 1: bytes -> normalised lines.

Decodes without ever failing (invalid UTF-8 becomes U+FFFD), drops ANSI colour codes in their raw
and pasted forms, keeps the last frame of carriage-return progress bars, and peels the wrappers that
real pastes carry (docker-compose, Kubernetes/CRI, Cloud Logging, CloudWatch, Buildkite, FastChat,
TorchServe, JSON lines, Ray and vLLM process prefixes, torch `[rankN]:`, vLLM's own header). Every
line keeps its ORIGINAL 1-based number and what was peeled off.
"""

from __future__ import annotations

import gzip
import io
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO


@dataclass(frozen=True, slots=True)
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


NO_ORIGIN = Origin()


@dataclass(frozen=True, slots=True)
class Line:
    number: int  # 1-based line number in the original input
    text: str  # the message, wrappers peeled
    raw: str  # the decoded line before peeling (ANSI stripped), for evidence
    origin: Origin = NO_ORIGIN


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
        p = Path(path)
        if p.is_dir():
            raise InputError(f"{path}: is a directory; pass a log file (or '-' for stdin)")
        try:
            stream = p.open("rb")
        except FileNotFoundError:
            raise InputError(f"{path}: no such file; check the path") from None
        except PermissionError:
            raise InputError(f"{path}: permission denied; check the file's permissions") from None
        except OSError as exc:
            raise InputError(f"{path}: cannot open ({exc.strerror}); check the path") from None
    return _maybe_gunzip(stream)


def _maybe_gunzip(stream: BinaryIO) -> BinaryIO:
    buffered = stream if isinstance(stream, io.BufferedReader) else io.BufferedReader(stream)  # type: ignore[arg-type]
    head = buffered.peek(2)[:2]
    if head == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=buffered)  # type: ignore[return-value]
    return buffered  # type: ignore[return-value]


def iter_raw_lines(stream: BinaryIO) -> Iterator[bytes]:
    """Yield physical lines (without the trailing newline) in bounded memory."""
    tail = b""
    read = getattr(stream, "read1", stream.read)  # read1: a truncated gzip still yields its start
    while True:
        try:
            chunk = read(CHUNK)
        except (OSError, EOFError) as exc:  # truncated gzip, I/O error: keep what we have
            if tail:
                yield tail
            raise InputError(f"read error after partial input ({exc}); the rest is ignored") from None
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


# --- normalising text ---------------------------------------------------------------------------

# Raw ESC sequences and the forms they take in pastes: "#033[", "^[[", a literal "\x1b[" / "\033[",
# and the bare "[1;36m" left when a paste drops the ESC byte (seen in docker logs of 0.4.2..0.11.2).
_ANSI = re.compile(
    r"(?:\x1b|#033|\^\[|\\x1b|\\033|\\u001b|\\e)\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|"
    r"\[(?:\d{1,3}(?:;\d{1,3})*)m"
)


def decode(raw: bytes) -> str:
    text = raw.decode("utf-8", errors="replace")
    if "\r" in text:
        text = text.rstrip("\r")
        if "\r" in text:  # a progress bar redrawn with CR: keep the last frame that has text
            frames = [f for f in text.split("\r") if f.strip()]
            text = frames[-1] if frames else ""
    if "[" in text:
        text = _ANSI.sub("", text)
    if "\x00" in text:
        text = text.replace("\x00", "")
    return text


# --- peeling wrappers -----------------------------------------------------------------------------

_ISO = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
_WRAPPERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # docker compose: "vllm-1  | …", "vllm_1 | …"
    ("compose", re.compile(r"^(?P<container>[A-Za-z0-9][\w.-]*)\s+\|\s?(?=\S|$)")),
    # FastChat: "2024-01-01 12:00:00 | ERROR | stderr | …"
    ("fastchat", re.compile(rf"^{_ISO} \| [A-Z]+ \| (?P<container>[\w.-]+) \| ")),
    # TorchServe: "2024-09-13T22:25:38,258 [INFO ] W-9000-model_1.0-stdout MODEL_LOG - …"
    ("torchserve", re.compile(rf"^{_ISO} \[[A-Z]+ *\] (?P<container>\S+) MODEL_LOG - ")),
    # Kubernetes CRI: "2024-…Z stdout F …"
    ("cri", re.compile(rf"^{_ISO} (?P<container>stdout|stderr) [FP] ")),
    # Buildkite: "  | [2024-…Z] …" and "_bk;t=1714567890123\x07"
    ("buildkite", re.compile(rf"^(?:\s*\|\s*)?\[{_ISO}\]\s?|^_bk;t=\d+\x07?")),
    # HF transformers / LlamaFactory: "[WARNING|logging.py:329] 2025-03-10 21:43:12,326 >> "
    ("hf", re.compile(r"^\[[A-Z]+\|[\w.]+:\d+\] [\d-]+ [\d:,]+ >> ")),
    # CloudWatch / Cloud Logging / kubectl --timestamps: a leading ISO timestamp, optional severity
    ("stamp", re.compile(rf"^\[?{_ISO}\]?(?:\t[\w-]*\t|\s+)(?:\[?(?:info|INFO|warn|WARN|error|ERROR|DEFAULT)\]?\s+(?!\d\d-\d\d \d\d:))?")),
    # glog (torch, klog): "W1223 23:34:22.775000 1116 torch/utils/x.py:2425] "
    ("glog", re.compile(r"^\[?[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [\w./-]+:\d+\]\s?")),
    # platform prefixes: "[vllm]: " (Akash), torch elastic "[rank0]: "
    ("rank", re.compile(r"^\[rank(?P<rank>\d+)\]:\s?")),
    ("tag", re.compile(r"^\[(?P<container>[A-Za-z][\w.-]{0,30})\]:\s")),
)

# Ray / vLLM process prefix; the leading "(" is sometimes lost in pastes (corpus 003).
_PROC = re.compile(
    r"^\(?(?P<proc>[A-Za-z_][\w\- ]*?(?: rank=\d+| TP\d+| PP\d+_TP\d+)?) pid=(?P<pid>\d+)"
    r"(?:, ip=[\w.:-]+)?\)\s?"
)
_RANK_IN_PROC = re.compile(r"(?:rank=|TP)(\d+)")  # the tensor-parallel rank, not a DP index
_REPEATED = re.compile(r"\s*\[repeated (\d+)x across cluster\]\s*$")
# vLLM's own header, every era: "INFO 04-27 10:13:05 llm_engine.py:275] " and
# "INFO 05-16 18:43:01 [gpu_model_runner.py:1186] " (DEBUG paths may hold "/" and "...").
_HEADER = re.compile(
    r"^(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) (?P<stamp>\d\d-\d\d \d\d:\d\d:\d\d)"
    r"(?:[.,]\d+)? \[?(?P<src>[^\]\s]+?):(?P<lineno>\d+)\] ?"
)
_JSON_KEYS = ("log", "message", "msg", "textPayload", "MESSAGE")


def _peel_json(text: str) -> tuple[str, str | None] | None:
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
        for name, pattern in _WRAPPERS:
            m = pattern.match(text)
            if m and m.end() > 0:
                groups = m.groupdict()
                if groups.get("container"):
                    container = groups["container"]
                if groups.get("rank") is not None:
                    rank = int(groups["rank"])
                text = text[m.end():]
                break
        m = _PROC.match(text)
        if m:
            proc, pid = m.group("proc").strip(), int(m.group("pid"))
            rm = _RANK_IN_PROC.search(proc)
            if rm:
                rank = int(rm.group(1))
            text = text[m.end():]
        if text.endswith("]") and "repeated" in text:
            rep = _REPEATED.search(text)
            if rep:
                repeated = int(rep.group(1))
                text = text[: rep.start()]
        m = _HEADER.match(text)
        if m:
            level, stamp = m.group("level"), m.group("stamp")
            bracket = "[" if text[m.start("src") - 1] == "[" else ""
            src = f"{bracket}{m.group('src')}:{m.group('lineno')}"
            text = text[m.end():]
        if text == before:
            break
    origin = Origin(proc, pid, rank, container, level, stamp, src, repeated)
    return text, (NO_ORIGIN if origin == NO_ORIGIN else origin)


def normalise(raw_lines: Iterable[bytes | str], start: int = 1) -> Iterator[Line]:
    """Decode and peel each physical line, keeping its original number."""
    for number, raw in enumerate(raw_lines, start):
        text = decode(raw) if isinstance(raw, bytes) else decode(raw.encode("utf-8", "replace"))
        message, origin = peel(text)
        yield Line(number, message, text, origin)
