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

from kvdoctor._version import __version__
from kvdoctor.diagnosis.rules import Rule

TYPE_CHECKING = False
if TYPE_CHECKING:
    from kvdoctor.diagnosis.rules import StrPath

FORMAT = 2  # bump when the pickled classes change shape (2: kvdoctor._record, not dataclasses)
KEEP = 8  # cache files kept per directory (one per rule set and version seen recently)


def _rule_files(directory: str) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.endswith(".yaml"))


def digest(dirs: Sequence[StrPath]) -> str:
    """CRC-32 and Adler-32 of the version and every rule file's name and bytes, with their total
    length: 64 check bits against an accidental match, which is all a key to the user's own files
    needs, and zlib is loaded already (hashlib's OpenSSL costs a cold start ~3 ms)."""
    parts = [f"kvdoctor {__version__} rules-cache {FORMAT}".encode()]
    for entry in dirs:
        directory = os.path.realpath(os.fspath(entry))
        # the resolved path is part of the key: examples hold paths relative to their rule file
        parts.append(directory.encode() + b"\0")
        for name in _rule_files(directory):
            with open(os.path.join(directory, name), "rb") as fh:
                parts.append(name.encode() + b"\0" + fh.read() + b"\0")
    data = b"".join(parts)
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}{len(data):x}"


def load_cached(
    dirs: Sequence[StrPath], cache_dir: StrPath | None, compile_rules: Callable[[], list[Rule]]
) -> list[Rule]:
    """The compiled rules of `dirs`, from `cache_dir` when it holds them, else compiled and stored.
    Paths are plain strings here (os.path): pathlib costs a cold start ~3 ms."""
    if cache_dir is None:
        return compile_rules()
    try:
        target = os.path.join(os.fspath(cache_dir), f"rules-{digest(dirs)}.pickle")
    except OSError:
        return compile_rules()  # a rule directory that cannot be read: compiling reports it
    cached = _read(target)
    if cached is not None:
        return cached
    rules = compile_rules()
    _write(target, rules)
    return rules


def _read(path: str) -> list[Rule] | None:
    try:
        with open(path, "rb") as fh:
            # our own file in the user's cache directory, named by a digest of what it holds
            rules = pickle.load(fh)  # noqa: S301
    except Exception:  # noqa: BLE001 - missing, truncated, from another version: rebuild
        return None
    if isinstance(rules, list) and rules and all(isinstance(r, Rule) for r in rules):
        return rules
    return None


def _write(path: str, rules: list[Rule]) -> None:
    try:
        import tempfile  # only when writing (tempfile pulls in shutil, random, …)

        directory = os.path.dirname(path)
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".rules-", suffix=".tmp", dir=directory)
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(rules, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)  # atomic: a reader sees the old file or the whole new one
        _prune(directory)
    except OSError:
        pass  # a read-only or full cache directory costs speed, never a diagnosis


def _prune(directory: str) -> None:
    names = [n for n in os.listdir(directory) if n.startswith("rules-") and n.endswith(".pickle")]
    files = sorted((os.path.join(directory, n) for n in names), key=os.path.getmtime, reverse=True)
    for old in files[KEEP:]:
        try:
            os.unlink(old)
        except FileNotFoundError:
            pass
