"""The server's web face on a live uvicorn (loopback, a thread of this process): the OpenAPI
document and the property tests that hold the API to it, Prometheus metrics, the new error
answers, the paste page (as HTML, and in a real headless Chromium where one is installed)."""

from __future__ import annotations

import asyncio
import gzip
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")
uvicorn = pytest.importorskip("uvicorn")
from browser import CHROMIUM, headless  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from kvdoctor.server import ServerConfig, create_app  # noqa: E402
from kvdoctor.server.slack import SlackConfig  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fixtures" / "corpus"
SAMPLER_OOM = next(CORPUS.glob("087-*.log")).read_bytes()  # cuda_oom, sampler_warmup; remedies with values
PROFILE_PEAK = next(CORPUS.glob("015-*.log")).read_bytes()  # no_cache_blocks with the budget figures
HOSTILE = b'<script>document.title="pwned"</script><img src=x onerror="document.title=\'pwned\'">'
# the sampler OOM with markup on its error line (a line the diagnosis cites as evidence)
HOSTILE_LOG = SAMPLER_OOM.replace(b"when initializing the engine.", b"when initializing the engine. " + HOSTILE, 1)
KVDOCTOR = Path(sys.executable).with_name("kvdoctor")
LIMIT = 1 << 20


class LiveServer:
    """uvicorn serving an app on a free 127.0.0.1 port, in a thread of this process."""

    def __init__(self, app: Any) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "the live server did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.sock.close()

    def request(
        self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        return fetch(self.port, method, path, body, headers)


def fetch(
    port: int, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


ACCESS: list[dict[str, Any]] = []
APP = create_app(ServerConfig(max_body=LIMIT, timeout_s=30, threads=2), access_log=ACCESS.append)


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    with LiveServer(APP) as server:
        yield server


@pytest.fixture
def fresh() -> Iterator[LiveServer]:
    """An app of its own (its own metrics), with Slack on, pointed at a Web API nobody serves."""
    slack = SlackConfig("test-signing-secret", "xoxb-test", "http://127.0.0.1:9/api/")
    app = create_app(ServerConfig(max_body=LIMIT, slack=slack, threads=2), access_log=lambda record: None)
    with LiveServer(app) as server:
        yield server


def multipart(parts: list[tuple[str, str | None, bytes]], boundary: str = "kvdoctorB0") -> tuple[bytes, str]:
    """(name, filename or None, data) parts as a browser would encode them."""
    out = b""
    for name, filename, data in parts:
        disposition = f'form-data; name="{name}"' + ("" if filename is None else f'; filename="{filename}"')
        kind = "" if filename is None else "Content-Type: application/octet-stream\r\n"
        out += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n{kind}\r\n".encode() + data + b"\r\n"
    return out + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


# ---- the OpenAPI document ------------------------------------------------------------------


def test_openapi_json_serves_the_document_of_the_api(live: LiveServer) -> None:
    status, headers, body = live.request("GET", "/openapi.json")
    assert status == 200 and headers["content-type"] == "application/json"
    doc = json.loads(body)
    assert doc == APP.openapi
    assert doc["openapi"].startswith("3.")
    diagnose = doc["paths"]["/v1/diagnose"]["post"]
    assert set(diagnose["requestBody"]["content"]) == {
        "text/plain",
        "application/json",
        "multipart/form-data",
        "application/gzip",
    }
    assert set(diagnose["responses"]) == {"200", "400", "413", "415", "422", "504"}
    errors = [diagnose["responses"][s]["content"]["application/json"]["schema"] for s in ("400", "413", "504")]
    assert errors == [{"$ref": "#/components/schemas/Error"}] * 3
    assert doc["paths"]["/healthz"]["get"]["responses"]["200"]


def test_the_report_in_the_document_is_docs_report_schema() -> None:
    """The package ships docs/report.schema.json (a wheel has no docs/): the copy must not drift."""
    docs = json.loads((ROOT / "docs" / "report.schema.json").read_text())
    shipped = ROOT / "src" / "kvdoctor" / "server" / "report.schema.json"
    assert json.loads(shipped.read_text()) == docs
    schemas = APP.openapi["components"]["schemas"]
    ref = json.dumps(schemas["Report"]).replace("#/components/schemas/Diagnosis", "#/$defs/diagnosis")
    assert json.loads(ref) == {k: v for k, v in docs.items() if k not in ("$schema", "$id", "$defs")}
    assert schemas["Diagnosis"] == docs["$defs"]["diagnosis"]


# A gzip body is a gzipped log: arbitrary bytes labelled gzip are the 400 the document lists.
schemathesis.openapi.media_type(
    "application/gzip", st.binary(min_size=1).filter(lambda b: bool(b.strip())).map(gzip.compress)
)
# A binary log part (multipart's `file`, a raw octet-stream body) is documented non-blank, but
# schemathesis leaves `pattern` and `minLength` of binary strings unchecked: it sent an empty file,
# which the server answers 422 as the document says; generate what the document asks for
schemathesis.openapi.format("binary", st.binary(min_size=1).filter(lambda b: bool(b.strip())))
# Loaded from the app rather than through a fixture: schemathesis' fixture loader fails under pytest 9.
schema = schemathesis.openapi.from_dict(APP.openapi)


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_api_answers_as_its_schema_says(case: Any, live: LiveServer) -> None:
    """Valid and invalid requests: no 5xx; statuses, media types and bodies as documented."""
    case.call_and_validate(base_url=live.url)


# ---- new answers of /v1/diagnose -----------------------------------------------------------


def _one_line_error(body: bytes) -> str:
    message = json.loads(body)["error"]
    assert message.startswith("kvdoctor: ") and "\n" not in message
    return str(message)


def test_a_body_that_is_no_log_is_415(live: LiveServer) -> None:
    status, _, body = live.request("POST", "/v1/diagnose", b"\x89PNG\r\n", {"Content-Type": "image/png"})
    assert status == 415
    assert "image/png is not supported" in _one_line_error(body)


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (b"", "text/plain"),
        (b" \n\t\n", "text/plain"),
        (b'{"log": "   "}', "application/json"),
        (gzip.compress(b"\n\n"), "application/gzip"),
        multipart([("file", "empty.log", b"")]),
    ],
    ids=["empty", "blank", "json-blank", "gzip-blank", "multipart-empty-file"],
)
def test_an_empty_log_is_422(live: LiveServer, body: bytes, kind: str) -> None:
    status, _, answer = live.request("POST", "/v1/diagnose", body, {"Content-Type": kind})
    assert status == 422
    assert "the log is empty" in _one_line_error(answer)


