"""`kvdoctor scan --format html`: one self-contained page, everything escaped, and it works in a
real headless browser (Chromium from the system packages; skipped where none is installed)."""

from __future__ import annotations

import re
import shutil
import subprocess
from html import unescape
from pathlib import Path

import pytest
from browser import CHROMIUM, headless

from kvdoctor.cli import main

ROOT = Path(__file__).parents[1]
CORPUS = ROOT / "tests" / "fixtures" / "corpus"
HOSTILE = '<img src=x onerror="alert(1)">&\'q.log'


@pytest.fixture
def page(tmp_path: Path) -> Path:
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    for log in sorted(CORPUS.glob("*.log"))[:12]:
        shutil.copy(log, fleet / log.name)
    shutil.copy(CORPUS / "051-v1-011-qwen3-14b-lmcache-healthy.log", fleet / HOSTILE)
    (fleet / "empty.log").write_bytes(b"")
    out = tmp_path / "report.html"
    assert main(["scan", "--format", "html", "--output", str(out), "--jobs", "2", str(fleet)]) == 2
    return out


def test_the_page_is_self_contained_and_escapes_file_names(page: Path) -> None:
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!doctype html>")
    assert "http://" not in html and "https://" not in html  # nothing to fetch
    assert not re.search(r"<(?:link|img|iframe|object|embed)\b|<[^>]*\s(?:src|srcset)=|@import|url\(", html)
    assert "default-src 'none'" in html  # and the browser is told to fetch nothing
    assert html.count("<script>") == 1
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&amp;&#x27;q.log" in html
    assert html.count("<svg") == 6  # a chart per grouping
    assert html.count("<tr data-by_verdict=") == 14


def _dom(page: Path, fragment: str, profile: Path) -> str:
    proc = subprocess.run(
        [
            *headless(profile),
            "--dump-dom",
            page.as_uri() + fragment,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _rows(dom: str) -> list[tuple[bool, list[str]]]:
    """(hidden, cell texts) per table row, in page order."""
    body = dom.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    rows = []
    for attrs, cells in re.findall(r"<tr([^>]*)>(.*?)</tr>", body, re.S):
        rows.append(("hidden" in attrs, [unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", cells, re.S)]))
    return rows


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed")
def test_in_a_browser_the_table_sorts_and_a_bar_filters_it(page: Path, tmp_path: Path) -> None:
    dom = _dom(page, "", tmp_path / "profile")
    assert 'data-ready="1"' in dom  # the script ran under the page's Content-Security-Policy
    assert "<img" not in dom.split("<tbody>", 1)[1]  # the hostile file name stayed text
    assert any(cells[0].endswith("/" + HOSTILE) for _, cells in _rows(dom))
    rows = _rows(dom)
    assert len(rows) == 14 and not any(hidden for hidden, _ in rows)
    assert [cells[0] for _, cells in rows] == sorted(cells[0] for _, cells in rows)  # by path, as written

    dom = _dom(page, "#sort=exit:desc", tmp_path / "profile")
    exits = [int(cells[10]) for _, cells in _rows(dom)]
    assert exits == sorted(exits, reverse=True) and exits[0] == 2
    assert 'data-col="exit" data-num="" aria-sort="descending"' in dom

    # the bar of `healthy` links to the table filtered to those files
    link = re.search(r'<a href="(#filter=by_verdict:healthy)">', page.read_text(encoding="utf-8"))
    assert link is not None
    dom = _dom(page, link.group(1), tmp_path / "profile")
    shown = [cells for hidden, cells in _rows(dom) if not hidden]
    assert shown and all(cells[1] == "healthy" for cells in shown)
    assert len(shown) < 14
    assert f'<span id="shown">{len(shown)} of 14 files (verdict: healthy)</span>' in dom
