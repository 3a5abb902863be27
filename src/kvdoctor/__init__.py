"""kvdoctor: diagnose vLLM start-up memory failures from their logs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from kvdoctor.report import Report

__all__ = ["__version__", "diagnose"]


def diagnose(source: Any, **kwargs: Any) -> Report:
    """Diagnose a log; see :func:`kvdoctor.api.diagnose`."""
    from kvdoctor.api import diagnose as _diagnose

    return _diagnose(source, **kwargs)
