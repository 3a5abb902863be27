"""kvdoctor: diagnose vLLM start-up memory failures from their logs."""

from __future__ import annotations

from kvdoctor._version import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from kvdoctor.diagnosis.report import Report

__all__ = ["__version__", "diagnose"]


def diagnose(source: Any, **kwargs: Any) -> Report:
    """Diagnose a log; see :func:`kvdoctor.api.diagnose`."""
    from kvdoctor.api import diagnose as _diagnose

    return _diagnose(source, **kwargs)
