"""Number and size conversions shared by the extractors and the condition language."""

from __future__ import annotations

GIB = 1 << 30
_FACTORS = {
    "b": 1 / GIB,
    "bytes": 1 / GIB,
    "kib": 1 / (1 << 20),
    "kb": 1 / (1 << 20),
    "mib": 1 / 1024,
    "mb": 1 / 1024,
    "gib": 1.0,
    "gb": 1.0,  # vLLM prints GiB labelled "GB" (bytes / 2**30) in several eras
    "tib": 1024.0,
    "tb": 1024.0,
}


def to_int(text: str) -> int:
    """'447,104' -> 447104."""
    return int(text.replace(",", "").replace("_", ""))


def to_float(text: str) -> float:
    return float(text.replace(",", ""))


def size_gib(value: str, unit: str) -> float:
    """A size with its unit ('112.00', 'MiB') as GiB; unknown units are taken as GiB."""
    return to_float(value) * _FACTORS.get(unit.strip().lower(), 1.0)


def bytes_or_gib(text: str) -> float:
    """A bare figure that older vLLM prints in bytes and newer in GiB: large means bytes."""
    number = to_float(text)
    return round(number / GIB, 4) if number > 1e5 else number
