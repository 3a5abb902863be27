"""A log reads the same however it was carried: through docker compose, Kubernetes (CRI and JSON
lines), journald, a time-stamped log shipper, Ray, a markdown quote, code fence or indented block,
a page that double-spaced it, a terminal's colours or CR-LF line ends, HTML escaping, or an
80-column terminal that cut every long line. Each development-corpus log is re-carried each way
(the forms of `benchmarks/paste_forms.py`) and must give the same verdict and first remedy."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "fixtures" / "corpus"
LOGS = [entry["file"] for entry in yaml.safe_load((CORPUS / "labels.yaml").read_text(encoding="utf-8"))]

_spec = importlib.util.spec_from_file_location("paste_forms", ROOT / "benchmarks" / "paste_forms.py")
assert _spec and _spec.loader
forms = importlib.util.module_from_spec(_spec)
sys.modules["paste_forms"] = forms
_spec.loader.exec_module(forms)

# already re-wrapped by hand at other widths in the thread: cut again at 80, its sentence is lost
NOT_AT_80 = {"075-v1-kaito-k8s-h100-preset-maxlen-1048576.log"}


@pytest.mark.parametrize("name", LOGS, ids=[n[:40] for n in LOGS])
def test_every_way_of_carrying_a_log_gives_the_same_answer(name: str) -> None:
    lines = (CORPUS / name).read_text(encoding="utf-8", errors="replace").split("\n")
    plain = forms.answer("\n".join(lines))
    for form, carry in forms.FORMS.items():
        if form == "80-columns" and name in NOT_AT_80:
            continue
        assert forms.answer("\n".join(carry(lines))) == plain, form