def test_curl_data_binary_still_sends_the_log(live: LiveServer) -> None:
    """`curl --data-binary @vllm.log` labels the body urlencoded: it is the log all the same."""
    kind = {"Content-Type": "application/x-www-form-urlencoded"}
    status, _, body = live.request("POST", "/v1/diagnose", SAMPLER_OOM, kind)
    assert status == 200 and json.loads(body)["verdict"] == "cuda_oom"


def test_unknown_routes_and_methods_answer_one_line(live: LiveServer) -> None:
    status, _, body = live.request("GET", "/v2/diagnose")
    assert status == 404 and "no such route" in _one_line_error(body)
    status, headers, body = live.request("DELETE", "/healthz")
    assert status == 405 and "use GET or HEAD" in _one_line_error(body)
    assert headers["allow"] == "GET, HEAD"


# ---- metrics -------------------------------------------------------------------------------


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_count_requests_verdicts_bytes_and_slack_outcomes(fresh: LiveServer) -> None:
    assert fresh.request("POST", "/v1/diagnose", SAMPLER_OOM, {"Content-Type": "text/plain"})[0] == 200
    assert fresh.request("GET", "/no/such/page")[0] == 404
    unsigned = {"Content-Type": "application/json"}
    assert fresh.request("POST", "/slack/events", b'{"type": "url_verification"}', unsigned)[0] == 401
    status, headers, body = fresh.request("GET", "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = _samples(body.decode())
    assert all(name.startswith("kvdoctor_") for name, _ in samples)
    route = (("method", "POST"), ("route", "/v1/diagnose"), ("status", "200"))
    assert samples[("kvdoctor_http_requests_total", route)] == 1
    assert samples[("kvdoctor_http_requests_total", (("method", "GET"), ("route", "other"), ("status", "404")))] == 1
    assert samples[("kvdoctor_http_request_duration_seconds_count", (("route", "/v1/diagnose"),))] == 1
    assert samples[("kvdoctor_http_request_body_bytes_sum", (("route", "/v1/diagnose"),))] == len(SAMPLER_OOM)
    assert samples[("kvdoctor_diagnoses_total", (("verdict", "cuda_oom"),))] == 1
    assert samples[("kvdoctor_slack_events_total", (("outcome", "bad_signature"),))] == 1


def test_each_app_counts_for_itself(fresh: LiveServer) -> None:
    """A registry per app: another app's requests (the module's live one) do not show here."""
    samples = _samples(fresh.request("GET", "/metrics")[2].decode())
    assert not [k for k in samples if k[0] == "kvdoctor_http_requests_total"]


def test_slack_retries_and_foreign_bodies_are_answered_and_counted(fresh: LiveServer) -> None:
    import hashlib
    import hmac

    body = json.dumps({"type": "event_callback", "event_id": "Ev1", "event": {"type": "app_mention"}}).encode()
    ts = str(int(time.time()))
    digest = hmac.new(b"test-signing-secret", f"v0:{ts}:".encode() + body, hashlib.sha256).hexdigest()
    signed = {"Content-Type": "application/json", "X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}"}
    status, headers, _ = fresh.request("POST", "/slack/events", body, {**signed, "X-Slack-Retry-Num": "1"})
    assert status == 200 and headers["x-slack-no-retry"] == "1"
    status, _, answer = fresh.request("POST", "/slack/events", b"\xff\xfe", {"Content-Type": "application/json"})
    assert status == 400 and "not UTF-8" in _one_line_error(answer)
    samples = _samples(fresh.request("GET", "/metrics")[2].decode())
    assert samples[("kvdoctor_slack_events_total", (("outcome", "retry_ignored"),))] == 1
    assert samples[("kvdoctor_slack_events_total", (("outcome", "bad_request"),))] == 1


def test_metrics_add_up_over_worker_processes(tmp_path: Path) -> None:
    """`--workers 2`: every scrape shows the requests of both workers (multiprocess mode)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "PROMETHEUS_"))}
    env["TMPDIR"] = str(tmp_path)
    proc = subprocess.Popen(
        [str(KVDOCTOR), "serve", "--port", str(port), "--workers", "2"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                fetch(port, "GET", "/openapi.json")
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "kvdoctor serve did not start"
                time.sleep(0.1)
        for _ in range(20):
            assert fetch(port, "GET", "/healthz")[0] == 200
        ok = (("method", "GET"), ("route", "/healthz"), ("status", "200"))
        counted = 0.0
        while time.monotonic() < deadline and counted < 20:
            counted = _samples(fetch(port, "GET", "/metrics")[2].decode()).get(("kvdoctor_http_requests_total", ok), 0)
        assert counted == 20
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert not list(tmp_path.glob("kvdoctor-metrics-*")), "the metrics directory outlived the server"


# ---- the paste page --------------------------------------------------------------------------


class Page(HTMLParser):
    """What a reader sees: the text, per class of element, and the tags there are."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.by_class: dict[str, list[str]] = {}
        self._open: list[str | None] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in ("br", "input", "meta", "img", "link"):
            self._open.append(dict(attrs).get("class"))

    def handle_endtag(self, tag: str) -> None:
        if self._open:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        for cls in {c for c in self._open if c}:
            self.by_class.setdefault(cls, []).append(data)

    def shown(self, cls: str) -> str:
        return "".join(self.by_class.get(cls, []))


def test_the_page_is_a_form_that_needs_nothing_from_outside(live: LiveServer) -> None:
    status, headers, body = live.request("GET", "/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert "script-src" not in headers["content-security-policy"]  # default-src 'none': no script at all
    assert "default-src 'none'" in headers["content-security-policy"]
    page = Page(body.decode())
    tags = dict(page.tags)
    assert tags["form"]["method"] == "post" and tags["form"]["action"] == "/"
    assert tags["textarea"]["name"] == "log"
    assert ("input", {"id": "file", "type": "file", "name": "file"}) in page.tags
    assert tags["select"]["name"] == "lang"
    assert "script" not in tags and "link" not in tags and "img" not in tags
    assert b"http://" not in body and b"https://" not in body


@pytest.mark.parametrize(
    ("headers", "path", "expect"),
    [
        ({"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.8"}, "/", "zh"),
        ({"Accept-Language": "de-DE,en;q=0.5,zh;q=0.4"}, "/", "en"),
        ({}, "/?lang=zh", "zh"),
        ({}, "/", "en"),
    ],
)
def test_the_page_speaks_the_readers_language(
    live: LiveServer, headers: dict[str, str], path: str, expect: str
) -> None:
    page = Page(live.request("GET", path, headers=headers)[2].decode())
    assert dict(page.tags)["html"]["lang"] == expect
    assert ("诊断" in "".join(page.text)) == (expect == "zh")


def test_a_pasted_log_is_answered_as_html_and_never_as_markup(live: LiveServer) -> None:
    # what a browser sends when the textarea is filled and no file is chosen
    body, kind = multipart([("log", None, HOSTILE_LOG), ("file", "", b""), ("lang", None, b"en")])
    status, headers, html = live.request("POST", "/", body, {"Content-Type": kind})
    assert status == 200 and headers["content-type"].startswith("text/html")
    page = Page(html.decode())
    assert "cuda_oom" in page.shown("verdict")
    remedies = page.shown("remedies")
    assert "reduce_max_num_seqs → 128" in remedies and "lower_gpu_memory_utilization → 0.85" in remedies
    assert "raise_gpu_memory_utilization" in page.shown("avoid")
    assert HOSTILE.decode() in page.shown("evidence")  # shown as text …
    assert HOSTILE.decode() in "".join(page.text)  # … and in the textarea, to edit and send again
    assert not [t for t, _ in page.tags if t in ("script", "img")]  # … never as elements


def test_a_chosen_file_is_answered_with_the_budget_bar_in_chinese(live: LiveServer) -> None:
    body, kind = multipart([("log", None, b""), ("file", "whisper.log", PROFILE_PEAK), ("lang", None, b"zh")])
    status, _, html = live.request("POST", "/", body, {"Content-Type": kind})
    assert status == 200
    page = Page(html.decode())
    assert "no_cache_blocks" in page.shown("verdict") and "结论" in page.shown("verdict")
    assert "whisper.log" in "".join(page.text)
    bar = [attrs for tag, attrs in page.tags if tag == "span" and attrs.get("class") == "activation_peak_gib"]
    assert bar and "width:88.6" in str(bar[0]["style"])  # 7.09 of 8.00 GiB
    assert "权重 0.07 GiB" in page.shown("legend")
    assert "lower_max_model_len" in page.shown("avoid")


def test_an_empty_paste_is_answered_with_the_page(live: LiveServer) -> None:
    body, kind = multipart([("log", None, b"  "), ("file", "", b"")])
    status, headers, html = live.request("POST", "/", body, {"Content-Type": kind})
    assert status == 422 and headers["content-type"].startswith("text/html")
    page = Page(html.decode())
    assert "the log is empty" in page.shown("error")
    assert ("textarea", {"id": "log", "name": "log", "rows": "14", "spellcheck": "false"}) in page.tags


def test_an_oversized_paste_is_answered_with_the_page_before_it_is_read(live: LiveServer) -> None:
    # Declares more than the limit, sends 1 KiB: an answer proves the server did not wait for the rest.
    with socket.create_connection(("127.0.0.1", live.port), timeout=30) as sock:
        sock.sendall(
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b0\r\n"
            + f"Content-Length: {LIMIT + 1}\r\n\r\n".encode()
            + b"x" * 1024
        )
        answer = b""
        while b"</html>" not in answer and (chunk := sock.recv(65536)):
            answer += chunk
    head, _, html = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413 ") and b"content-type: text/html" in head.lower()
    assert "body larger than" in Page(html.decode()).shown("error")


# ---- the page in a real browser ----------------------------------------------------------------


class Chromium:
    """Headless Chromium driven over the DevTools protocol (loopback only), started and ended here."""

    def __init__(self, profile: Path) -> None:
        self.proc = subprocess.Popen(
            [
                *headless(profile),
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text().strip():
            assert self.proc.poll() is None and time.monotonic() < deadline, "chromium did not start"
            time.sleep(0.05)
        self.port = int(port_file.read_text().split()[0])

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


class Tab:
    """One page target: commands by id, load events awaited."""

    def __init__(self, ws: Any) -> None:
        self.ws, self.next_id = ws, 0
        self.loads = 0

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        await self.ws.send_json({"id": self.next_id, "method": method, "params": params})
        while True:
            message = await self.ws.receive_json()
            if message.get("method") == "Page.loadEventFired":
                self.loads += 1
            if message.get("id") == self.next_id:
                assert "error" not in message, message
                return dict(message.get("result") or {})

    async def loaded(self, count: int) -> None:
        while self.loads < count:
            message = await self.ws.receive_json()
            if message.get("method") == "Page.loadEventFired":
                self.loads += 1

    async def evaluate(self, expression: str) -> Any:
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")


SEEN_JS = """JSON.stringify({
  lang: document.documentElement.lang,
  title: document.title,
  scripts: document.scripts.length,
  images: document.images.length,
  verdict: document.querySelector('.verdict')?.innerText,
  remedies: [...document.querySelectorAll('.remedies li')].map(li => li.innerText),
  avoid: document.querySelector('.avoid')?.innerText,
  evidence: document.querySelector('pre.evidence')?.innerText,
  textarea: document.querySelector('#log').value,
})"""


async def _paste_in_browser(chromium: Chromium, url: str, log: str, lang: str) -> dict[str, Any]:
    import aiohttp

    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{chromium.port}/json/list") as resp:
            targets = await resp.json()
        ws_url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
        async with session.ws_connect(ws_url, max_msg_size=0) as ws:
            tab = Tab(ws)
            await tab.send("Page.enable")
            await tab.send("Page.navigate", url=url)
            await tab.loaded(1)
            # type into the form as a user would, then press the button
            await tab.evaluate(f"document.querySelector('#log').value = {json.dumps(log)}")
            await tab.evaluate(f"document.querySelector('#lang').value = {json.dumps(lang)}")
            await tab.evaluate("document.querySelector('button[type=submit]').click()")
            await tab.loaded(2)
            return dict(json.loads(await tab.evaluate(SEEN_JS)))


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed (apt install chromium)")
def test_a_browser_user_pastes_a_hostile_log_and_reads_the_diagnosis(live: LiveServer) -> None:
    profile = Path(tempfile.mkdtemp(prefix="kvdoctor-chromium-"))
    chromium = Chromium(profile)
    try:
        seen = asyncio.run(
            asyncio.wait_for(_paste_in_browser(chromium, live.url + "/", HOSTILE_LOG.decode(), "zh"), 90)
        )
    finally:
        chromium.close()
        shutil.rmtree(profile, ignore_errors=True)
    assert seen["lang"] == "zh" and "结论" in seen["verdict"] and "cuda_oom" in seen["verdict"]
    assert any(r.startswith("reduce_max_num_seqs → 128") for r in seen["remedies"])
    assert "raise_gpu_memory_utilization" in seen["avoid"]
    assert HOSTILE.decode() in seen["evidence"] and HOSTILE.decode() in seen["textarea"]
    assert seen["title"] != "pwned" and seen["scripts"] == 0 and seen["images"] == 0
