"""What a request to `/v1/diagnose` or the paste page carries: the log, a language, a GPU snapshot.

Three kinds of body: the log itself (any text type, or none), JSON `{"log", "lang", "probe",
"name"}`, or a form (multipart or, from the page, urlencoded) parsed by Starlette. A log that
is gzip is inflated here, under a cap, so a small bomb cannot tie up a worker thread.
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import Request

from kvdoctor.server.errors import HttpError

LANGS = ("en", "zh")
NAME_CHARS = 200
GZIP_EXPANSION = 8  # a gzip log may inflate to this many times the body limit, no more
FORM_FILES = 4
FORM_FIELDS = 16
JSON_TYPE = "application/json"
FORM_TYPES = ("multipart/form-data", "application/x-www-form-urlencoded")
# Bodies that are the log itself. `curl --data-binary @vllm.log` labels it urlencoded.
RAW_TYPES = (
    "",
    "application/octet-stream",
    "application/gzip",
    "application/x-gzip",
    "application/x-www-form-urlencoded",
    "application/x-ndjson",
    "application/jsonl",
)
_FORM_HINT = "send the log as a file part (curl -F file=@vllm.log)"


@dataclass(frozen=True)
class DiagnoseRequest:
    log: bytes
    lang: str = "en"
    probe: Any = None  # kvdoctor.probe.Snapshot
    name: str = "<request>"
    pasted: bool = False  # the log came from a form field (the page shows it again), not a file


def media_type(request: Request) -> str:
    return (request.headers.get("content-type") or "").split(";", 1)[0].strip().lower()


def check_lang(value: Any, default: str) -> str:
    if value in (None, ""):
        return default
    if value not in LANGS:
        raise HttpError(400, f"request: lang {value!r} is not supported; use one of {', '.join(LANGS)}")
    return str(value)


def _check_name(value: Any, default: str) -> str:
    if value in (None, ""):
        return default
    if not isinstance(value, str):
        raise HttpError(400, f"request: name must be a string, not {type(value).__name__}; send a file name")
    return value[:NAME_CHARS]


async def read_diagnose_request(request: Request, body: bytes, *, max_body: int) -> DiagnoseRequest:
    """`POST /v1/diagnose`: `?lang=` and `?name=` are defaults the body may override."""
    lang = check_lang(request.query_params.get("lang"), "en")
    name = _check_name(request.query_params.get("name"), "<request>")
    kind = media_type(request)
    if kind == JSON_TYPE:
        return from_json(body, lang, name)
    if kind == FORM_TYPES[0]:
        return await from_form(await read_form(request, max_body), lang, name)
    if kind in RAW_TYPES or kind.startswith("text/"):
        return DiagnoseRequest(body, lang, None, name)
    raise HttpError(
        415,
        f"request: Content-Type {kind} is not supported; send text/plain (the log), "
        "application/json or multipart/form-data",
    )


def from_json(body: bytes, lang: str, name: str) -> DiagnoseRequest:
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        hint = 'send {"log": "...", "lang": "en"}'
        raise HttpError(400, f"request: body is not valid JSON ({reason}); {hint}") from None
    if not isinstance(data, dict) or not isinstance(data.get("log"), str):
        raise HttpError(400, 'request: JSON body needs a "log" string; send {"log": "..."}')
    return DiagnoseRequest(
        data["log"].encode("utf-8", "replace"),
        check_lang(data.get("lang"), lang),
        probe_from(data.get("probe")),
        _check_name(data.get("name"), name),
    )


async def read_form(request: Request, max_body: int) -> FormData:
    """The form through Starlette (python-multipart), its malformations answered with 400."""
    try:
        return await request.form(max_files=FORM_FILES, max_fields=FORM_FIELDS, max_part_size=max_body)
    except MultiPartException as exc:
        raise HttpError(400, f"request: malformed form body ({exc.message}); {_FORM_HINT}") from None
    except HTTPException as exc:
        if exc.status_code != 400:
            raise
        raise HttpError(400, f"request: malformed form body ({exc.detail}); {_FORM_HINT}") from None


async def from_form(form: FormData, lang: str, name: str) -> DiagnoseRequest:
    """A file part (any name but `probe`) is the log, else a `log` field; `lang`, `probe` fields.

    A browser sends an empty part for a file input left blank: it does not count as the log."""
    try:
        fields = {k: v for k, v in reversed(form.multi_items()) if isinstance(v, str)}
        uploads = [(k, v) for k, v in form.multi_items() if isinstance(v, UploadFile)]
        probe_raw: str | bytes | None = fields.get("probe")
        log: bytes | None = None
        for key, upload in uploads:
            data = await upload.read()
            if key == "probe":
                probe_raw = probe_raw or data
            elif data and log is None:
                log, name = data, upload.filename or name
        pasted = log is None and "log" in fields
        if pasted:
            log = fields["log"].encode("utf-8", "replace")
        elif log is None and not uploads:
            raise HttpError(400, f"request: the form has no file part (nor a log field); {_FORM_HINT}")
        return DiagnoseRequest(
            log or b"", check_lang(fields.get("lang"), lang), probe_from(probe_raw), name[:NAME_CHARS], pasted=pasted
        )
    finally:
        await form.close()


def probe_from(value: Any) -> Any:
    """A GPU snapshot from probe JSON (an object, or its text) or nvidia-smi text; None if absent."""
    from kvdoctor.probe import ProbeError, parse_snapshot_text, snapshot_from_dict

    hint = "send what `kvdoctor probe --format json` writes"
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            raise HttpError(400, f"request: probe is not valid JSON; {hint}") from None
    try:
        if isinstance(value, dict):
            # snapshot_from_dict compares the version with ==, for which true is 1
            if isinstance(value.get("probe_schema_version"), bool):
                raise ProbeError("probe_schema_version is a boolean, expected 1")
            return snapshot_from_dict(value)
        if isinstance(value, str):
            return parse_snapshot_text(value, where="probe")
    except ProbeError as exc:
        raise HttpError(400, f"request: probe: {exc}; {hint}") from None
    raise HttpError(400, f"request: probe must be an object; {hint}")


def inflate(body: bytes, limit: int) -> bytes:
    """Gunzip a gzip log with a cap; anything else (or a gzip that does not inflate) is returned
    as it is."""
    if body[:2] != b"\x1f\x8b":
        return body
    out = io.BytesIO()
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(body)) as stream:
            while chunk := stream.read(65536):
                out.write(chunk)
                if out.tell() > limit:
                    raise HttpError(413, f"request: gzip body inflates past {limit} bytes; send fewer lines")
    except (OSError, EOFError, zlib.error):
        # a .gz cut in transfer keeps the lines it inflated to; bytes that only start like gzip
        # are read as the log they are (kvdoctor reads any bytes, and the answer says what it saw)
        return out.getvalue() or body
    return out.getvalue()


def require_log(log: bytes) -> bytes:
    if not log.strip():
        raise HttpError(422, "request: the log is empty; send what the vLLM server printed (stdout and stderr)")
    return log
