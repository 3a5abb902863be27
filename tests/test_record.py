"""kvdoctor._record: the frozen records of the core behave as the dataclasses they replace."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from kvdoctor._record import field, record, replace
from kvdoctor.reader.events import Event
from kvdoctor.reader.lines import NO_ORIGIN, Line, Origin

ROOT = Path(__file__).resolve().parents[1]


@record
class Remedy:
    action: str
    value: float | None = None
    notes: list[str] = field(default_factory=list)


@record(slots=True)
class Point:
    x: int
    y: int = 0


@record(frozen=False)
class Builder:
    index: int
    items: list[int] = field(default_factory=list)


def test_fields_by_position_or_name_with_defaults_and_fresh_factories() -> None:
    a, b = Remedy("lower_max_model_len"), Remedy(action="lower_max_model_len", value=None)
    assert a == b and a.notes == [] and a.notes is not b.notes
    assert Remedy("x", 0.9, ["n"]).notes == ["n"]
    assert repr(Point(1)) == "Point(x=1, y=0)"
    assert Point(1, 2) != Point(2, 1) and Point(1, 2) == Point(x=1, y=2)
    assert Point(1) != (1, 0)  # a record equals only its own kind


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Remedy(), "missing required argument: 'action'"),
        (lambda: Remedy("a", 1.0, [], "extra"), "takes 3 positional arguments but 4 were given"),
        (lambda: Remedy("a", actoin="b"), "unexpected keyword argument 'actoin'"),
        (lambda: Remedy("a", action="b"), "multiple values for argument 'action'"),
    ],
)
def test_wrong_arguments_are_type_errors_as_with_dataclasses(make: object, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        make()  # type: ignore[operator]


def test_frozen_records_refuse_assignment_and_hash_by_value() -> None:
    p = Point(1, 2)
    with pytest.raises(AttributeError, match="frozen Point"):
        p.x = 3  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del p.y  # type: ignore[misc]
    assert {Point(1, 2), Point(1, 2)} == {p}
    assert not hasattr(p, "__dict__")  # slots=True: no per-instance dict


def test_a_mutable_record_can_be_filled_and_is_unhashable() -> None:
    b = Builder(0)
    b.items.append(1)
    b.index = 2
    assert b == Builder(2, [1])
    with pytest.raises(TypeError):
        hash(b)


def test_replace_copies_with_changes_and_refuses_unknown_fields() -> None:
    p = Point(1, 2)
    assert replace(p, y=5) == Point(1, 5) and p == Point(1, 2)
    with pytest.raises(TypeError, match="no field 'z'"):
        replace(p, z=1)


def test_records_survive_pickle_as_the_rules_cache_stores_them() -> None:
    for value in (Remedy("a", 0.5, ["x"]), Point(3, 4), Line(7, "text", "raw", Origin(proc="EngineCore", pid=12))):
        assert pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)) == value


def test_the_per_line_records_keep_their_written_out_initialisers() -> None:
    line = Line(3, "msg", "raw")
    assert line.origin is NO_ORIGIN and Event("k", 3, "t").fields == {}
    assert Origin("p", 1, 0, None, "INFO").level == "INFO"
    assert Event("k", 1, "t", {"a": 1}, NO_ORIGIN) == Event("k", 1, "t", {"a": 1})


def test_a_cached_cold_run_imports_no_parser_no_dataclasses_and_no_typing(tmp_path: Path) -> None:
    """Issue 11: the cached path of `diagnose` and `facts` loads no lark, yaml, regex or rich, and
    none of `dataclasses` or `typing` (with `inspect`, `ast`), which cost a cold start most."""
    log = ROOT / "tests" / "fixtures" / "corpus" / "039-v1-h100nvl-weights-create-oom-wrong-gpu.log"
    code = (
        "import json, sys\n"
        "from kvdoctor.cli import main\n"
        f"main([sys.argv[1], '--format', 'json', {str(log)!r}])\n"
        "heavy = ('lark', 'yaml', 'regex', 'rich', 'dataclasses', 'typing', 'inspect', 'ast', 'shutil', 'pathlib')\n"
        "sys.stderr.write(json.dumps(sorted(m for m in heavy if m in sys.modules)))\n"
    )
    env = {**os.environ, "KVDOCTOR_CACHE_DIR": str(tmp_path / "cache")}

    def heavy_modules(command: str) -> list[str]:
        proc = subprocess.run([sys.executable, "-c", code, command], capture_output=True, text=True, env=env)
        loaded: list[str] = json.loads(proc.stderr.strip().splitlines()[-1])
        return loaded

    heavy_modules("diagnose")  # the first run compiles the rules (lark, yaml) and fills the cache
    assert heavy_modules("diagnose") == []
    assert heavy_modules("facts") == []
