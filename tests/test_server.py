"""`kvdoctor serve`: the ASGI app in-process, and a real `kvdoctor serve` process on loopback
talking to a mock Slack (Web API + response_url + file downloads) started by the tests."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import hmac
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from kvdoctor.probe import Device, Snapshot, SnapshotSource, snapshot_to_dict
from kvdoctor.server import ServerConfig, create_app
from kvdoctor.server.slack import SlackConfig, SlackEndpoint

CORPUS = Path(__file__).parent / "fixtures" / "corpus"
SAMPLER_OOM = next(CORPUS.glob("087-*.log")).read_bytes()  # cuda_oom, sampler_warmup
FREE_MEMORY = next(CORPUS.glob("027-*.log")).read_bytes()  # insufficient_free_memory_at_startup
SECRET = "test-signing-secret"
TOKEN = "xoxb-test-token"
KVDOCTOR = Path(sys.executable).with_name("kvdoctor")


# ---- in-process ASGI calls ------------------------------------------------------------------


class Sent:
    def __init__(self, messages: list[dict[str, Any]], reads: int) -> None:
        start = messages[0]
        self.status: int = start["status"]
        self.headers = {k.decode(): v.decode() for k, v in start["headers"]}
        self.body = b"".join(m.get("body", b"") for m in messages[1:])
        self.reads = reads

    def json(self) -> Any:
        return json.loads(self.body)


def call(
    app: Any,
    method: str,
    path: str,
    *,
    body: bytes | list[bytes] = b"",
    headers: dict[str, str] | None = None,
    query: str = "",
    endless: bool = False,
) -> Sent:
    """One HTTP exchange through the ASGI interface; `endless` streams 64 KiB chunks forever."""
    chunks = [body] if isinstance(body, bytes) else list(body)
    reads = 0

    async def receive() -> dict[str, Any]:
        nonlocal reads
        reads += 1
        if endless:
            return {"type": "http.request", "body": b"x" * 65536, "more_body": True}
        chunk = chunks.pop(0) if chunks else b""
        return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    hdrs = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "headers": hdrs,
        "query_string": query.encode(),
    }
    asyncio.run(app(scope, receive, send))
    return Sent(sent, reads)


@pytest.fixture
def access() -> list[dict[str, Any]]:
    return []


@pytest.fixture
def app(access: list[dict[str, Any]]) -> Any:
    return create_app(ServerConfig(max_body=1 << 20, timeout_s=30), access_log=access.append)


def test_healthz(app: Any) -> None:
    sent = call(app, "GET", "/healthz")
    assert sent.status == 200 and sent.json()["status"] == "ok"


def test_diagnose_raw_text(app: Any) -> None:
    sent = call(app, "POST", "/v1/diagnose", body=SAMPLER_OOM, headers={"content-type": "text/plain"})
    assert sent.status == 200
    records = sent.json()
    assert records["schema_version"] == 1
    assert records["verdict"] == "cuda_oom"
    assert records["diagnoses"][0]["phase"] == "sampler_warmup"
    assert "reduce_max_num_seqs" in [r["action"] for r in records["diagnoses"][0]["remedies"]]


def test_diagnose_json_with_lang_and_probe(app: Any) -> None:
    snap = Snapshot(
        "ok",
        None,
        SnapshotSource.SMI_TABLE,
        (Device(0, "NVIDIA GeForce RTX 3050", None, 4.0, 3.2, 0.8),),
    )
    body = json.dumps({"log": FREE_MEMORY.decode(), "lang": "zh", "probe": snapshot_to_dict(snap)})
    sent = call(
        app,
        "POST",
        "/v1/diagnose",
        body=body.encode(),
        headers={"content-type": "application/json"},
    )
    assert sent.status == 200
    records = sent.json()
    assert records["verdict"] == "insufficient_free_memory_at_startup"
    assert records["lang"] == "zh"
    assert records["probe"]["origin"] == "probe"


def test_diagnose_multipart_file(app: Any) -> None:
    boundary = "kvdoctorBoundary42"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="lang"\r\n\r\nen\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="vllm.log"\r\n'
            "Content-Type: text/plain\r\n\r\n"
        ).encode()
        + SAMPLER_OOM
        + f"\r\n--{boundary}--\r\n".encode()
    )
    sent = call(
        app,
        "POST",
        "/v1/diagnose",
        body=body,
        headers={"content-type": f"multipart/form-data; boundary={boundary}"},
    )
    assert sent.status == 200
    assert sent.json()["verdict"] == "cuda_oom"
    assert sent.json()["source"] == "vllm.log"


def test_gzip_body_is_read(app: Any) -> None:
    sent = call(app, "POST", "/v1/diagnose", body=gzip.compress(SAMPLER_OOM))
    assert sent.status == 200 and sent.json()["verdict"] == "cuda_oom"


def test_a_gzip_cut_in_transfer_keeps_the_lines_it_inflated_to(app: Any) -> None:
    packed = gzip.compress(SAMPLER_OOM * 40)
    sent = call(app, "POST", "/v1/diagnose", body=packed[: len(packed) - 12])  # no trailer
    assert sent.status == 200 and sent.json()["verdict"] == "cuda_oom"


def test_bytes_that_only_start_like_gzip_get_an_answer_that_says_so(app: Any) -> None:
    sent = call(app, "POST", "/v1/diagnose", body=b"\x1f\x8b not gzip at all\n" + SAMPLER_OOM)
    assert sent.status == 200 and sent.json()["verdict"] == "unknown"
    assert any("read error" in note for note in sent.json()["notes"])


def test_a_path_in_the_body_is_log_text_not_a_file_on_the_server(app: Any) -> None:
    sent = call(
        app,
        "POST",
        "/v1/diagnose",
        body=json.dumps({"log": "/etc/passwd"}).encode(),
        headers={"content-type": "application/json"},
    )
    assert sent.status == 200
    assert sent.json()["verdict"] == "unknown"
    assert sent.json()["source"] != "/etc/passwd"


@pytest.mark.parametrize(
    ("content_type", "body", "where"),
    [
        ("application/json", b"{not json", "not valid JSON"),
        ("application/json", b'{"text": "x"}', '"log" string'),
        ("application/json", b'{"log": "x", "probe": {"probe_schema_version": 9}}', "probe:"),
        ("application/json", b'{"log": "x", "lang": "fr"}', "lang 'fr'"),
        (
            "multipart/form-data; boundary=zz",
            b'--zz\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--zz--\r\n',
            "no file part",
        ),
    ],
)
def test_bad_requests_get_one_line_400(app: Any, content_type: str, body: bytes, where: str) -> None:
    sent = call(app, "POST", "/v1/diagnose", body=body, headers={"content-type": content_type})
    assert sent.status == 400
    message = sent.json()["error"]
    assert message.startswith("kvdoctor: request: ") and "\n" not in message and where in message


def test_declared_oversized_body_is_refused_before_reading(app: Any) -> None:
    sent = call(app, "POST", "/v1/diagnose", body=b"x", headers={"content-length": str((1 << 20) + 1)})
    assert sent.status == 413
    assert sent.reads == 0
    assert sent.headers["connection"] == "close"


def test_chunked_oversized_body_stops_at_the_limit(app: Any) -> None:
    sent = call(app, "POST", "/v1/diagnose", endless=True)
    assert sent.status == 413
    assert sent.reads == (1 << 20) // 65536 + 1  # never one chunk more than the limit needs


def test_gzip_bomb_is_refused(access: list[dict[str, Any]]) -> None:
    small = create_app(ServerConfig(max_body=4096), access_log=access.append)
    bomb = gzip.compress(b"\n" * (4096 * 9))
    assert len(bomb) < 4096
    assert call(small, "POST", "/v1/diagnose", body=bomb).status == 413


def test_time_limit_answers_504(access: list[dict[str, Any]]) -> None:
    slow = create_app(ServerConfig(timeout_s=1e-9), access_log=access.append)
    sent = call(slow, "POST", "/v1/diagnose", body=SAMPLER_OOM * 50)
    assert sent.status == 504
    assert "--timeout" in sent.json()["error"]


def test_routes_and_methods(app: Any) -> None:
    assert call(app, "GET", "/v1/diagnose").status == 405
    assert call(app, "GET", "/nope").status == 404
    assert call(app, "POST", "/slack/events", body=b"{}").status == 404  # no Slack settings


def test_access_log_is_structured_and_content_free(app: Any, access: list[dict[str, Any]]) -> None:
    call(app, "POST", "/v1/diagnose", body=SAMPLER_OOM)
    [record] = access
    assert record["method"] == "POST" and record["path"] == "/v1/diagnose"
    assert record["status"] == 200 and record["bytes"] > 0 and record["ms"] >= 0
    assert record["bytes_in"] == len(SAMPLER_OOM)
    assert "content" not in record and "sampler" not in json.dumps(record)


def test_log_content_puts_the_body_in_the_access_log(access: list[dict[str, Any]]) -> None:
    loud = create_app(ServerConfig(log_content=True), access_log=access.append)
    call(loud, "POST", "/v1/diagnose", body=SAMPLER_OOM)
    assert "warming up sampler" in access[0]["content"]


# ---- Slack checks in-process ------------------------------------------------------------------


def signed(body: bytes, *, secret: str = SECRET, age_s: float = 0) -> dict[str, str]:
    """Headers Slack would send; written here independently of the server's own code."""
    ts = str(int(time.time() - age_s))
    digest = hmac.new(secret.encode(), f"v0:{ts}:".encode() + body, hashlib.sha256).hexdigest()
    return {"x-slack-request-timestamp": ts, "x-slack-signature": f"v0={digest}"}


