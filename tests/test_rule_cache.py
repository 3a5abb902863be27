"""Issue 11: compiled rules are cached on disk, and a changed, added, removed or broken rule file is
never served from a stale cache; a corrupt cache file is rebuilt without a word."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from kvdoctor.diagnosis import rule_cache
from kvdoctor.diagnosis.rules import RuleLoadError, builtin_rules_dir, load_rules

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def rules_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "rules"
    folder.mkdir()
    source = (builtin_rules_dir() / "healthy.yaml").read_text(encoding="utf-8")
    # examples point at the repository's fixtures from wherever the copy lives
    (folder / "healthy.yaml").write_text(source.replace("../tests/", f"{ROOT}/tests/"), encoding="utf-8")
    return folder


def _load(folder: Path, cache: Path) -> list[object]:
    calls: list[int] = []

    def compile_rules() -> list[object]:
        calls.append(1)
        return load_rules([folder])  # type: ignore[return-value]

    rules = rule_cache.load_cached([folder], cache, compile_rules)  # type: ignore[arg-type]
    return [rules, bool(calls)]


def test_the_second_load_comes_from_the_cache(rules_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first, compiled = _load(rules_dir, cache)
    assert compiled and len(list(cache.glob("rules-*.pickle"))) == 1
    second, compiled_again = _load(rules_dir, cache)
    assert not compiled_again
    assert [r.id for r in second] == [r.id for r in first]  # type: ignore[attr-defined]
    assert second[0].when == first[0].when  # type: ignore[index]


def test_a_changed_file_is_compiled_again(rules_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _load(rules_dir, cache)
    path = rules_dir / "healthy.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("priority: 10", "priority: 11"), encoding="utf-8")
    rules, compiled = _load(rules_dir, cache)
    assert compiled and rules[0].priority == 11  # type: ignore[attr-defined]


def test_an_added_file_is_compiled_again(rules_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _load(rules_dir, cache)
    source = (rules_dir / "healthy.yaml").read_text(encoding="utf-8")
    (rules_dir / "second.yaml").write_text(source.replace("id: healthy", "id: second"), encoding="utf-8")
    rules, compiled = _load(rules_dir, cache)
    assert compiled and {r.id for r in rules} == {"healthy", "second"}  # type: ignore[attr-defined]


def test_a_broken_file_is_reported_not_served_from_the_cache(rules_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _load(rules_dir, cache)
    path = rules_dir / "healthy.yaml"
    path.write_text(
        path.read_text(encoding="utf-8").replace("when: coalesce(", "when: and and coalesce("), encoding="utf-8"
    )
    with pytest.raises(RuleLoadError) as err:
        _load(rules_dir, cache)
    assert "healthy.yaml:" in str(err.value) and "syntax error" in str(err.value)


def test_a_corrupt_cache_file_is_rebuilt_silently(rules_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _load(rules_dir, cache)
    (cached,) = cache.glob("rules-*.pickle")
    cached.write_bytes(b"not a pickle")
    rules, compiled = _load(rules_dir, cache)
    assert compiled and rules[0].id == "healthy"  # type: ignore[attr-defined]
    assert cached.read_bytes() != b"not a pickle"


def test_an_unwritable_cache_costs_only_speed(rules_dir: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    rules, compiled = _load(rules_dir, blocker / "cache")  # a cache path below a plain file
    assert compiled and rules[0].id == "healthy"  # type: ignore[attr-defined]


def test_the_cli_uses_the_cache_and_lint_reads_the_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kvdoctor.cli import main

    broken = tmp_path / "broken"
    shutil.copytree(ROOT / "tests" / "fixtures" / "rules-broken", broken)
    assert main(["rules", "lint", str(broken)]) == 2
    out = capsys.readouterr()
    assert ".yaml:" in out.out + out.err
    log = ROOT / "tests" / "fixtures" / "corpus" / "051-v1-011-qwen3-14b-lmcache-healthy.log"
    assert main(["diagnose", "--format", "json", str(log)]) == 0
    capsys.readouterr()
    import os

    assert list(Path(os.environ["KVDOCTOR_CACHE_DIR"]).glob("rules-*.pickle"))


def test_a_one_byte_change_anywhere_changes_the_key(rules_dir: Path) -> None:
    files = sorted(rules_dir.glob("*.yaml"))
    changed = sorted({files[0], files[-1]})
    seen = {rule_cache.digest([rules_dir])}
    for path in changed:
        original = path.read_bytes()
        for i in (0, len(original) // 2, len(original) - 1):
            path.write_bytes(original[:i] + bytes([original[i] ^ 1]) + original[i + 1 :])
            seen.add(rule_cache.digest([rules_dir]))
        path.write_bytes(original)
    assert len(seen) == 1 + 3 * len(changed)
    assert rule_cache.digest([rules_dir]) in seen  # restored: the first key again


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Linux path is the one written out")
@pytest.mark.parametrize("xdg", [None, "", "/srv/cache"])
def test_the_cache_directory_is_platformdirs_answer(monkeypatch: pytest.MonkeyPatch, xdg: str | None) -> None:
    from platformdirs import user_cache_dir

    from kvdoctor.commands._common import cache_dir

    monkeypatch.delenv("KVDOCTOR_CACHE_DIR", raising=False)
    if xdg is None:
        monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    else:
        monkeypatch.setenv("XDG_CACHE_HOME", xdg)
    assert cache_dir() == user_cache_dir("kvdoctor", appauthor=False)
