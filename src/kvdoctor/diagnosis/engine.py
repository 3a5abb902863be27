"""Stage 4: facts + rules -> diagnoses, ordered by priority; the first is the verdict."""

from __future__ import annotations

import re
from collections.abc import Sequence

from kvdoctor.diagnosis import conditions, terms
from kvdoctor.diagnosis.report import AttemptReport, Avoid, Diagnosis, Evidence, Remedy
from kvdoctor.diagnosis.rules import CONFIDENCES, Rule, Text
from kvdoctor.reader.facts import Fact, Facts
from kvdoctor.reader.pipeline import AttemptResult

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_TEMPLATE = re.compile(r"\{([A-Za-z_][\w.]*)(?::([^{}]*))?\}")
MAX_EVIDENCE = 12


def _lookup(facts: Facts) -> conditions.Lookup:
    def lookup(name: str) -> Any:
        if name.startswith("seen.") and name not in facts:
            return False  # the log was read: an event kind that did not occur is known absent
        fact = facts[name]
        if fact.value is None:
            raise KeyError(name)
        return fact.value

    return lookup


_CJK = "\u3000-\u303f\u4e00-\u9fff\uff00-\uffef"
# between two Chinese characters, and on either side of full-width punctuation ("GiB 。", "， 4");
# zh only, so compiled on first use
_CJK_GAP = f"(?<=[{_CJK}])\\s+(?=[{_CJK}])|\\s+(?=[，。；：（）、！？])|(?<=[，。；：（）、！？])\\s+"


def pick(text: Text, lang: str) -> str:
    chosen = text.get(lang) or text.get("en") or next(iter(text.values()), "")
    # YAML folding joins lines with a space; Chinese puts none between characters
    return re.sub(_CJK_GAP, "", chosen) if lang == "zh" else chosen


_OPTIONAL = re.compile(r"\[\[(.*?)\]\]", re.S)


# the descriptive facts kvdoctor writes itself (notes, estimate bases), said in Chinese where the
# text is (issue 16); a value not listed here is shown as written
_ZH_VALUES: tuple[tuple[str, str], ...] = (  # patterns compiled on first use (zh only)
    (
        r"^this release takes what other processes hold out of this budget.*$",
        "这个版本会把其他进程占用的显存从本预算中扣除，所以要把它们的份额也加上去，或者释放它们",
    ),
    (
        r"^this release charges nothing another process holds to this budget but checks.*$",
        "这个版本不把其他进程占用的显存计入本预算，但启动时会检查比例对应的显存是否空闲，所以调高到显示为空闲的份额以内是安全的",
    ),
    (
        r"^this release charges nothing another process held before start-up to this budget.*$",
        "这个版本不把启动前其他进程占用的显存计入本预算，所以只要显卡有它规划的空间，调高就是安全的",
    ),
    (
        r"^a process listed there is the likelier cause.*$",
        "列出的其他进程更可能是原因：先释放显卡，因为比例针对整卡总显存，调高会规划被那个进程占着的显存",
    ),
    (r"^vLLM's default: the log does not show the fraction$", "vLLM 的默认值：日志没有显示比例"),
    (
        r"^vLLM's default: the non-default arguments the log lists leave it out$",
        "vLLM 的默认值：日志列出的非默认参数中没有它",
    ),
    (r"^kvdoctor's model catalog$", "kvdoctor 内置的模型目录"),
    (r"^sampler$", "采样器"),
    (r"^pooler$", "池化器"),
    (
        r"^this release checks free memory at start-up and charges no memory another process held before it$",
        "这个版本在启动时检查空闲显存，不把启动前其他进程占用的显存计入本实例",
    ),
    (
        r"^this release charges no memory another process held before start-up to the fraction$",
        "这个版本不把启动前其他进程占用的显存计入比例",
    ),
    (r"^(\S+)B parameters in the model's name$", r"模型名中的 \1B 参数量"),
    (r"^the catalog's (.+)$", r"kvdoctor 内置目录中的 \1"),
)


def _in_lang(value: str, lang: str) -> str:
    if lang != "zh":
        return value
    for pattern, zh in _ZH_VALUES:
        if re.match(pattern, value):
            return re.sub(pattern, zh, value)
    return value


