"""What to scan: PATH arguments -> one `Target` per file, lazily, in a stable order.

Local paths are files, folders (walked recursively, hidden entries skipped) and globs (`**` too);
`scheme://` URLs (s3://, gs://, az://, file://, memory://, …) go through fsspec, which is an
optional extra, as is the filesystem package of each scheme (s3fs, gcsfs, adlfs, …)."""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from kvdoctor.reader.lines import InputError

_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
_MAGIC = re.compile(r"[*?[]")
BUCKETS_EXTRA = "pip install 'kvdoctor[buckets]'"


@dataclass(frozen=True, slots=True)
class Target:
    name: str  # as reports show it: the path as given or found, or the URL
    location: str  # what a worker opens: an absolute local path, or the URL
    error: str | None = None  # the folder or bucket listing failed: nothing to open

    @property
    def is_url(self) -> bool:
        return _URL.match(self.location) is not None


class BucketError(Exception):
    """A URL that cannot be read on this installation; the message is one line with the fix."""


def is_url(path: str) -> bool:
    return _URL.match(path) is not None


def check_urls(paths: Iterable[str]) -> None:
    """Raise BucketError before the scan starts when a URL's scheme cannot be read here."""
    for path in paths:
        if is_url(path):
            _filesystem_class(path)


def _filesystem_class(url: str) -> Any:
    scheme = url.split("://", 1)[0].lower()
    package = _PACKAGES.get(scheme)
    try:
        import fsspec  # type: ignore[import-untyped]
    except ImportError:
        raise BucketError(f"{url}: reading {scheme}:// URLs needs fsspec; {BUCKETS_EXTRA}{_also(package)}") from None
    try:
        return fsspec.get_filesystem_class(scheme)
    except ImportError as exc:
        package = package or _registry_package(scheme)
        if package is None:  # one of fsspec's own filesystems, with its own requirements (http: aiohttp)
            raise BucketError(f"{url}: {exc}; install that next to {BUCKETS_EXTRA}") from None
        raise BucketError(f"{url}: reading {scheme}:// needs {package}; {BUCKETS_EXTRA} {package}") from None
    except ValueError:
        raise BucketError(
            f"{url}: fsspec knows no {scheme}:// filesystem; use s3://, gs://, az://, … or a local path"
        ) from None


# scheme -> the package that reads it (fsspec's registry says the same, once fsspec is installed)
_PACKAGES = {
    "s3": "s3fs",
    "s3a": "s3fs",
    "gs": "gcsfs",
    "gcs": "gcsfs",
    "az": "adlfs",
    "abfs": "adlfs",
    "abfss": "adlfs",
    "adl": "adlfs",
    "hf": "huggingface_hub",
}


def _also(package: str | None) -> str:
    return f" {package}" if package else ""


def _registry_package(scheme: str) -> str | None:
    from fsspec.registry import known_implementations  # type: ignore[import-untyped]

    package = str(known_implementations.get(scheme, {}).get("class", "fsspec.")).split(".", 1)[0]
    return None if package == "fsspec" else package


def expand(paths: Iterable[str], *, exclude: Iterable[str] = ()) -> Iterator[Target]:
    """Every file named by `paths`, each once; a PATH that names nothing still yields a target,
    whose reading then fails with "no such file" (a scan reports it and goes on)."""
    seen = {os.path.abspath(p) for p in exclude}
    for path in paths:
        found = _expand_url(path) if is_url(path) else _expand_local(path)
        for target in found:
            if target.location not in seen:
                seen.add(target.location)
                yield target


def _expand_local(path: str) -> Iterator[Target]:
    if _MAGIC.search(path) and not os.path.lexists(path):
        matches = sorted(glob.glob(path, recursive=True))
        if not matches:
            yield Target(path, os.path.abspath(path), "no file matches this pattern; check the glob")
        for match in matches:
            yield from _walk(match) if os.path.isdir(match) else [Target(match, os.path.abspath(match))]
    elif os.path.isdir(path):
        yield from _walk(path)
    else:
        yield Target(path, os.path.abspath(path))


def _walk(folder: str) -> Iterator[Target]:
    failures: list[OSError] = []
    for root, dirs, files in os.walk(folder, onerror=failures.append):
        yield from _failed(failures, folder)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if not name.startswith("."):
                path = os.path.join(root, name)
                yield Target(path, os.path.abspath(path))
    yield from _failed(failures, folder)


def _failed(failures: list[OSError], folder: str) -> Iterator[Target]:
    while failures:
        failed = failures.pop(0)
        where = str(failed.filename or folder)
        yield Target(
            where, os.path.abspath(where), f"cannot list this folder ({failed.strerror}); check its permissions"
        )


def _expand_url(url: str) -> Iterator[Target]:
    from fsspec.core import url_to_fs  # type: ignore[import-untyped]

    try:
        fs, root = url_to_fs(url)
        if _MAGIC.search(root):
            matches = sorted(fs.glob(root))
            files = [f for m in matches for f in (sorted(fs.find(m)) if fs.isdir(m) else [m])]
        else:
            files = sorted(fs.find(root)) if fs.isdir(root) else [root]
    except (OSError, ValueError) as exc:
        yield Target(url, url, f"cannot list ({exc}); check the URL and the credentials")
        return
    if not files:
        yield Target(url, url, "no object matches this URL; check the bucket and the prefix")
    for name in files:
        if not name.rsplit("/", 1)[-1].startswith("."):
            full = fs.unstrip_protocol(name)
            yield Target(full, full)


def open_url(url: str) -> BinaryIO:
    """Open a bucket object for binary reading, or raise InputError (one line, with the URL)."""
    import fsspec

    try:
        stream: BinaryIO = fsspec.open(url, "rb").open()
    except FileNotFoundError:
        raise InputError(f"{url}: no such object; check the URL") from None
    except PermissionError:
        raise InputError(f"{url}: permission denied; check the credentials") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{url}: cannot open ({exc}); check the URL and the credentials") from None
    return stream
