"""nvidia-smi text → Snapshot: the default table (GPU, MIG and process sections) and the
``--query-gpu`` / ``--query-compute-apps`` CSV forms, as they appear pasted into a log or a
ticket. Layouts differ across drivers (pre-450 process table without GI/CI, 530+ wider
columns, 580 wider PID column), so rows are matched by their tokens, not by column offsets.

:class:`SmiReader` is fed one line at a time; lines that cannot start or continue a block
are rejected by a few substring tests, so it can sit in front of every line of a log.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field, replace

from kvdoctor.probe.snapshot import (
    MIB_PER_GIB,
    STATUS_OK,
    STATUS_PARTIAL,
    Device,
    Process,
    ProcessKind,
    Snapshot,
    SnapshotSource,
)

_HEADER = re.compile(r"NVIDIA-SMI\s+\S+\s+Driver Version:\s*(\S+)")
_DATE = re.compile(r"^\w{3} \w{3} +\d{1,2} \d\d:\d\d:\d\d \d{4}$")
_GPU_ROW = re.compile(r"^\|\s*(\d+)\s+(.+?)\s+(?:On|Off|WDDM|TCC|N/A)\s*\|\s*[0-9A-Fa-f]+:[0-9A-Fa-f]+:")
_MEM = re.compile(r"(\d+)\s*MiB\s*/\s*(\d+)\s*MiB")
_MIG_ROW = re.compile(r"^\|\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*\|\s*(\d+)\s*MiB\s*/\s*(\d+)\s*MiB")
_TYPE = r"(C\+G|M\+C|C|G|M)"
_TAIL = r"\s+(.*?)\s+(\d+\s*MiB|N/A)\s*\|$"
_PROC_ROW = re.compile(r"^\|\s*(\d+)\s+(N/A|\d+)\s+(N/A|\d+)\s+(\d+)\s+" + _TYPE + _TAIL)
_PROC_ROW_OLD = re.compile(r"^\|\s*(\d+)\s+(\d+)\s+" + _TYPE + _TAIL)  # drivers before 450
# a shell prompt: "$ ps …", "host:~$ ps …", "root@box:/srv# ps …"
_PROMPT = re.compile(r"^(?:[\w.@-]+:[~/][^\s$#]*)?[$#] ")
_COMMAND = re.compile(r"nvidia-smi\b.*--query-(gpu|compute-apps)=([\w.,]+)(?:.*--format=(\S+))?")
_FIELD = re.compile(r"^[a-z_.]+(?: \[[^\]]+\])?$")
_NA = {"", "N/A", "[N/A]", "[Not Supported]", "Not Supported", "[Unknown Error]", "[Not Found]"}
_GPU_FIELDS = {"memory.total", "memory.used", "memory.free"}
# --query-compute-apps accepts short names; its CSV header prints the long ones
_ALIASES = {"used_memory": "used_gpu_memory", "gpu_name": "name", "gpu_uuid": "uuid"}


class _Mode(enum.Enum):
    IDLE = "idle"
    TABLE = "table"
    GPU_CSV = "gpu_csv"
    APPS_CSV = "apps_csv"


@dataclass
class _Gpu:
    index: int
    name: str
    used: float | None = None
    total: float | None = None
    mig: bool = False
    uma: bool = False
    rows: int = 1


@dataclass(frozen=True)
class _Row:
    """A process row before the devices are known (CSV rows name their GPU by UUID)."""

    proc: Process
    gi: str = "N/A"
    ci: str = "N/A"
    uuid: str | None = None


@dataclass
class _Table:
    gpus: list[_Gpu] = field(default_factory=list)
    migs: list[tuple[int, int, int, int, float, float]] = field(default_factory=list)
    section: str = "gpus"


class SmiReader:
    """Collects nvidia-smi output embedded in a log; the newest block of each kind wins."""

    def __init__(self) -> None:
        self._mode = _Mode.IDLE
        self._lines: list[int] = []
        self._prev = self._prev2 = ""  # the date line sits two lines above the header
        self._prev_no = self._prev2_no = 0
        self._date: str | None = None
        self._driver: str | None = None
        self._table: _Table | None = None
        self._devices: list[Device] | None = None
        self._has_procs = False
        self._proc_rows: list[_Row] = []
        self._migs: dict[tuple[int, int, int], int] = {}  # (gpu, gi, ci) -> MIG device
        self._source = SnapshotSource.SMI_TABLE
        self._fields: list[str] = []
        self._headerless = False
        self._queued: list[tuple[str, list[str], str]] = []  # the next queries of the same prompt

    def feed(self, number: int, text: str) -> None:
        if self._mode is _Mode.IDLE:
            if not _may_start(text):
                self._prev2, self._prev = self._prev, text
                self._prev2_no, self._prev_no = self._prev_no, number
                return
            self._start(text)
        elif not self._continue(text):
            self._mode = _Mode.IDLE
            if _may_start(text):
                self._start(text)
        if self._mode is not _Mode.IDLE:
            self._lines.append(number)
        self._prev2, self._prev = self._prev, text
        self._prev2_no, self._prev_no = self._prev_no, number

    def lines(self) -> list[int]:
        return list(self._lines)

    def result(self) -> Snapshot | None:
        """The snapshot so far; feeding may go on afterwards (a live log)."""
        devices, migs = self._devices, self._migs
        if self._table is not None and self._table.gpus:  # a table still being read
            devices, migs = _table_devices(self._table), _mig_map(self._table)
        if devices is None and not self._has_procs:
            return None
        # attached only now: CSV process rows may precede the GPUs they name
        procs = tuple(_attach(self._proc_rows, devices or [], migs))
        gpus = tuple(devices or ())
        complete = bool(gpus) and all(d.total_gib is not None for d in gpus)
        notes = [f"read from {self._source.value} output"]
        if self._date:
            notes.append(f"printed at {self._date} (local time of that machine)")
        if not gpus:
            notes.append("no GPU rows, only processes")
        return Snapshot(
            STATUS_OK if complete else STATUS_PARTIAL,
            None,
            self._source,
            gpus,
            procs,
            "; ".join(notes),
            self._driver,
        )

    # ---- block starts ---------------------------------------------------------------

    def _start(self, text: str) -> None:
        line = text.strip()
        header = _HEADER.search(line)
        if header:
            self._close_table()
            self._driver = header.group(1)
            self._take_preamble()
            self._table, self._source, self._mode = _Table(), SnapshotSource.SMI_TABLE, _Mode.TABLE
            self._devices, self._has_procs, self._proc_rows = [], True, []
        elif line.startswith("|") and ("Processes:" in line or _PROC_ROW.match(line)):
            # a process table pasted alone, or only its rows (the header cut)
            self._close_table()
            self._table, self._mode = _Table(section="procs"), _Mode.TABLE
            self._has_procs, self._proc_rows = True, []
            self._proc_line(line)  # (no row on the header line: nothing taken)
        elif commands := [c for part in re.split(r";|&&", line) if (c := _COMMAND.search(part)) is not None]:
            # (two queries on one prompt, "nvidia-smi --query-gpu=… ; nvidia-smi --query-compute-apps=…":
            # their outputs follow one after the other)
            self._queued = [(c.group(1), c.group(2).split(","), c.group(3) or "") for c in commands[1:]]
            first = commands[0]
            self._start_csv(first.group(1), first.group(2).split(","), first.group(3) or "")
        else:
            self._csv_header(line)

    def _take_preamble(self) -> None:
        """The top border and the date line above the header belong to the table too."""
        prev, prev2 = self._prev.strip(), self._prev2.strip()
        self._date, taken = None, []
        if _DATE.match(prev):
            self._date, taken = prev, [self._prev_no]
        elif prev.startswith("+"):
            if _DATE.match(prev2):
                self._date, taken = prev2, [self._prev2_no]
            taken.append(self._prev_no)
        last = self._lines[-1] if self._lines else 0
        self._lines.extend(n for n in taken if n > last)  # not twice after a previous table

    def _start_csv(self, kind: str, fields: list[str], fmt: str) -> None:
        self._close_table()
        self._mode = _Mode.GPU_CSV if kind == "gpu" else _Mode.APPS_CSV
        self._fields = [_ALIASES.get(f, f) for f in fields]
        self._headerless = "noheader" in fmt
        self._begin_csv_rows()

    def _csv_header(self, line: str) -> None:
        names = [c.strip() for c in line.split(",")]
        if len(names) < 2 or not all(_FIELD.match(n) for n in names):
            return
        fields = [_ALIASES.get(n.split(" [")[0], n.split(" [")[0]) for n in names]
        if _GPU_FIELDS & set(fields):
            self._start_csv("gpu", fields, "")
        elif "pid" in fields:
            self._start_csv("compute-apps", fields, "")

    def _begin_csv_rows(self) -> None:
        self._source = SnapshotSource.SMI_CSV
        if self._mode is _Mode.GPU_CSV:
            self._devices = []
        else:
            self._has_procs, self._proc_rows = True, []

    # ---- block bodies ---------------------------------------------------------------

    def _continue(self, text: str) -> bool:
        line = text.strip()
        if self._mode is _Mode.TABLE:
            if not line:
                return True  # nvidia-smi prints a blank line between its GPU and process tables
            if line[0] not in "|+":
                return False
            self._table_line(line)
            return True
        return self._csv_line(line)

    def _table_line(self, line: str) -> None:
        table = self._table
        assert table is not None  # TABLE mode always has one; see _start
        if "MIG devices:" in line:
            table.section = "migs"
        elif "Processes:" in line:
            table.section = "procs"
        elif line.startswith("+"):
            if table.gpus:
                table.gpus[-1].rows = 99  # a separator closes the GPU's block of rows
        elif table.section == "gpus":
            self._gpu_line(table, line)
        elif table.section == "migs":
            row = _MIG_ROW.match(line)
            if row:
                g, gi, ci, dev, used, total = (int(x) for x in row.groups())
                table.migs.append((g, gi, ci, dev, used / MIB_PER_GIB, total / MIB_PER_GIB))
        else:
            self._proc_line(line)

    def _gpu_line(self, table: _Table, line: str) -> None:
        row = _GPU_ROW.match(line)
        if row:
            table.gpus.append(_Gpu(int(row.group(1)), row.group(2).strip()))
            return
        if not table.gpus or table.gpus[-1].rows >= 99:
            return
        gpu = table.gpus[-1]
        gpu.rows += 1
        cells = line.split("|")
        if len(cells) < 4:
            return
        mem = _MEM.search(cells[2])
        if mem and gpu.total is None:
            gpu.used, gpu.total = int(mem.group(1)) / MIB_PER_GIB, int(mem.group(2)) / MIB_PER_GIB
        elif gpu.rows == 2 and cells[2].strip() in _NA:
            gpu.uma = True  # unified-memory parts print "Not Supported" for Memory-Usage
        if cells[3].strip().endswith("Enabled"):
            gpu.mig = gpu.rows == 3 or gpu.mig

    def _proc_line(self, line: str) -> None:
        row = _PROC_ROW.match(line)
        if row:
            gpu, gi, ci, pid, kind, name, mem = row.groups()
        else:
            old = _PROC_ROW_OLD.match(line)
            if not old:
                return
            gpu, pid, kind, name, mem = old.groups()
            gi = ci = "N/A"
        used = None if mem == "N/A" else int(mem.replace("MiB", "").strip()) / MIB_PER_GIB
        proc = Process(int(pid), name or None, int(gpu), used, True, _kind(kind))
        self._proc_rows.append(_Row(proc, gi, ci))

    def _csv_line(self, line: str) -> bool:
        if _PROMPT.match(line):
            return False  # the next command at a shell prompt ends the output
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(self._fields) and self._queued and line:
            kind, fields, fmt = self._queued.pop(0)
            if self._mode is _Mode.GPU_CSV and kind != "gpu":
                self._mode = _Mode.APPS_CSV  # (the GPUs read so far stay)
                self._fields = [_ALIASES.get(f, f) for f in fields]
                self._headerless = "noheader" in fmt
                self._has_procs, self._proc_rows = True, []
            else:
                self._start_csv(kind, fields, fmt)
            return self._csv_line(line)
        if len(cells) != len(self._fields):
            # a blank line between the command and its output does not end the block
            return not line and self._headerless
        if all(_FIELD.match(c) for c in cells) and not any(c[:1].isdigit() for c in cells):
            return True  # the header line after the command
        row = dict(zip(self._fields, cells, strict=True))
        if self._mode is _Mode.GPU_CSV:
            assert self._devices is not None  # set by _begin_csv_rows
            self._devices.append(_csv_device(row, len(self._devices)))
        else:
            uuid = row.get("uuid")
            self._proc_rows.append(_Row(_csv_process(row), uuid=None if uuid in _NA else uuid))
            self._has_procs = True
        return True

    # ---- assembly -------------------------------------------------------------------

    def _close_table(self) -> None:
        table, self._table = self._table, None
        if table is not None and table.gpus:
            self._devices, self._migs = _table_devices(table), _mig_map(table)


def _attach(rows: list[_Row], devices: list[Device], migs: dict[tuple[int, int, int], int]) -> list[Process]:
    by_uuid = {d.uuid: d.index for d in devices if d.uuid}
    out = []
    for row in rows:
        proc = row.proc
        if row.uuid is not None:  # CSV: the device comes from the gpu_uuid column
            proc = replace(proc, device_index=by_uuid.get(row.uuid))
        elif row.gi.isdigit() and row.ci.isdigit() and proc.device_index is not None:
            proc = replace(proc, mig_index=migs.get((proc.device_index, int(row.gi), int(row.ci))))
        out.append(proc)
    return out


def _mig_map(table: _Table) -> dict[tuple[int, int, int], int]:
    return {(g, gi, ci): dev for g, gi, ci, dev, _, _ in table.migs}


def _may_start(text: str) -> bool:
    # The gate for every log line, so one substring scan for most of them: tables start
    # with "|" (or "+", but the header row decides), CSV headers with a lowercase field name.
    first = text[:1]
    if first == " ":
        first = text.lstrip()[:1]
    if first == "|":
        # (or one process row quoted alone, with its memory: "|  0  N/A  N/A  31877  C  …python  25498MiB |")
        return (
            "NVIDIA-SMI" in text
            or "Processes:" in text
            or ("MiB" in text and _PROC_ROW.match(text.strip()) is not None)
        )
    if "nvidia-smi" in text:
        return True
    return first.islower() and ("memory." in text or "pid" in text)


def _kind(code: str) -> ProcessKind:
    # "C+G" holds a compute context too; "M"/"M+C" are MPS clients, which are compute
    return ProcessKind.GRAPHICS if code == "G" else ProcessKind.COMPUTE


def _mib(value: str | None) -> float | None:
    if value is None or value.strip() in _NA:
        return None
    number = value.replace("MiB", "").strip()
    try:
        return float(number) / MIB_PER_GIB
    except ValueError:
        return None


def _csv_device(row: dict[str, str], position: int) -> Device:
    total, used = _mib(row.get("memory.total")), _mib(row.get("memory.used"))
    free, reserved = _mib(row.get("memory.free")), _mib(row.get("memory.reserved"))
    if free is None and total is not None and used is not None:
        free = total - used - (reserved or 0.0)
    index = row.get("index", "")
    uuid = row.get("uuid")
    return Device(
        index=int(index) if index.isdigit() else position,
        name=row.get("name") or "unknown",
        uuid=None if uuid in _NA or uuid is None else uuid,
        total_gib=total,
        free_gib=free,
        used_gib=used,
        reserved_gib=reserved,
        mig=row.get("mig.mode.current") == "Enabled",
        uma="memory.total" in row and total is None,
    )


def _csv_process(row: dict[str, str]) -> Process:
    name = row.get("process_name")
    return Process(
        pid=int(row["pid"]) if row.get("pid", "").isdigit() else -1,
        name=None if name in _NA else name,
        device_index=None,
        used_gib=_mib(row.get("used_gpu_memory")),
        resolvable=name not in _NA if name is not None else True,
    )


def _table_devices(table: _Table) -> list[Device]:
    devices: list[Device] = []
    for gpu in table.gpus:
        migs = [m for m in table.migs if m[0] == gpu.index]
        if not migs:
            free = None if gpu.total is None or gpu.used is None else gpu.total - gpu.used
            devices.append(Device(gpu.index, gpu.name, None, gpu.total, free, gpu.used, None, gpu.mig, gpu.uma))
        for g, gi, ci, dev, used, total in migs:
            name = f"{gpu.name} MIG GI {gi} CI {ci}"
            devices.append(Device(g, name, None, total, total - used, used, None, True, False, dev))
    return devices


def parse_smi_text(text: str) -> Snapshot | None:
    """The newest nvidia-smi snapshot found in ``text``, or None when there is none."""
    reader = SmiReader()
    for number, line in enumerate(text.splitlines(), start=1):
        reader.feed(number, line)
    return reader.result()