def render_template(template: str, facts: Facts, extra: dict[str, Any] | None = None, lang: str = "en") -> str:
    """`{fact:spec}` is replaced by the fact's value ("?" when unknown); a `[[ … ]]` segment is
    kept only when every fact it cites is known, so a sentence never shows a hole."""

    def known(name: str) -> bool:
        if extra and name in extra:
            return extra[name] is not None
        fact = facts.get(name)
        # (an empty list, no PIDs, has nothing to cite either)
        return fact is not None and fact.value is not None and fact.value != []

    def optional(m: re.Match[str]) -> str:
        inner = m.group(1)
        return inner if all(known(f.group(1)) for f in _TEMPLATE.finditer(inner)) else ""

    template = _OPTIONAL.sub(optional, template)

    def sub(m: re.Match[str]) -> str:
        name, spec = m.group(1), m.group(2) or ""
        if extra and name in extra:
            value = extra[name]
        else:
            fact = facts.get(name)
            value = fact.value if fact is not None else None
        if value is None:
            return "?"
        if isinstance(value, list):
            return ", ".join(str(v) for v in value)
        if isinstance(value, str):  # an id (a phase: "sampler_warmup") by its name in `lang`
            return _in_lang(terms.fact_value(lang, name, value), lang)
        if isinstance(value, float) and abs(value) < 0.005:
            value = 0.0  # never "-0.00 GiB"
        try:
            return format(value, spec)
        except (ValueError, TypeError):
            return str(value)

    out = _TEMPLATE.sub(sub, template)
    # YAML folding leaves a space where an optional segment met Chinese text ("。 日志…")
    return re.sub(_CJK_GAP, "", out) if lang == "zh" else out


def version_allows(rule: Rule, facts: Facts) -> bool:
    """False only when the version (or the range the wording implies) is outside the bounds."""
    lookup = _lookup(facts)
    for op, bound in rule.vllm:
        node = conditions.Op("compare", (conditions.Name("vllm_version", 1, 1), conditions.Lit(bound)), op)
        if conditions.evaluate(node, lookup) is False:
            return False
    return True


def _value(node: conditions.Node | None, facts: Facts, defines: dict[str, conditions.Node]) -> Any:
    if node is None:
        return None
    value = conditions.evaluate(node, _lookup(facts), defines)
    if isinstance(value, float):
        if abs(value) < 0.005:
            return 0.0  # (not -0.0)
        return int(value) if value.is_integer() and abs(value) >= 1 else round(value, 2)
    return value


def _evidence(rule: Rule, facts: Facts) -> tuple[Evidence, ...]:
    names: list[str] = list(rule.evidence)
    nodes = [rule.when, *rule.defines.values()]
    for node in nodes:
        names.extend(n.name for n in conditions.names(node))
    for text in (*rule.explain.values(),):
        names.extend(m.group(1) for m in _TEMPLATE.finditer(text))
    seen: dict[int, Evidence] = {}
    for name in names:
        fact = facts.get(name)
        if fact is None or fact.line is None or fact.line in seen or fact.value in (None, False):
            continue
        seen[fact.line] = Evidence(fact.line, (fact.text or "").rstrip()[:400])
    return tuple(sorted(seen.values(), key=lambda e: e.line)[:MAX_EVIDENCE])


def fire(rule: Rule, facts: Facts) -> bool:
    if not version_allows(rule, facts):
        return False
    return conditions.evaluate(rule.when, _lookup(facts), rule.defines) is True


def confidence(rule: Rule, facts: Facts) -> str:
    """The rule's level, lowered one step for each graded level whose condition does not hold."""
    level = rule.confidence
    lookup = _lookup(facts)
    for graded, node in rule.confidence_when:
        if graded == level and conditions.evaluate(node, lookup, rule.defines) is not True:
            level = CONFIDENCES[min(CONFIDENCES.index(level) + 1, len(CONFIDENCES) - 1)]
    return level


def _within_host(action: str, value: Any, facts: Facts) -> Any:
    """A tensor-parallel size above the GPUs the host lists (collect_env, `nvidia-smi -L`) is
    the most it has: the listed count (which the check below drops where it is not above the TP
    the log runs at)."""
    listed = facts.get("gpus_listed")
    if action != "increase_tensor_parallel_size" or listed is None or not isinstance(value, (int, float)):
        return value
    return min(value, listed.value) if isinstance(listed.value, int) else value


