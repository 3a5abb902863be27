"""The embedded model and GPU catalog, plus local config.json / model directory / HF cache lookup.

Data lives in ``kvdoctor/memory/data/models.yaml`` and ``gpus.yaml`` (normalised from the project's
reference catalog, each entry with its source). Both files are read once, lazily, with
``yaml.safe_load``. Model entries keep config.json keys exactly as vLLM reads them, so a local
``config.json`` and a catalog entry go through the same arithmetic.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from functools import lru_cache

from kvdoctor._record import field, record
from kvdoctor.memory.weights import GGUF_BYTES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any


class CatalogError(ValueError):
    """A local model path that cannot be read (message is user-facing)."""


@record
class ModelEntry:
    """One model: its config.json keys plus what the catalog knows about the checkpoint."""

    id: str
    name: str
    hf_id: str | None
    config: Mapping[str, Any]
    params_b: float | None = None
    quantization: str | None = None
    observed_weights_gib: float | None = None
    checkpoint_bytes: int | None = None
    source: str = ""
    uncertain: tuple[str, ...] = ()
    origin: str = "catalog"
    reference_kv_bytes: Mapping[str, int] = field(default_factory=dict)


@record
class GpuEntry:
    id: str
    name: str
    total_gib: float
    basis: str
    compute_capability: str | None
    fp8_kv: bool
    evidence: str
    aliases: tuple[str, ...] = ()


# Suffixes that name a checkpoint format, not an architecture ("Qwen2.5-7B-Instruct-AWQ").
_QUANT_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("gptq-int4", "gptq"),
    ("gptq-int8", "gptq"),
    ("gptq", "gptq"),
    ("awq", "awq"),
    ("fp8-dynamic", "fp8"),
    ("fp8", "fp8"),
    ("w4a16", "gptq"),
    ("w8a8", "fp8"),
    ("bnb-4bit", "bitsandbytes"),
    ("4bit", "bitsandbytes"),
    ("int4", "gptq"),
    ("w8a16", "int8"),
    ("int8", "int8"),
    ("gguf", "gguf"),
    ("mxfp4", "mxfp4"),
)
_NOISE = ("-hf", "-bf16", "-fp16")
_STRIPPED = tuple("-" + suffix for suffix, _ in _QUANT_SUFFIXES) + _NOISE


def _slug(text: str) -> str:
    # string methods, not regexes: the catalog index slugs every entry's names on a cold start
    text = text.strip().lower().replace("_", "-").replace(" ", "-").replace("(", "").replace(")", "")
    while "--" in text:
        text = text.replace("--", "-")
    return text.strip("-")


def model_key(text: str) -> str:
    """Reduce an HF id, a path or a loose name to a comparable key."""
    text = text.strip().rstrip("/")
    cache = re.search(r"models--([^/]+)--([^/]+)", text) if "models--" in text else None
    if cache:
        text = cache.group(2)
    # a download folder named "org__name" ("meta-llama__Llama3.1-70B-Instruct")
    key = _slug(text.rsplit("/", 1)[-1].rsplit("__", 1)[-1])
    changed = key.endswith(_STRIPPED)  # most names end in none of them: one C call, not 18
    while changed:
        changed = False
        for suffix, _ in _QUANT_SUFFIXES:
            if key.endswith("-" + suffix):
                key, changed = key[: -len(suffix) - 1], True
        for noise in _NOISE:
            if key.endswith(noise):
                key, changed = key[: -len(noise)], True
    return key.removeprefix("meta-")


def _bare(key: str) -> str:
    """Drop chat/instruct markers so `llama-3.1-8b` finds `Llama-3.1-8B-Instruct`."""
    for marker in ("-instruct", "-chat", "-it", "-base"):
        key = key.replace(marker, "")
    return re.sub(r"-v?\d{4}$", "", key) if re.search(r"-\d{4}$", key) else key


_PARAMS_TOKEN = re.compile(r"(?:(\d+)x)?(\d+(?:\.\d+)?)b")
# a mixture of N experts of M B parameters holds fewer than N x M (attention is shared):
# Mixtral-8x7B has 46.7B, 8x22B 141B
_MOE_SHARE = 0.83


def params_from_name(text: str) -> float | None:
    """Billions of parameters a model name announces ("Qwen1.5-14B-Chat" -> 14, "Mixtral-8x7B" ->
    46.5), for a model the catalog does not hold; None when the name gives no size."""
    for token in model_key(text).split("-"):
        m = _PARAMS_TOKEN.fullmatch(token)
        if m:
            size = float(m.group(2))
            return round(int(m.group(1)) * size * _MOE_SHARE, 1) if m.group(1) else size
    return None


# a context length a repo name announces ("…-128k-instruct", "…-Gradient-1048k"): only the
# lengths long-context releases use, and not a count ("…-step-1431k", "…-ultrachat-200k")
_LENGTH_TOKEN = re.compile(r"(64|128|256|512|1024|1048)k")
_COUNT_WORDS = frozenset({"step", "steps", "iter", "it", "ckpt", "tokens", "samples", "data"})


def context_from_name(text: str) -> int | None:
    """Tokens of context a model name announces ("Phi-3-vision-128k-instruct" -> 131072), if any."""
    tokens = model_key(text).split("-")
    for i, token in enumerate(tokens):
        m = _LENGTH_TOKEN.fullmatch(token)
        if m and (i == 0 or tokens[i - 1] not in _COUNT_WORDS):
            n = int(m.group(1))
            return 1 << 20 if n in (1024, 1048) else n * 1024  # ("1048k" is 2**20 by another name)
    return None


def quantization_from_name(text: str) -> str | None:
    """The checkpoint format a repo name announces (`…-AWQ` -> awq), if any."""
    name = text.rstrip("/").rsplit("/", 1)[-1]
    # a GGUF file or repo names its block format ("…-Q4_K_M.gguf", "…-GGUF:Q5_K_S"): its bytes per
    # weight, not a 16-bit model of the size in the name
    if re.search(r"(?i)gguf", name):
        block = re.search(r"(?i)(?<![a-z0-9])(i?q\d(?:_[01k]|_nl|_xs)?)(_[sml])?(?![a-z0-9])", name)
        if block is None:
            return "gguf"
        mix = f"{block.group(1)}{block.group(2) or ''}".lower()
        return f"gguf_{mix if mix in GGUF_BYTES else block.group(1).lower()}"
    key = _slug(name)
    for suffix, method in _QUANT_SUFFIXES:
        if key.endswith("-" + suffix) or f"-{suffix}-" in key:
            return method
    return None


def _entry(raw: Mapping[str, Any]) -> ModelEntry:
    src = raw.get("source") or {}
    observed = raw.get("observed_weights_gib")
    return ModelEntry(
        id=_slug(raw["name"]),
        name=str(raw["name"]),
        hf_id=raw.get("hf_id"),
        config=dict(raw.get("config") or {}),
        params_b=raw.get("params_b"),
        quantization=raw.get("quantization"),
        observed_weights_gib=observed.get("value") if isinstance(observed, dict) else None,
        source=f"{src.get('kind', '')} {src.get('url', '')}".strip(),
        uncertain=tuple(str(x) for x in raw.get("not_read") or ()),
        reference_kv_bytes=dict(raw.get("reference_kv_bytes") or {}),
    )


def _load_yaml(name: str) -> Any:
    """The catalog file: its JSON form where the wheel's build wrote one (hatch_build.py; ~1 ms),
    else the YAML source through libyaml's loader (~20 ms), else PyYAML's pure one."""
    # os.path, not importlib.resources (~8 ms of imports) or pathlib (~3 ms)
    data = os.path.join(os.path.dirname(os.path.realpath(__file__)), "data")
    built = os.path.join(data, name.removesuffix(".yaml") + ".json")
    if os.path.isfile(built):
        with open(built, encoding="utf-8") as fh:
            return json.load(fh)
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # both safe; libyaml is ~10x faster
    with open(os.path.join(data, name), encoding="utf-8") as fh:
        return yaml.load(fh.read(), Loader=loader)  # noqa: S506


@lru_cache(maxsize=1)
def models() -> tuple[ModelEntry, ...]:
    return tuple(_entry(raw) for raw in _load_yaml("models.yaml")["models"])


@lru_cache(maxsize=1)
def gpus() -> tuple[GpuEntry, ...]:
    out = []
    for raw in _load_yaml("gpus.yaml")["gpus"]:
        out.append(
            GpuEntry(
                id=raw["id"],
                name=raw["name"],
                total_gib=float(raw["total_gib"]),
                basis=raw["basis"],
                compute_capability=raw.get("compute_capability"),
                fp8_kv=bool(raw.get("fp8_kv")),
                evidence=str(raw.get("evidence", "")),
                aliases=tuple(str(a) for a in raw.get("aliases") or ()),
            )
        )
    return tuple(out)


@lru_cache(maxsize=1)
def _model_index() -> dict[str, ModelEntry]:
    index: dict[str, ModelEntry] = {}
    for entry in models():
        for name in (entry.name, entry.hf_id or ""):
            if name:
                index.setdefault(model_key(name), entry)
                index.setdefault(_bare(model_key(name)), entry)
                index.setdefault(name.lower(), entry)
    return index


def find_model(query: str) -> ModelEntry | None:
    """Catalog lookup by HF id, display name, loose name or a path's last component."""
    index = _model_index()
    key = model_key(query)
    hit = index.get(query.strip().lower()) or index.get(key) or index.get(_bare(key))
    if hit is not None and quantization_from_name(query) and not hit.quantization:
        return _with_quantization(hit, quantization_from_name(query))
    return hit