@pytest.fixture
def slack_app(access: list[dict[str, Any]]) -> Any:
    config = ServerConfig(slack=SlackConfig(SECRET, TOKEN, "http://127.0.0.1:9/api/"))
    return create_app(config, access_log=access.append)


def test_slack_url_verification_through_bolt(slack_app: Any) -> None:
    body = json.dumps({"type": "url_verification", "challenge": "c-123", "token": "t"}).encode()
    sent = call(
        slack_app,
        "POST",
        "/slack/events",
        body=body,
        headers={"content-type": "application/json", **signed(body)},
    )
    assert sent.status == 200 and sent.json()["challenge"] == "c-123"


def _tampered(signature: str) -> str:
    # flip the last hex digit; it must differ from the original whatever the original was
    return signature[:-1] + ("1" if signature[-1] == "0" else "0")


@pytest.mark.parametrize(
    "headers",
    [
        lambda b: signed(b, secret="wrong-secret"),
        lambda b: signed(b, age_s=301),
        lambda b: {**signed(b), "x-slack-signature": _tampered(signed(b)["x-slack-signature"])},
        lambda b: {},
    ],
    ids=["bad-secret", "stale", "tampered", "unsigned"],
)
def test_slack_signature_is_checked(slack_app: Any, access: list[dict[str, Any]], headers: Any) -> None:
    body = json.dumps({"type": "url_verification", "challenge": "c-123"}).encode()
    sent = call(
        slack_app,
        "POST",
        "/slack/events",
        body=body,
        headers={"content-type": "application/json", **headers(body)},
    )
    assert sent.status == 401
    assert "c-123" not in sent.body.decode()
    assert access[-1]["slack"] == "bad_signature"


