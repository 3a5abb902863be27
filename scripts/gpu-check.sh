#!/usr/bin/env bash
# Compare kvdoctor's live NVML probe with nvidia-smi on a machine with an NVIDIA GPU.
#
#   scripts/gpu-check.sh            # uses `kvdoctor` and `python3` from PATH
#   KVDOCTOR=.venv/bin/kvdoctor PYTHON=.venv/bin/python scripts/gpu-check.sh
#
# Prints one line per GPU (total and used memory from both) and per compute process, and
# exits 0 when everything agrees within 1% of the GPU's total memory, 1 on a disagreement,
# 2 when either side cannot be read. MIG-enabled GPUs are listed but not compared:
# nvidia-smi --query-gpu reports the parent, kvdoctor reports each MIG instance.
set -euo pipefail

KVDOCTOR=${KVDOCTOR:-kvdoctor}
PYTHON=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "gpu-check: nvidia-smi not found; run this on a machine with the NVIDIA driver" >&2
    exit 2
fi
# Same devices on both sides: nvidia-smi ignores CUDA_VISIBLE_DEVICES, so unset it here.
if ! env -u CUDA_VISIBLE_DEVICES "$KVDOCTOR" probe --format json >"$work/probe.json"; then
    echo "gpu-check: kvdoctor probe failed (see the line above)" >&2
    exit 2
fi
nvidia-smi --query-gpu=index,uuid,memory.total,memory.used --format=csv,noheader,nounits \
    >"$work/gpus.csv"
nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits \
    >"$work/apps.csv"
echo "driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n1)"

"$PYTHON" - "$work" <<'PY'
import json, sys
from pathlib import Path

work = Path(sys.argv[1])
probe = json.loads((work / "probe.json").read_text())
TOL = 0.01  # of the GPU's total memory


def rows(name):
    for line in (work / name).read_text().splitlines():
        if line.strip():
            yield [c.strip() for c in line.split(",")]


def num(text):
    try:
        return float(text) / 1024.0  # MiB -> GiB
    except ValueError:
        return None  # [N/A], [Not Supported]


smi = {int(r[0]): {"uuid": r[1], "total": num(r[2]), "used": num(r[3])} for r in rows("gpus.csv")}
uuid_index = {g["uuid"]: i for i, g in smi.items()}
devices = {}
for d in probe["devices"]:
    devices.setdefault(d["index"], []).append(d)
bad = 0


def close(a, b, total):
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= TOL * max(total or 0.0, 1.0)


def fmt(v):
    return "n/a" if v is None else f"{v:.2f}"


for index, ref in sorted(smi.items()):
    mine = devices.get(index, [])
    if not mine:
        print(f"GPU {index}: DISAGREE: missing from kvdoctor probe")
        bad += 1
        continue
    if any(d["mig"] for d in mine):
        print(f"GPU {index}: MIG enabled ({len(mine)} instance(s)); not compared")
        continue
    d = mine[0]
    ok = close(d["total_gib"], ref["total"], ref["total"]) and close(
        d["used_gib"], ref["used"], ref["total"]
    )
    bad += not ok
    print(
        f"GPU {index}: total kvdoctor {fmt(d['total_gib'])} / nvidia-smi {fmt(ref['total'])} GiB, "
        f"used {fmt(d['used_gib'])} / {fmt(ref['used'])} GiB: {'agree' if ok else 'DISAGREE'}"
    )

mine_procs = {
    (p["pid"], p["device_index"]): p for p in probe["processes"] if p["kind"] == "compute"
}
for r in rows("apps.csv"):
    pid, index, used = int(r[0]), uuid_index.get(r[1]), num(r[2])
    total = smi.get(index, {}).get("total")
    p = mine_procs.get((pid, index))
    if p is None:
        # kvdoctor in a container sees host PIDs the same way nvidia-smi does; a process
        # that started or ended between the two calls shows up here too: rerun to confirm
        print(f"pid {pid} on GPU {index}: DISAGREE: not in kvdoctor probe")
        bad += 1
        continue
    ok = close(p["used_gib"], used, total)
    bad += not ok
    print(
        f"pid {pid} on GPU {index}: used {fmt(p['used_gib'])} / {fmt(used)} GiB: "
        f"{'agree' if ok else 'DISAGREE'}"
    )
print(f"probe status: {probe['status']}" + (f" ({probe['note']})" if probe["note"] else ""))
print("all agree" if not bad else f"{bad} disagreement(s)")
sys.exit(1 if bad else 0)
PY
