from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
CORPUS = FIXTURES / "corpus"


@pytest.fixture
def corpus() -> Path:
    return CORPUS


@pytest.fixture(autouse=True)
def _rule_cache_in_tmp(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI keeps compiled rules in the user's cache directory: tests use their own."""
    monkeypatch.setenv("KVDOCTOR_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "kvdoctor-cache"))