def test_response_urls_outside_slack_are_not_called() -> None:
    endpoint = SlackEndpoint(SlackConfig(SECRET, TOKEN), lambda *a, **k: None)  # type: ignore
    assert endpoint.allowed_url("https://hooks.slack.com/commands/T1/1/x", hooks=True)
    assert endpoint.allowed_url("https://files.slack.com/files-pri/T1-F1/x.log", hooks=False)
    assert not endpoint.allowed_url("https://hooks.slack.com.evil.example/x", hooks=True)
    assert not endpoint.allowed_url("http://hooks.slack.com/x", hooks=True)
    assert not endpoint.allowed_url("https://files.slack.com/x", hooks=True)
    assert not endpoint.allowed_url("https://169.254.169.254/latest", hooks=False)


# ---- a real `kvdoctor serve` and a mock Slack --------------------------------------------------


class MockSlack:
    """Slack's Web API, response_url hooks and file downloads, on 127.0.0.1."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any], dict[str, str]]] = []
        self.cond = threading.Condition()
        self.files: dict[str, bytes] = {}
        mock = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                path, _, query = self.path.partition("?")
                if path.startswith("/api/"):  # e.g. files.info sends its arguments as a query
                    payload = {k: v[0] for k, v in urllib.parse.parse_qs(query).items()}
                    mock.record(path, payload, dict(self.headers))
                    answer = json.dumps(mock.answer(path, payload)).encode()
                    self.reply(200, answer, "application/json")
                    return
                mock.record(path, {}, dict(self.headers))
                data = mock.files.get(path.rsplit("/", 1)[-1])
                auth_ok = self.headers.get("Authorization") == f"Bearer {TOKEN}"
                self.reply(200 if data and auth_ok else 404, data or b"no", "text/plain")

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                payload = mock.parse(raw, self.headers.get("Content-Type") or "")
                path, _, query = self.path.partition("?")
                payload.update({k: v[0] for k, v in urllib.parse.parse_qs(query).items()})
                mock.record(path, payload, dict(self.headers))
                self.reply(200, json.dumps(mock.answer(path, payload)).encode(), "application/json")

            def reply(self, status: int, data: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @staticmethod
    def parse(raw: bytes, kind: str) -> dict[str, Any]:
        if kind.startswith("application/json"):
            return dict(json.loads(raw or b"{}"))
        if kind.startswith("application/x-www-form-urlencoded"):
            form = {k: v[0] for k, v in urllib.parse.parse_qs(raw.decode()).items()}
            if isinstance(form.get("blocks"), str):
                form["blocks"] = json.loads(form["blocks"])
            return form
        return {"raw": raw.decode("utf-8", "replace")}

    def answer(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        name = path.rsplit("/", 1)[-1]
        if name == "auth.test":
            return {"ok": True, "user_id": "UBOT", "bot_id": "BBOT", "team_id": "T1"}
        if name == "files.info":
            fid = payload["file"]
            return {
                "ok": True,
                "file": {
                    "id": fid,
                    "size": len(self.files[fid]),
                    "url_private": f"{self.url}/files/{fid}",
                },
            }
        if name == "files.getUploadURLExternal":
            return {"ok": True, "upload_url": f"{self.url}/upload/F9", "file_id": "F9"}
        if name == "files.completeUploadExternal":
            return {"ok": True, "files": [{"id": "F9", "title": "evidence"}]}
        return {"ok": True, "ts": "1700000000.000200", "channel": payload.get("channel", "C1")}

    def record(self, path: str, payload: dict[str, Any], headers: dict[str, str]) -> None:
        with self.cond:
            self.calls.append((path, payload, headers))
            self.cond.notify_all()

    def wait_for(self, path: str, count: int = 1, timeout: float = 30) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        with self.cond:
            while len(self.posts(path)) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no call to {path}; got {[c[0] for c in self.calls]}")
                self.cond.wait(left)
            return self.posts(path)

    def posts(self, path: str) -> list[dict[str, Any]]:
        return [p for c, p, _ in self.calls if c == path]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    def __init__(self, port: int, proc: subprocess.Popen[bytes]) -> None:
        self.port, self.proc = port, proc

    def request(
        self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data

    def slack(self, body: bytes, kind: str, **extra: str) -> tuple[int, dict[str, str], bytes]:
        return self.request("POST", "/slack/events", body, {"Content-Type": kind, **signed(body), **extra})


@pytest.fixture(scope="module")
def mock_slack() -> Iterator[MockSlack]:
    mock = MockSlack()
    yield mock
    mock.server.shutdown()


@pytest.fixture(scope="module")
def served(mock_slack: MockSlack) -> Iterator[Served]:
    port = free_port()
    env = {
        **os.environ,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_BOT_TOKEN": TOKEN,
        "SLACK_API_URL": f"{mock_slack.url}/api/",
        "KVDOCTOR_PORT": str(port),
    }
    env.pop("KVDOCTOR_SLACK_LANG", None)
    proc = subprocess.Popen(
        [str(KVDOCTOR), "serve", "--max-body", str(1 << 20)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    server = Served(port, proc)
    deadline = time.monotonic() + 30
    while True:
        try:
            if server.request("GET", "/healthz")[0] == 200:
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(proc.stderr.read().decode() if proc.stderr else "") from None
            time.sleep(0.1)
    yield server
    proc.terminate()
    proc.wait(timeout=30)


def form(**fields: str) -> bytes:
    return urllib.parse.urlencode(fields).encode()


def texts(blocks: list[dict[str, Any]]) -> str:
    out = []
    for b in blocks:
        out.append(b.get("text", {}).get("text", ""))
        out += [str(e.get("text", "")) for e in b.get("elements", [])]
    return "\n".join(out)


def test_real_server_diagnoses_text_json_and_multipart(served: Served) -> None:
    status, _, body = served.request("POST", "/v1/diagnose", SAMPLER_OOM, {"Content-Type": "text/plain"})
    assert status == 200 and json.loads(body)["verdict"] == "cuda_oom"
    payload = json.dumps({"log": FREE_MEMORY.decode()}).encode()
    status, _, body = served.request("POST", "/v1/diagnose", payload, {"Content-Type": "application/json"})
    assert status == 200 and json.loads(body)["verdict"] == "insufficient_free_memory_at_startup"
    multipart = (
        b'--b0\r\nContent-Disposition: form-data; name="file"; filename="a.log"\r\n'
        b"\r\n" + SAMPLER_OOM + b"\r\n--b0--\r\n"
    )
    status, _, body = served.request(
        "POST", "/v1/diagnose", multipart, {"Content-Type": "multipart/form-data; boundary=b0"}
    )
    assert status == 200 and json.loads(body)["verdict"] == "cuda_oom"


def test_real_server_refuses_an_oversized_body_without_reading_it(served: Served) -> None:
    sock = socket.create_connection(("127.0.0.1", served.port), timeout=30)
    # Declares 64 MiB but sends 1 KiB: an answer proves the server did not wait for the rest.
    sock.sendall(
        b"POST /v1/diagnose HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
        b"Content-Length: 67108864\r\n\r\n" + b"x" * 1024
    )
    head = sock.recv(65536).decode("latin-1")
    sock.close()
    assert head.startswith("HTTP/1.1 413 ")


def test_real_server_chunked_upload_over_the_limit(served: Served) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    chunks = (b"INFO filler line\n" * 4096 for _ in range(40))  # ~2.7 MiB, limit is 1 MiB
    try:
        conn.request(
            "POST",
            "/v1/diagnose",
            body=chunks,
            encode_chunked=True,
            headers={"Content-Type": "text/plain"},
        )
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server answered and closed while we were still sending
    assert conn.getresponse().status == 413


def test_real_server_slack_signature_and_stale_timestamp(served: Served) -> None:
    body = form(command="/kvdoctor", text="help", response_url="https://hooks.slack.com/x")
    bad = {**signed(body), "X-Slack-Signature": "v0=" + "0" * 64}
    status, _, _ = served.request(
        "POST", "/slack/events", body, {"Content-Type": "application/x-www-form-urlencoded", **bad}
    )
    assert status == 401
    status, _, _ = served.request(
        "POST",
        "/slack/events",
        body,
        {"Content-Type": "application/x-www-form-urlencoded", **signed(body, age_s=600)},
    )
    assert status == 401


def test_real_server_slash_command_replies_through_response_url(served: Served, mock_slack: MockSlack) -> None:
    hook = "/response/cmd-1"
    body = form(
        command="/kvdoctor",
        text=SAMPLER_OOM.decode(),
        user_id="U1",
        channel_id="C1",
        team_id="T1",
        response_url=mock_slack.url + hook,
        trigger_id="1.2",
    )
    status, _, ack = served.slack(body, "application/x-www-form-urlencoded")
    assert status == 200
    assert json.loads(ack)["response_type"] == "ephemeral"
    [reply] = mock_slack.wait_for(hook)
    assert reply["response_type"] == "ephemeral"
    shown = texts(reply["blocks"])
    assert "`cuda_oom`" in shown and "`reduce_max_num_seqs`" in shown
    [button] = [e for b in reply["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert button["action_id"] == "kvdoctor_share"

    # The share button posts the same diagnosis in the channel, then removes the ephemeral one.
    share_hook = "/response/share-1"
    action = {
        "type": "block_actions",
        "user": {"id": "U1"},
        "team": {"id": "T1"},
        "api_app_id": "A1",
        "token": "t",
        "trigger_id": "1.3",
        "response_url": mock_slack.url + share_hook,
        "channel": {"id": "C1"},
        "container": {"type": "message", "is_ephemeral": True},
        "actions": [{**button, "block_id": "b1", "action_ts": "1.4"}],
    }
    status, _, _ = served.slack(form(payload=json.dumps(action)), "application/x-www-form-urlencoded")
    assert status == 200
    shared, deleted = mock_slack.wait_for(share_hook, 2)
    assert shared["response_type"] == "in_channel"
    assert "`cuda_oom`" in texts(shared["blocks"]) and "<@U1>" in texts(shared["blocks"])
    assert deleted == {"delete_original": True}


def test_real_server_slash_command_share_and_lang_flags(served: Served, mock_slack: MockSlack) -> None:
    hook = "/response/cmd-zh"
    body = form(
        command="/kvdoctor",
        text="lang:zh share\n" + FREE_MEMORY.decode(),
        user_id="U1",
        channel_id="C1",
        team_id="T1",
        response_url=mock_slack.url + hook,
    )
    assert served.slack(body, "application/x-www-form-urlencoded")[0] == 200
    [reply] = mock_slack.wait_for(hook)
    assert reply["response_type"] == "in_channel"
    assert "结论" in texts(reply["blocks"])
    assert "启动时空闲显存不足" in texts(reply["blocks"])  # the class by its zh name (issue 16)
    assert not [b for b in reply["blocks"] if b["type"] == "actions"]


def test_real_server_message_shortcut(served: Served, mock_slack: MockSlack) -> None:
    hook = "/response/shortcut-1"
    text = "our pod died:\n```" + SAMPLER_OOM.decode().replace("<", "&lt;") + "```"
    shortcut = {
        "type": "message_action",
        "callback_id": "diagnose_log",
        "user": {"id": "U1"},
        "team": {"id": "T1"},
        "channel": {"id": "C1"},
        "token": "t",
        "trigger_id": "1.5",
        "message_ts": "1.1",
        "response_url": mock_slack.url + hook,
        "message": {"type": "message", "text": text, "ts": "1.1", "user": "U2"},
    }
    status, _, _ = served.slack(form(payload=json.dumps(shortcut)), "application/x-www-form-urlencoded")
    assert status == 200
    [reply] = mock_slack.wait_for(hook)
    assert reply["response_type"] == "ephemeral" and "`cuda_oom`" in texts(reply["blocks"])


def mention(event_id: str, channel: str, text: str, files: list[dict[str, Any]]) -> bytes:
    event = {
        "type": "app_mention",
        "user": "U1",
        "text": text,
        "ts": "1700000000.000100",
        "channel": channel,
        "event_ts": "1700000000.000100",
        "files": files,
    }
    return json.dumps(
        {
            "type": "event_callback",
            "team_id": "T1",
            "api_app_id": "A1",
            "token": "t",
            "event_id": event_id,
            "event_time": 1700000000,
            "event": event,
        }
    ).encode()


def test_real_server_mention_reads_the_attached_file_and_replies_in_thread(
    served: Served, mock_slack: MockSlack
) -> None:
    mock_slack.files["F1"] = FREE_MEMORY
    body = mention("Ev-file", "C-file", "<@UBOT> why?", [{"id": "F1", "name": "vllm.log"}])
    assert served.slack(body, "application/json")[0] == 200
    posts = [p for p in mock_slack.wait_for("/api/chat.postMessage") if p.get("channel") == "C-file"]
    deadline = time.monotonic() + 30
    while not posts and time.monotonic() < deadline:
        time.sleep(0.05)
        posts = [p for p in mock_slack.posts("/api/chat.postMessage") if p.get("channel") == "C-file"]
    [reply] = posts
    assert reply["thread_ts"] == "1700000000.000100"
    assert "`insufficient_free_memory_at_startup`" in texts(reply["blocks"])
    [download] = [h for c, _, h in mock_slack.calls if c == "/files/F1"]
    assert download["Authorization"] == f"Bearer {TOKEN}"


def test_real_server_answers_a_retried_event_once(served: Served, mock_slack: MockSlack) -> None:
    def replies(channel: str) -> list[dict[str, Any]]:
        return [p for p in mock_slack.posts("/api/chat.postMessage") if p.get("channel") == channel]

    def wait_reply(channel: str) -> None:
        deadline = time.monotonic() + 30
        while not replies(channel):
            assert time.monotonic() < deadline, "no reply"
            time.sleep(0.05)

    first = mention("Ev-retry", "C-retry", "<@UBOT>\n" + SAMPLER_OOM.decode(), [])
    assert served.slack(first, "application/json")[0] == 200
    wait_reply("C-retry")
    status, headers, _ = served.slack(
        first,
        "application/json",
        **{"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"},
    )
    assert status == 200 and headers.get("x-slack-no-retry") == "1"
    assert served.slack(first, "application/json")[0] == 200  # same event id, no retry header
    # A later event is answered; by then a duplicate answer to the first would have shown too.
    later = mention("Ev-later", "C-later", "<@UBOT>\n" + SAMPLER_OOM.decode(), [])
    assert served.slack(later, "application/json")[0] == 200
    wait_reply("C-later")
    assert len(replies("C-retry")) == 1


def test_serve_without_slack_settings_keeps_the_api(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLACK_")}
    proc = subprocess.Popen(
        [str(KVDOCTOR), "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    server = Served(port, proc)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                server.request("GET", "/healthz")
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.1)
        assert server.request("POST", "/slack/events", b"{}")[0] == 404
        assert server.request("POST", "/v1/diagnose", SAMPLER_OOM)[0] == 200
    finally:
        proc.terminate()
        # uvicorn finishes in-flight work, runs the lifespan shutdown, then re-raises SIGTERM
        assert proc.wait(timeout=30) in (0, -15)
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    assert "Application shutdown complete" in stderr
    log_lines = [line for line in stderr.splitlines() if line.startswith("{")]
    access = [json.loads(line) for line in log_lines]
    assert {(a["path"], a["status"]) for a in access} >= {
        ("/slack/events", 404),
        ("/v1/diagnose", 200),
    }
    assert all("content" not in a for a in access)


def test_serve_usage_errors_are_one_line() -> None:
    from kvdoctor.cli import main

    assert main(["serve", "--workers", "0"]) == 2


def test_slack_manifest_matches_the_server() -> None:
    import yaml

    manifest = yaml.safe_load((Path(__file__).parent.parent / "slack-app-manifest.yaml").read_text())
    [command] = manifest["features"]["slash_commands"]
    [shortcut] = manifest["features"]["shortcuts"]
    assert command["command"] == "/kvdoctor" and command["url"].endswith("/slack/events")
    assert shortcut["type"] == "message" and shortcut["callback_id"] == "diagnose_log"
    assert manifest["settings"]["event_subscriptions"]["bot_events"] == ["app_mention"]
    assert set(manifest["oauth_config"]["scopes"]["bot"]) == {
        "commands",
        "chat:write",
        "files:read",
        "files:write",
        "app_mentions:read",
    }


def test_serve_without_the_server_extra_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    from kvdoctor.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "uvicorn" else real(name, *a))
    assert main(["serve"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'kvdoctor[server]'" in err


@pytest.mark.parametrize(
    ("text", "lang", "share", "help_", "log_start"),
    [
        ("lang:zh share\nINFO a", "zh", True, False, "INFO a"),
        ("<@UBOT> share lang:en INFO share", "en", True, False, "INFO share"),
        ("help", None, False, True, ""),
        ("", None, False, True, ""),
        ("ERROR x &lt;frozen&gt; ```tail```", None, False, False, "ERROR x <frozen>"),
    ],
)
def test_command_text_options_come_before_the_log(
    text: str, lang: str | None, share: bool, help_: bool, log_start: str
) -> None:
    from kvdoctor.server.slack import parse_command

    cmd = parse_command(text)
    assert (cmd.lang, cmd.share, cmd.help) == (lang, share, help_)
    assert cmd.log.startswith(log_start)