def _with_quantization(entry: ModelEntry, method: str | None) -> ModelEntry:
    return ModelEntry(**{**entry.__dict__, "quantization": method})


def suggest_models(query: str, n: int = 5) -> list[str]:
    """Close catalog names for an unknown model (display names, best first)."""
    by_key = {model_key(e.name): e.name for e in models()}
    import difflib  # only when a name is unknown: suggestions

    close = difflib.get_close_matches(model_key(query), list(by_key), n=n, cutoff=0.5)
    if not close:
        stem = model_key(query).split("-")[0]
        close = [k for k in by_key if k.startswith(stem)][:n]
    return [by_key[k] for k in close]


def _gpu_keys(entry: GpuEntry) -> list[str]:
    keys = [entry.id, entry.name, *entry.aliases]
    return [_slug(k.removeprefix("NVIDIA ").removeprefix("GeForce ")) for k in keys] + [_slug(k) for k in keys]


def find_gpu(query: str) -> GpuEntry | None:
    key = _slug(query)
    for prefix in ("nvidia-", "geforce-", "tesla-"):
        key = key.removeprefix(prefix)
    for entry in gpus():
        if key in _gpu_keys(entry) or _slug(query) in _gpu_keys(entry):
            return entry
    return None


def suggest_gpus(query: str, n: int = 5) -> list[str]:
    by_key = {k: e.id for e in gpus() for k in _gpu_keys(e)}
    import difflib

    close = difflib.get_close_matches(_slug(query), list(by_key), n=n * 3, cutoff=0.4)
    return list(dict.fromkeys(by_key[k] for k in close))[:n] or [e.id for e in gpus()][:n]


