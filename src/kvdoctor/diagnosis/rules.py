"""Rule files: load, validate and compile `rules/*.yaml` (one rule per file, id = file stem).

Every problem is reported as `path:line:col: message` with the offending line and a caret, and
every broken file is reported in one run (the pySigma `collect_errors` habit).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from kvdoctor._record import field, record
from kvdoctor.diagnosis import conditions
from kvdoctor.diagnosis.conditions import ConditionError, Node
from kvdoctor.reader.facts import is_known

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    import yaml

    StrPath = str | os.PathLike[str]

CLASSES = (
    "no_cache_blocks",
    "max_model_len_too_large",
    "insufficient_free_memory_at_startup",
    "cuda_oom",
    "healthy",
    "other",
    "unknown",  # the outcome is not in the log (it stops before serving or failing)
)
CAUSES = ("utilization_too_low", "other_process", "model_too_large", "profile_overhead")
PHASES = (
    "weight_loading",
    "profile_run",
    "cuda_graph_capture",
    "sampler_warmup",
    "kv_cache_allocation",
    "kernel_warmup",
    "unknown",
)
ACTIONS = (
    "raise_gpu_memory_utilization",
    "lower_gpu_memory_utilization",
    "free_gpu_memory",
    "lower_max_model_len",
    "max_model_len_auto",
    "enforce_eager",
    "reduce_max_num_seqs",
    "reduce_max_num_batched_tokens",
    "increase_tensor_parallel_size",
    "use_quantized_checkpoint",
    "kv_cache_dtype_fp8",
    "set_kv_cache_memory_bytes",
    "raise_cpu_kv_cache_space",
    "lower_cpu_kv_cache_space",
    "fix_environment",
    "fix_config",
    "upgrade_vllm",
    "collect_more_log",
)
SEVERITIES = ("error", "warning", "info")
CONFIDENCES = ("high", "medium", "low")
_FIELDS = {
    "fallback",
    "id",
    "title",
    "class",
    "cause",
    "phase",
    "severity",
    "confidence",
    "confidence_when",
    "priority",
    "define",
    "when",
    "vllm",
    "explain",
    "remedies",
    "avoid",
    "references",
    "examples",
    "evidence",
}
_TEMPLATE_FIELD = re.compile(r"\{([A-Za-z_][\w.]*)(?::([^{}]*))?\}")
_VERSION_BOUND = re.compile(r"^\s*(>=|<=|==|!=|>|<)\s*v?(\d+(?:\.\d+)*(?:\.post\d+)?)\s*$")

Text = dict[str, str]  # language -> text


def _loader() -> type:
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml is ~10x faster; both are safe


@record
class RuleError:
    path: str
    line: int
    column: int
    message: str
    source_line: str = ""

    def __str__(self) -> str:
        head = f"{self.path}:{self.line}:{self.column}: {self.message}"
        if not self.source_line:
            return head
        return f"{head}\n    {self.source_line}\n    {' ' * (self.column - 1)}^"


class RuleLoadError(Exception):
    def __init__(self, errors: list[RuleError]) -> None:
        super().__init__("\n".join(str(e) for e in errors))
        self.errors = errors


@record
class Remedy:
    action: str
    text: Text
    value: Node | None = None
    when: Node | None = None


@record
class Avoid:
    action: str
    why: Text
    when: Node | None = None


@record
class Example:
    expect: str  # fires | silent
    log: str | None  # inline log text
    path: str | None  # a fixture's absolute path (a str: unpickling a Path would import pathlib)
    # a `fires` example must make the rule the verdict, unless the rule is a companion note that
    # speaks beside another verdict (`{log: …, wins: false}`)
    wins: bool = True


@record
class Rule:
    id: str
    path: str
    title: Text
    klass: str
    severity: str
    confidence: str
    priority: int
    when: Node
    defines: dict[str, Node]
    explain: Text
    cause: str | None = None
    phase: str | None = None
    vllm: tuple[tuple[str, str], ...] = ()
    remedies: tuple[Remedy, ...] = ()
    avoid: tuple[Avoid, ...] = ()
    references: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()
    examples: tuple[Example, ...] = field(default_factory=tuple)
    fallback: bool = False  # considered only when no other rule fires (the catch-all)
    # (level, condition) from the rule's ceiling down: a level is granted only while its
    # condition holds; the rule then speaks at the next level down (see rule-authoring.md)
    confidence_when: tuple[tuple[str, Node], ...] = ()


def _builtin_rules_path() -> str:
    here = os.path.dirname(os.path.realpath(__file__))  # os.path: the cached path needs no pathlib
    packaged = os.path.join(os.path.dirname(here), "rules")  # the wheel's copy (not importlib.resources)
    if os.path.isdir(packaged):
        return packaged
    return os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(here))), "rules")  # source tree


def builtin_rules_dir() -> Path:
    from pathlib import Path

    return Path(_builtin_rules_path())


class _Loader:
    """Loads one file, recording errors with positions instead of stopping at the first."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = str(path)
        self.errors: list[RuleError] = []
        self.lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        self.marks: dict[str, yaml.Node] = {}

    def error(self, message: str, line: int, column: int) -> None:
        source = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        self.errors.append(RuleError(self.name, line, max(column, 1), message, source))

    def at(self, key: str, message: str) -> None:
        node = self.marks.get(key)
        line = node.start_mark.line + 1 if node is not None else 1
        col = node.start_mark.column + 1 if node is not None else 1
        self.error(message, line, col)

    def expr(self, key: str, text: Any, node: yaml.Node | None) -> Node | None:
        if not isinstance(text, str):
            self.at(key, f"{key}: expected a condition string")
            return None
        try:
            return conditions.build(text)
        except ConditionError as exc:
            line, col = self._position(node, exc.line, exc.column)
            self.error(f"{key}: {exc.message}", line, col)
            return None

    def _position(self, node: yaml.Node | None, line: int, column: int) -> tuple[int, int]:
        """Map a position inside a scalar back to the YAML file."""
        if node is None:
            return 1, 1
        start = node.start_mark
        style = getattr(node, "style", None)
        if style in ("|", ">"):
            body = start.line + line  # block scalar: content starts on the next line
            indent = len(self.lines[body]) - len(self.lines[body].lstrip()) if body < len(self.lines) else 0
            return body + 1, indent + column
        quote = 1 if style in ("'", '"') else 0
        return start.line + line, (start.column + quote + column if line == 1 else column)


