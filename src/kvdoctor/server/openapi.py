"""`GET /openapi.json`: the HTTP API as OpenAPI 3.1, written as data.

The report is the JSON schema of `kvdoctor diagnose --format json` (docs/report.schema.json,
shipped in this package as report.schema.json); its `$defs` become components. Every error is
one JSON object with one line. The property tests (tests/test_server_schema.py) hold the server
to this document with schemathesis.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from kvdoctor.server.bodies import LANGS

REPORT_SCHEMA = "report.schema.json"
NON_BLANK = "\\S"  # an empty or all-blank log is answered 422

# (status, when): the error answers of POST /v1/diagnose
DIAGNOSE_ERRORS = (
    ("400", "Bad JSON, no `log`, an invalid `probe`, an unknown `lang`, a malformed form or gzip body."),
    ("413", "The body is larger than `--max-body`, or a gzip log inflates past 8 times that."),
    ("415", "A Content-Type that is neither a log (text/*, octet-stream, gzip), JSON nor multipart."),
    ("422", "The log is empty or blank."),
    ("504", "The diagnosis took longer than `--timeout`."),
)


def report_components() -> dict[str, Any]:
    """The report schema as components: `Report` plus one component per `$defs` entry."""
    text = resources.files("kvdoctor.server").joinpath(REPORT_SCHEMA).read_text(encoding="utf-8")
    schema = json.loads(text)
    defs = schema.pop("$defs", {})
    for key in ("$schema", "$id"):  # an $id would move the base URI of the "#/…" references
        schema.pop(key, None)
    names = {name: name[:1].upper() + name[1:] for name in defs}
    out = {"Report": _rebase(schema, names)}
    out.update({names[name]: _rebase(value, names) for name, value in defs.items()})
    return out


def _rebase(node: Any, names: dict[str, str]) -> Any:
    if isinstance(node, dict):
        return {
            k: (_component(v, names) if k == "$ref" and isinstance(v, str) else _rebase(v, names))
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_rebase(v, names) for v in node]
    return node


def _component(ref: str, names: dict[str, str]) -> str:
    prefix = "#/$defs/"
    return f"#/components/schemas/{names[ref[len(prefix) :]]}" if ref.startswith(prefix) else ref


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _probe_schemas() -> dict[str, Any]:
    """What `kvdoctor probe --format json` writes (docs/probe.md)."""
    number = {"type": ["number", "null"]}
    index = {"type": ["integer", "null"]}
    device = {
        "type": "object",
        "required": ["index", "name"],
        "properties": {
            "index": {"type": "integer"},
            "name": {"type": "string"},
            "uuid": {"type": ["string", "null"]},
            **{k: number for k in ("total_gib", "free_gib", "used_gib", "reserved_gib")},
            "mig": {"type": ["boolean", "null"]},
            "uma": {"type": ["boolean", "null"]},
            "mig_index": index,
            "visible_index": index,
        },
    }
    process = {
        "type": "object",
        "required": ["pid"],
        "properties": {
            "pid": {"type": "integer"},
            "name": {"type": ["string", "null"]},
            "device_index": index,
            "used_gib": number,
            "resolvable": {"type": ["boolean", "null"]},
            "kind": {"enum": ["compute", "graphics", None]},
            "mig_index": index,
        },
    }
    probe = {
        "type": "object",
        "description": "A GPU snapshot, as `kvdoctor probe --format json` writes it.",
        "required": ["probe_schema_version", "status", "source", "devices", "processes"],
        "properties": {
            "probe_schema_version": {"type": "integer", "const": 1},
            "status": {"type": "string", "pattern": "^(ok|partial|unavailable: [a-z_]+)$"},
            "source": {"enum": ["nvml", "nvidia-smi", "nvidia-smi-csv"]},
            "taken_at": {"type": ["string", "null"]},
            "driver_version": {"type": ["string", "null"]},
            "note": {"type": ["string", "null"]},
            "devices": {"type": "array", "items": _ref("ProbeDevice")},
            "processes": {"type": "array", "items": _ref("ProbeProcess")},
        },
    }
    return {"Probe": probe, "ProbeDevice": device, "ProbeProcess": process}


def _request_schemas() -> dict[str, Any]:
    lang = {
        "enum": [*LANGS, "", None],
        "description": "Language of the explanations; empty or null: `?lang=`, else en.",
    }
    return {
        "DiagnoseJson": {
            "type": "object",
            "required": ["log"],
            "properties": {
                "log": {"type": "string", "pattern": NON_BLANK, "description": "The log text (never a path)."},
                "lang": lang,
                "probe": {"oneOf": [_ref("Probe"), {"type": "null"}]},
                "name": {"type": ["string", "null"], "description": "A name for the log: the report's `source`."},
            },
        },
        "DiagnoseForm": {
            "type": "object",
            "description": "A file part is the log (any part name but `probe`); a `log` field works too.",
            "required": ["file"],
            "properties": {
                "file": {
                    "type": "string",
                    "format": "binary",
                    "minLength": 1,
                    # (a blank log is refused with 422, as a JSON body's)
                    "pattern": NON_BLANK,
                    "description": "The log (or a .gz); not blank.",
                },
                "lang": {"enum": [*LANGS, ""], "description": lang["description"]},
                "probe": _ref("Probe"),
            },
        },
        "Error": {
            "type": "object",
            "required": ["error"],
            "additionalProperties": False,
            "properties": {
                "error": {
                    "type": "string",
                    "pattern": "^kvdoctor: [^\\n]+$",
                    "description": "One line: `kvdoctor: <where>: <what>; <what to do>`.",
                }
            },
        },
        "Health": {
            "type": "object",
            "required": ["status", "version"],
            "properties": {"status": {"const": "ok"}, "version": {"type": "string"}},
        },
    }


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _diagnose_operation(max_body: int) -> dict[str, Any]:
    raw = {"type": "string", "format": "binary", "minLength": 1}
    content = {
        "text/plain": {"schema": {"type": "string", "pattern": NON_BLANK}},
        "application/json": {"schema": _ref("DiagnoseJson")},
        "multipart/form-data": {
            "schema": _ref("DiagnoseForm"),
            "encoding": {"probe": {"contentType": "application/json"}},
        },
        "application/gzip": {"schema": raw},
    }
    errors = {status: {"description": when, "content": _json(_ref("Error"))} for status, when in DIAGNOSE_ERRORS}
    return {
        "operationId": "diagnose",
        "summary": "Diagnose a vLLM start-up log",
        "description": (
            "The same report as `kvdoctor diagnose --format json`; the status is 200 whatever the "
            f"verdict. Bodies over {max_body} bytes are refused with 413 before they are read. Any "
            "text body (or one without a Content-Type, or curl's urlencoded default) is the log; "
            "a body that is gzip is inflated."
        ),
        "parameters": [
            {
                "name": "lang",
                "in": "query",
                "required": False,
                "description": "Language of the explanations (en by default; empty is the default).",
                "schema": {"enum": [*LANGS, ""]},
            },
            {"name": "name", "in": "query", "required": False, "schema": {"type": "string"}},
        ],
        "requestBody": {"required": True, "content": content},
        "responses": {"200": {"description": "The report.", "content": _json(_ref("Report"))}, **errors},
    }


def openapi_document(version: str, *, max_body: int) -> dict[str, Any]:
    health = {
        "operationId": "health",
        "summary": "Liveness and version",
        "responses": {"200": {"description": "The server is up.", "content": _json(_ref("Health"))}},
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "kvdoctor",
            "version": version,
            "description": "Diagnoses vLLM start-up memory failures from the server's log (docs/server.md).",
        },
        "paths": {"/v1/diagnose": {"post": _diagnose_operation(max_body)}, "/healthz": {"get": health}},
        "components": {"schemas": {**report_components(), **_probe_schemas(), **_request_schemas()}},
    }
