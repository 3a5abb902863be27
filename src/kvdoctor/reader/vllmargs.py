"""vLLM command-line flags -> fact names (from pasted shell commands and `kvdoctor run -- …`)."""

from __future__ import annotations

import re
import shlex

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# flag (without dashes, '-' or '_') -> (fact name, type). Booleans take no value.
FLAGS: dict[str, tuple[str, type]] = {
    "model": ("model", str),
    "model_path": ("model", str),  # FastChat's vllm_worker
    "served_model_name": ("served_model_name", str),
    "dtype": ("dtype", str),
    "max_model_len": ("max_model_len", int),
    "gpu_memory_utilization": ("gpu_memory_utilization", float),
    "tensor_parallel_size": ("tensor_parallel_size", int),
    "tp": ("tensor_parallel_size", int),
    "pipeline_parallel_size": ("pipeline_parallel_size", int),
    "pp": ("pipeline_parallel_size", int),
    "data_parallel_size": ("data_parallel_size", int),
    "quantization": ("quantization", str),
    "q": ("quantization", str),
    "kv_cache_dtype": ("kv_cache_dtype", str),
    "max_num_seqs": ("max_num_seqs", int),
    "max_num_batched_tokens": ("max_num_batched_tokens", int),
    "block_size": ("block_size", int),
    "swap_space": ("swap_space", float),
    "kv_cache_memory": ("kv_cache_memory_bytes", int),
    "kv_cache_memory_bytes": ("kv_cache_memory_bytes", int),
    "num_gpu_blocks_override": ("num_gpu_blocks_override", int),
    "enforce_eager": ("enforce_eager", bool),
    "omni": ("omni_pipeline", bool),  # vllm-omni: each stage its own engine
    "enable_chunked_prefill": ("enable_chunked_prefill", bool),
    "cpu_offload_gb": ("cpu_offload_gb", float),
    "disable_hybrid_kv_cache_manager": ("disable_hybrid_kv_cache_manager", bool),
    "enable_lora": ("enable_lora", bool),
    "max_loras": ("max_loras", int),
    "max_lora_rank": ("max_lora_rank", int),
}
_SIZE_SUFFIX = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def _convert(kind: type, value: str) -> Any:
    if kind in (int, float):
        # a pasted command cut or closed by prose: "--gpu-memory-utilization 0.98...", "4096),"
        value = value.rstrip(".,;:)'\"…") or value
    if kind is int:
        low = value.lower().rstrip("ib")
        if low and low[-1] in _SIZE_SUFFIX:
            return int(float(low[:-1]) * _SIZE_SUFFIX[low[-1]])
        return int(float(value))
    if kind is float:
        return float(value)
    return value


def parse_vllm_argv(argv: list[str]) -> dict[str, Any]:
    """Facts named by vLLM flags in an argv; unknown flags and bad values are skipped."""
    facts: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if token in ("serve",) and i < len(argv) and not argv[i].startswith("-"):
            facts.setdefault("model", argv[i])
            i += 1
            continue
        if token.startswith("VLLM_USE_V1="):  # `-e VLLM_USE_V1=1` / an env prefix picks the engine
            facts["engine"] = "v1" if token.endswith("=1") else "v0"
            continue
        if not token.startswith("-"):
            continue
        if "=--" in token:  # VLLM_ARGS=--model=…: the flag follows the variable name
            token = token[token.index("=--") + 1 :]
        name, eq, inline = token.lstrip("-").partition("=")
        negated = name.startswith("no-") or name.startswith("no_")
        key = name[3:] if negated else name
        key = key.replace("-", "_")
        if key not in FLAGS:
            continue
        fact, kind = FLAGS[key]
        if kind is bool:
            value: Any = not negated
            if eq:
                value = inline.lower() not in ("false", "0", "no")
            facts[fact] = value
            continue
        raw = inline if eq else (argv[i] if i < len(argv) else None)
        if not eq:
            i += 1
        if raw is None:
            continue
        try:
            facts[fact] = _convert(kind, raw)
        except ValueError:
            continue
    return facts


_LAUNCHERS = ("vllm serve", "vllm.entrypoints", "vllm-openai", "api_server.py", "vllm/vllm-", "trl vllm-serve")


_FLAG_WORDS = (
    "--gpu-memory-utilization",
    "--max-model-len",
    "--tensor-parallel-size",
    "--model",
    "--max-num-seqs",
    "--kv-cache-dtype",
    "--enforce-eager",
    "--quantization",
)


def is_vllm_command(text: str) -> bool:
    """A launch command, or flags kept in a variable (`VLLM_ARGS=--model=… --max-model-len=…`),
    or an argv a launcher printed as a Python list (`['serve', 'm', '--max_model_len', '131072']`)."""
    if any(marker in text for marker in _LAUNCHERS) and " --" in text or "vllm serve " in text:
        return True
    text = text.replace("_", "-") if _ARGV_LIST.match(text) or _JSON_ARGV.match(text) else text
    # (vLLM's parser takes a flag's underscore spelling too: `--gpu_memory_utilization 0.2`)
    text = _FLAG.sub(lambda m: m.group(0).replace("_", "-"), text)
    return sum(flag in text for flag in _FLAG_WORDS) >= 2


_FLAG = re.compile(r"--[a-z][\w-]*")


# an argv printed as a Python list (verl's vLLMHttpServer pretty-prints the one it launches)
_ARGV_LIST = re.compile(r"^\s*\[\s*'[^']*',")
_LIST_ITEM = re.compile(r"'([^']*)'")
# the same in JSON (a manifest's `"args": ["--model", "m", "--gpu-memory-utilization", "0.95"]`)
# (or YAML's flow sequence, `args: ["--model", "m", …]`, the key unquoted)
_JSON_ARGV = re.compile(r'^\s*(?:-\s*)?(?:"?(?:args|command)"?\s*:\s*)?\[\s*"[^"]*",')
_JSON_ITEM = re.compile(r'"((?:[^"\\]|\\.)*)"')


def parse_command_line(text: str) -> dict[str, Any]:
    """Facts from a pasted shell command ("$ vllm serve m --max-model-len 4096 …")."""
    text = text.lstrip("$# ").strip()
    if _ARGV_LIST.match(text):
        return parse_vllm_argv(_LIST_ITEM.findall(text))
    if _JSON_ARGV.match(text):
        items = _JSON_ITEM.findall(text)
        return parse_vllm_argv(items[1:] if items and items[0] in ("args", "command") else items)
    text = text.removeprefix("- ")  # a manifest's YAML argv, joined (reader/joiner.py)
    try:
        argv = shlex.split(text, comments=False)
    except ValueError:
        argv = text.split()
    return parse_vllm_argv(argv)