def _text(value: Any) -> Text | None:
    if isinstance(value, str):
        return {"en": value}
    if isinstance(value, dict) and value and all(isinstance(v, str) for v in value.values()):
        return {str(k): v for k, v in value.items()}
    return None


def _mapping_marks(node: yaml.Node) -> dict[str, yaml.Node]:
    import yaml

    if not isinstance(node, yaml.MappingNode):
        return {}
    return {k.value: v for k, v in node.value if isinstance(k, yaml.ScalarNode)}


def load_rule(path: Path, *, lint: bool = False) -> tuple[Rule | None, list[RuleError]]:
    """The rule in `path` and every problem in it; `lint` adds what only `kvdoctor rules lint`
    checks (that each text's languages say the same thing: `_check_parity`)."""
    import yaml

    loader = _Loader(path)
    try:
        text = "\n".join(loader.lines)
        node = yaml.compose(text, Loader=_loader())
        data = yaml.load(text, Loader=_loader())  # noqa: S506 - a SafeLoader (libyaml's when present)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        loader.error(
            f"invalid YAML: {getattr(exc, 'problem', exc)}",
            (mark.line + 1) if mark else 1,
            (mark.column + 1) if mark else 1,
        )
        return None, loader.errors
    if not isinstance(data, dict) or node is None:
        loader.error("a rule file must be a mapping (id, title, class, when, …)", 1, 1)
        return None, loader.errors
    loader.marks = _mapping_marks(node)
    rule = _build(loader, data)
    if lint:
        _check_parity(loader, data)
    return (rule if not loader.errors else None), loader.errors


