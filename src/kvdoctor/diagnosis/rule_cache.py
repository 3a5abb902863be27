"""Compiled rules kept on disk between runs (issue 11): parsing 26 YAML files and compiling their
conditions with lark costs more than the diagnosis itself. The cache file is named by a digest of
kvdoctor's version and every rule file's name and bytes in every directory, so a changed, added or
removed file is never served stale; a missing, unreadable or corrupt cache file is rebuilt without
a word. A broken rule file is never cached: compiling it raises as before. The directory is passed
in by the face that owns it (the CLI, the server); the library default is no cache at all."""

from __future__ import annotations

import os
import pickle
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

from kvdoctor._version import __version__
from kvdoctor.diagnosis.rules import Rule

FORMAT = 2  # bump when the pickled classes change shape (2: kvdoctor._record, not dataclasses)
KEEP = 8  # cache files kept per directory (one per rule set and version seen recently)


def digest(dirs: Sequence[Path]) -> str:
    """CRC-32 and Adler-32 of the version and every rule file's name and bytes, with their total
    length: 64 check bits against an accidental match, which is all a key to the user's own files
    needs, and zlib is loaded already (hashlib's OpenSSL costs a cold start ~3 ms)."""
    parts = [f"kvdoctor {__version__} rules-cache {FORMAT}".encode()]
    for directory in dirs:
        # the resolved path is part of the key: examples hold paths relative to their rule file
        parts.append(str(directory.resolve()).encode() + b"\0")
        for path in sorted(directory.glob("*.yaml")):
            parts.append(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    data = b"".join(parts)
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}{len(data):x}"


def load_cached(dirs: Sequence[Path], cache_dir: Path | None, compile_rules: Callable[[], list[Rule]]) -> list[Rule]:
    """The compiled rules of `dirs`, from `cache_dir` when it holds them, else compiled and stored."""
    if cache_dir is None:
        return compile_rules()
    try:
        target = cache_dir / f"rules-{digest(dirs)}.pickle"
    except OSError:
        return compile_rules()  # a rule directory that cannot be read: compiling reports it
    cached = _read(target)
    if cached is not None:
        return cached
    rules = compile_rules()
    _write(target, rules)
    return rules


def _read(path: Path) -> list[Rule] | None:
    try:
        with path.open("rb") as fh:
            # our own file in the user's cache directory, named by a digest of what it holds
            rules = pickle.load(fh)  # noqa: S301
    except Exception:  # noqa: BLE001 - missing, truncated, from another version: rebuild
        return None
    if isinstance(rules, list) and rules and all(isinstance(r, Rule) for r in rules):
        return rules
    return None


def _write(path: Path, rules: list[Rule]) -> None:
    try:
        import tempfile  # only when writing (tempfile pulls in shutil, random, …)

        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".rules-", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(rules, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)  # atomic: a reader sees the old file or the whole new one
        _prune(path.parent)
    except OSError:
        pass  # a read-only or full cache directory costs speed, never a diagnosis


def _prune(directory: Path) -> None:
    files = sorted(directory.glob("rules-*.pickle"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in files[KEEP:]:
        old.unlink(missing_ok=True)