# -- local checkpoints -------------------------------------------------------------------------


def _hf_cache_config(folder: Path) -> Path | None:
    snapshots = sorted((folder / "snapshots").glob("*/config.json"))
    return snapshots[-1] if snapshots else None


def local_config_path(query: str) -> Path | None:
    """config.json for a local file, model directory or HF cache folder; None if not local."""
    from pathlib import Path  # only `plan` and `preflight` look for local checkpoints

    path = Path(query).expanduser()
    if path.is_file() and path.suffix == ".json":
        return path
    if path.is_dir():
        if (path / "config.json").is_file():
            return path / "config.json"
        cached = _hf_cache_config(path)
        if cached is not None:
            return cached
        raise CatalogError(f"{path}: no config.json in this directory; point --model at the model folder")
    return None


def _checkpoint_bytes(folder: Path) -> int | None:
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        meta = json.loads(index.read_text(encoding="utf-8")).get("metadata") or {}
        size = meta.get("total_size")
        return int(size) if size else None
    files = list(folder.glob("*.safetensors")) + list(folder.glob("*.gguf"))
    return sum(f.stat().st_size for f in files) or None


def _text_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Multimodal wrappers keep the language model under text_config (vLLM reads that)."""
    text = cfg.get("text_config") or cfg.get("llm_config")
    merged = dict(cfg)
    if isinstance(text, Mapping):
        merged.update(text)
    return merged


def model_from_config(cfg: Mapping[str, Any], *, name: str, folder: Path | None = None) -> ModelEntry:
    merged = _text_config(cfg)
    qcfg = merged.get("quantization_config") or {}
    method = qcfg.get("quant_method") if isinstance(qcfg, Mapping) else None
    if method == "compressed-tensors":
        method = "gptq" if "int" in json.dumps(qcfg).lower() and '"num_bits": 4' in json.dumps(qcfg) else "fp8"
    hit = find_model(merged.get("_name_or_path") or name)
    return ModelEntry(
        id=_slug(name),
        name=name,
        hf_id=hit.hf_id if hit else None,
        config=merged,
        params_b=hit.params_b if hit else None,
        quantization=method or quantization_from_name(name),
        checkpoint_bytes=_checkpoint_bytes(folder) if folder else None,
        source=f"local config {folder / 'config.json' if folder else name}",
        origin="local",
    )


def resolve_model(query: str) -> ModelEntry | None:
    """A local config.json / model dir / HF cache folder first, else the catalog."""
    path = local_config_path(query)
    if path is None:
        return find_model(query)
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CatalogError(f"{path}: cannot read config.json ({exc}); check the file") from exc
    if not isinstance(cfg, dict):
        raise CatalogError(f"{path}: config.json is not a JSON object; check the file")
    name = path.parent.name if path.name == "config.json" else path.stem
    if "snapshots" in path.parts:
        name = path.parents[2].name.split("--", 1)[-1].replace("--", "/")
    return model_from_config(cfg, name=name, folder=path.parent)