def _build(ld: _Loader, data: dict[str, Any]) -> Rule | None:
    for key in data:
        if key not in _FIELDS:
            ld.at(key, f"unknown field {key!r}; allowed: {', '.join(sorted(_FIELDS))}")
    rule_id = data.get("id", ld.path.stem)
    if rule_id != ld.path.stem:
        ld.at("id", f"id {rule_id!r} must equal the file name {ld.path.stem!r}")
    for key, allowed in (
        ("class", CLASSES),
        ("cause", CAUSES),
        ("phase", PHASES),
        ("severity", SEVERITIES),
        ("confidence", CONFIDENCES),
    ):
        value = data.get(key)
        if value is None and key in ("class", "severity"):
            ld.at("id", f"missing required field {key!r}")
        elif value is not None and value not in allowed:
            ld.at(key, f"{key} {value!r} is not one of: {', '.join(allowed)}")
    title, explain = _text(data.get("title")), _text(data.get("explain", ""))
    if title is None:
        ld.at("title", "title: a string or a map of language to string is required")
    defines = _defines(ld, data.get("define") or {})
    when = ld.expr("when", data.get("when"), ld.marks.get("when"))
    if when is not None:
        _check_names(ld, when, defines, "when")
    for key, text in (("title", title), ("explain", explain)):
        if text is not None:
            _check_template(ld, text, defines, key)
    remedies = tuple(_remedies(ld, data.get("remedies") or [], defines))
    avoid = tuple(_avoids(ld, data.get("avoid") or [], defines))
    graded = _confidence_when(ld, data.get("confidence_when"), data.get("confidence", "medium"), defines)
    _check_unused(
        ld,
        defines,
        [
            when,
            *(r.when for r in remedies),
            *(r.value for r in remedies),
            *(a.when for a in avoid),
            *(node for _, node in graded),
        ],
    )
    bounds = _bounds(ld, data.get("vllm"))
    examples = tuple(_examples(ld, data.get("examples") or {}))
    evidence = tuple(str(e) for e in data.get("evidence") or [])
    for fact in evidence:
        if not is_known(fact):
            ld.at("evidence", f"evidence: unknown fact {fact!r}")
    priority = data.get("priority", 50)
    if not isinstance(priority, int):
        ld.at("priority", "priority must be an integer (higher wins)")
        priority = 50
    if ld.errors or when is None or title is None or explain is None:
        return None
    return Rule(
        rule_id,
        ld.name,
        title,
        data["class"],
        data["severity"],
        data.get("confidence", "medium"),
        priority,
        when,
        defines,
        explain,
        data.get("cause"),
        data.get("phase"),
        bounds,
        remedies,
        avoid,
        tuple(str(r) for r in data.get("references") or []),
        evidence,
        examples,
        bool(data.get("fallback", False)),
        graded,
    )