def _already_there(action: str, value: Any, facts: Facts) -> bool:
    """A tensor-parallel size that is not above the one the log runs at, above the GPUs the host
    lists (collect_env, `nvidia-smi -L`), or any on a MIG slice or a host listing one GPU (a process
    sees one device): no change to suggest (a remedy value must change something, and by
    the arithmetic fit)."""
    if action != "increase_tensor_parallel_size":
        return False
    if facts.get("mig_profile") is not None:
        return True
    listed = facts.get("gpus_listed")  # (the GPUs the host lists: no TP beyond them)
    if listed is not None and isinstance(listed.value, int) and listed.value <= 1:
        return True
    if not isinstance(value, (int, float)):
        return False
    current = facts.get("tensor_parallel_size")
    return current is not None and isinstance(current.value, (int, float)) and value <= current.value


def diagnose_rule(rule: Rule, facts: Facts, lang: str) -> Diagnosis:
    lookup = _lookup(facts)
    remedies: list[Remedy] = []
    for remedy in rule.remedies:
        if remedy.when is not None and conditions.evaluate(remedy.when, lookup, rule.defines) is not True:
            continue
        value = _within_host(remedy.action, _value(remedy.value, facts, rule.defines), facts)
        if _already_there(remedy.action, value, facts) or any(
            (r.action, r.value) == (remedy.action, value) for r in remedies
        ):
            continue  # (nor the same step twice, where two entries of a rule both apply)
        text = render_template(pick(remedy.text, lang), facts, {"value": value}, lang)
        remedies.append(Remedy(remedy.action, text, value))
    avoid = []
    for item in rule.avoid:
        if item.when is not None and conditions.evaluate(item.when, lookup, rule.defines) is not True:
            continue
        avoid.append(Avoid(item.action, render_template(pick(item.why, lang), facts, lang=lang)))
    phase = rule.phase
    if rule.klass == "cuda_oom" and phase is None:
        oom_phase = facts.get("oom_phase") or facts.get("traceback_phase")
        phase = str(oom_phase.value) if oom_phase is not None else "unknown"
    return Diagnosis(
        rule=rule.id,
        klass=rule.klass,
        cause=rule.cause,
        phase=phase,
        severity=rule.severity,
        confidence=confidence(rule, facts),
        title=render_template(pick(rule.title, lang), facts, lang=lang),
        explanation=render_template(pick(rule.explain, lang), facts, lang=lang).strip(),
        remedies=tuple(remedies),
        avoid=tuple(avoid),
        evidence=_evidence(rule, facts),
        references=rule.references,
    )


def _fact_records(facts: Facts) -> dict[str, Any]:
    return {name: fact.as_record() for name, fact in sorted(facts.items())}


def evaluate_attempt(
    attempt: AttemptResult,
    rules: Sequence[Rule],
    lang: str = "en",
    extra_facts: Facts | None = None,
) -> AttemptReport:
    facts: Facts = dict(attempt.facts)
    for name, fact in (extra_facts or {}).items():
        facts.setdefault(name, fact)
    held = facts.get("gpu.other_process_gib")
    if held is not None and isinstance(held.value, (int, float)):
        current = facts.get("other_process_gib")
        if current is None or held.value > current.value:  # the probe saw more than the log says
            facts["other_process_gib"] = Fact("other_process_gib", held.value, None, None, True, "probe")
    diagnoses = [diagnose_rule(r, facts, lang) for r in rules if not r.fallback and fire(r, facts)]
    if not diagnoses:  # the catch-all speaks only when nothing more specific did
        diagnoses = [diagnose_rule(r, facts, lang) for r in rules if r.fallback and fire(r, facts)]
    # no rule fired: nothing shows the start-up ending (e.g. only a launch command, or a log cut
    # early) — a failure would have met the catch-all rule
    verdict = diagnoses[0].klass if diagnoses else "unknown"
    return AttemptReport(
        attempt.index,
        attempt.start_line,
        attempt.end_line,
        verdict,
        tuple(diagnoses),
        _fact_records(facts),
        attempt.ranks,
    )


def external_fact(name: str, value: Any, source: str) -> Fact:
    return Fact(name, value, None, None, False, source)