def _confidence_when(ld: _Loader, raw: Any, ceiling: Any, defines: dict[str, Node]) -> tuple[tuple[str, Node], ...]:
    """`confidence_when: {high: printed_figures}`: the rule says `high` only while the condition
    holds, else the next level down; levels above the rule's `confidence` make no sense."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        ld.at("confidence_when", "confidence_when: expected a map of confidence level to condition")
        return ()
    marks = _mapping_marks(ld.marks["confidence_when"]) if "confidence_when" in ld.marks else {}
    allowed = CONFIDENCES[CONFIDENCES.index(ceiling) :] if ceiling in CONFIDENCES else CONFIDENCES
    out = []
    for level, text in raw.items():
        if level not in allowed[:-1]:
            where = f"one of: {', '.join(allowed[:-1])}" if allowed[:-1] else "nothing: the rule is already low"
            ld.at("confidence_when", f"confidence_when: level {level!r} must be {where}")
            continue
        node = ld.expr(f"confidence_when.{level}", text, marks.get(level))
        if node is not None:
            _check_names(ld, node, defines, f"confidence_when.{level}", marks.get(level))
            out.append((str(level), node))
    return tuple(sorted(out, key=lambda item: CONFIDENCES.index(item[0])))


def _defines(ld: _Loader, raw: Any) -> dict[str, Node]:
    if not isinstance(raw, dict):
        ld.at("define", "define: expected a map of name to condition")
        return {}
    marks = _mapping_marks(ld.marks["define"]) if "define" in ld.marks else {}
    out: dict[str, Node] = {}
    for name, text in raw.items():
        node = ld.expr(f"define.{name}", text, marks.get(name))
        if node is not None:
            out[str(name)] = node
    for name, node in out.items():
        _check_names(ld, node, out, f"define.{name}", marks.get(name))
    return out


def _check_unused(ld: _Loader, defines: dict[str, Node], used_in: list[Node | None]) -> None:
    """A define must be used by `when`, another define, or a remedy's/avoid's `when`/`value`."""
    used = {n.name for node in [*defines.values(), *used_in] if node is not None for n in conditions.names(node)}
    if used_in and used_in[0] is None:
        used |= set(defines)  # `when` did not parse: that error is reported already; do not pile on
    marks = _mapping_marks(ld.marks["define"]) if "define" in ld.marks else {}
    for name in defines:
        if name not in used:
            mark = marks.get(name)
            line = mark.start_mark.line + 1 if mark is not None else 1
            ld.error(f"define.{name}: defined but never used (in `when`, a define, or a remedy/avoid)", line, 1)


def _check_names(
    ld: _Loader, node: Node, defines: dict[str, Node], key: str, yaml_node: yaml.Node | None = None
) -> None:
    yaml_node = yaml_node if yaml_node is not None else ld.marks.get(key)
    for name in conditions.names(node):
        if name.name in defines or is_known(name.name):
            continue
        line, col = ld._position(yaml_node, name.line, name.column)
        ld.error(
            f"{key}: unknown name {name.name!r} (not a fact or a define); see docs/facts.md",
            line,
            col,
        )


def _remedies(ld: _Loader, raw: Any, defines: dict[str, Node]) -> Iterable[Remedy]:
    if not isinstance(raw, list):
        ld.at("remedies", "remedies: expected a list")
        return
    for i, item in enumerate(raw):
        marks = _mapping_marks(ld.marks["remedies"].value[i]) if "remedies" in ld.marks else {}
        if not isinstance(item, dict) or item.get("action") not in ACTIONS:
            ld.at("remedies", f"remedies[{i}]: action must be one of: {', '.join(ACTIONS)}")
            continue
        text = _text(item.get("text"))
        if text is None:
            ld.at("remedies", f"remedies[{i}]: text is required")
            continue
        value = ld.expr(f"remedies[{i}].value", str(item["value"]), marks.get("value")) if "value" in item else None
        when = ld.expr(f"remedies[{i}].when", item["when"], marks.get("when")) if "when" in item else None
        for label, node in (("value", value), ("when", when)):
            if node is not None:
                _check_names(ld, node, defines, f"remedies[{i}].{label}", marks.get(label))
        _check_template(ld, text, defines, f"remedies[{i}].text")
        yield Remedy(item["action"], text, value, when)


def _avoids(ld: _Loader, raw: Any, defines: dict[str, Node]) -> Iterable[Avoid]:
    if not isinstance(raw, list):
        ld.at("avoid", "avoid: expected a list")
        return
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or item.get("action") not in ACTIONS or _text(item.get("why")) is None:
            ld.at("avoid", f"avoid[{i}]: needs an action from the vocabulary and a `why`")
            continue
        marks = _mapping_marks(ld.marks["avoid"].value[i]) if "avoid" in ld.marks else {}
        when = ld.expr(f"avoid[{i}].when", item["when"], marks.get("when")) if "when" in item else None
        if when is not None:
            _check_names(ld, when, defines, f"avoid[{i}].when", marks.get("when"))
        why = _text(item["why"]) or {}
        _check_template(ld, why, defines, f"avoid[{i}].why")
        yield Avoid(item["action"], why, when)


def _check_template(ld: _Loader, text: Text, defines: dict[str, Node], key: str) -> None:
    for variant in text.values():
        if re.search(r"\[\[(?:(?!\]\]).)*\[\[", variant, re.S):
            ld.at(key.split("[")[0], f"{key}: a [[ … ]] segment inside another is not rendered; make them siblings")
        for name, _spec in _TEMPLATE_FIELD.findall(variant):
            if not (is_known(name) or name in defines or name == "value"):
                ld.at(key.split("[")[0], f"{key}: template cites unknown fact {name!r}")


# ---- en/zh parity (lint only): every language tells the operator the same figures ----------

_PLACEHOLDER = re.compile(r"\{[A-Za-z_][\w.]*(?::[^{}]*)?\}")
_FLAG = re.compile(r"(?<![A-Za-z0-9_-])--[A-Za-z][\w-]*")  # (ASCII: a CJK character is \w too)
# a literal number ("0.95", "2048", "0.9.1"), not a digit inside a name ("V1", "fp8", "H100")
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])\d+(?:\.\d+)*")


def _facets(text: str) -> dict[str, Any]:
    """What a text says that a translation must say too: the figures it cites (with their
    format), how many optional segments, the flags and the literal numbers."""
    bare = _PLACEHOLDER.sub(" ", text)
    return {
        "placeholder": set(_PLACEHOLDER.findall(text)),
        "segments": text.count("[["),
        "flag": set(_FLAG.findall(bare)),
        "number": set(_NUMBER.findall(bare)),
    }


def parity_problems(en: str, other: str, lang: str = "zh") -> list[str]:
    """How `other` (the `lang` text) differs from `en`; empty when they cite the same things."""
    a, b = _facets(en), _facets(other)
    out = []
    if a["segments"] != b["segments"]:
        out.append(f"{a['segments']} [[ ]] segment(s) in en, {b['segments']} in {lang}")
    for facet in ("placeholder", "flag", "number"):
        out += [f"{facet} {item} only in en" for item in sorted(a[facet] - b[facet])]
        out += [f"{facet} {item} only in {lang}" for item in sorted(b[facet] - a[facet])]
    return out


def _text_nodes(ld: _Loader, data: dict[str, Any]) -> Iterable[tuple[str, Any, yaml.Node | None]]:
    """(field, text value, its YAML node) for every text of the rule."""
    for key in ("title", "explain"):
        yield key, data.get(key), ld.marks.get(key)
    for key, field_name in (("remedies", "text"), ("avoid", "why")):
        items = data.get(key)
        node = ld.marks.get(key)
        if not isinstance(items, list) or node is None:
            continue
        for i, (item, item_node) in enumerate(zip(items, getattr(node, "value", []), strict=False)):
            if isinstance(item, dict):
                yield f"{key}[{i}].{field_name}", item.get(field_name), _mapping_marks(item_node).get(field_name)


def _check_parity(ld: _Loader, data: dict[str, Any]) -> None:
    """Each translation of a text cites the same figures, optional segments, flags and numbers
    as its en text (issue 16: zh told operators other numbers than en, and lint passed it)."""
    for key, value, node in _text_nodes(ld, data):
        if not isinstance(value, dict) or not isinstance(value.get("en"), str):
            continue
        marks = _mapping_marks(node) if node is not None else {}
        for lang, text in value.items():
            if lang == "en" or not isinstance(text, str):
                continue
            problems = parity_problems(value["en"], text, str(lang))
            if problems:
                where = marks.get(lang)
                line = where.start_mark.line + 1 if where is not None else 1
                col = where.start_mark.column + 1 if where is not None else 1
                ld.error(
                    f"{key}: the {lang} text does not say what the en text says ({'; '.join(problems)}); "
                    "give both the same figures, [[ ]] segments, flags and numbers",
                    line,
                    col,
                )


def _bounds(ld: _Loader, raw: Any) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    out = []
    for part in str(raw).split(","):
        m = _VERSION_BOUND.match(part)
        if not m:
            ld.at("vllm", f'vllm: bad version bound {part.strip()!r}; use e.g. ">=0.9.1,<0.20"')
            continue
        out.append((m.group(1), m.group(2)))
    return tuple(out)


def _examples(ld: _Loader, raw: Any) -> Iterable[Example]:
    if not isinstance(raw, dict):
        ld.at("examples", "examples: expected `fires:` and `silent:` lists")
        return
    for expect in ("fires", "silent"):
        items = raw.get(expect) or []
        if not items:
            ld.at("examples", f"examples: at least one `{expect}` example is required")
        for item in items:
            wins = not (isinstance(item, dict) and item.get("wins") is False)
            if isinstance(item, dict) and "log" in item:
                yield Example(expect, str(item["log"]), None, wins)
            elif isinstance(item, dict) and "file" in item:
                yield Example(expect, None, str((ld.path.parent / str(item["file"])).resolve()), wins)
            elif isinstance(item, str):
                yield Example(expect, None, str((ld.path.parent / item).resolve()))
            else:
                ld.at("examples", f"examples.{expect}: each item is a fixture path or {{log: …}}")


def load_rules(dirs: Iterable[Path], *, lint: bool = False) -> list[Rule]:
    """Rules from each directory in order; a later directory overrides an id. Raises
    RuleLoadError listing every problem in every file (with `lint`, the linter's checks too)."""
    by_id: dict[str, Rule] = {}
    errors: list[RuleError] = []
    for directory in dirs:
        if not directory.is_dir():
            errors.append(RuleError(str(directory), 1, 1, "not a directory of rule files"))
            continue
        for path in sorted(directory.glob("*.yaml")):
            rule, problems = load_rule(path, lint=lint)
            errors.extend(problems)
            if rule is not None:
                by_id[rule.id] = rule
    if errors:
        raise RuleLoadError(errors)
    return sorted(by_id.values(), key=lambda r: (-r.priority, r.id))


_CACHE: dict[tuple[str, ...], list[Rule]] = {}


def rules_for(extra_dirs: Iterable[StrPath] = (), *, cache_dir: StrPath | None = None) -> list[Rule]:
    """The built-in rules plus any extra directories: kept per process, and compiled once across
    processes when the caller passes a cache directory (`kvdoctor.diagnosis.rule_cache`)."""
    from kvdoctor.diagnosis.rule_cache import load_cached

    key = (_builtin_rules_path(), *(os.fspath(d) for d in extra_dirs))
    if key not in _CACHE:

        def compile_rules() -> list[Rule]:
            from pathlib import Path

            return load_rules([Path(d) for d in key])

        _CACHE[key] = load_cached(key, cache_dir, compile_rules)
    return _CACHE[key]
