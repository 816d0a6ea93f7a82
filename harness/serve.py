"""`strandline serve`: a small web server over the results store (127.0.0.1 by default).

`/` lists campaigns, per-test verdict trends and runs (filters: `?verdict=invalid&name=kip`) and
links the store's analysis page (`strandline analyze`) when there is one;
`/files/<path>` serves a stored file (reports, histories, logs) from inside the store only. The
pages are rendered on the server: no script, nothing from the network.
"""

from __future__ import annotations

import logging
import mimetypes
import urllib.parse
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import jinja2

from foundation import run_files
from harness.store import list_campaigns, list_runs, trends

log = logging.getLogger(__name__)

TEXT_TYPES = {
    ".jsonl": "text/plain; charset=utf-8",
    ".log": "text/plain; charset=utf-8",
    ".json": "application/json",
}
VERDICT_FILTERS = ("valid", "invalid", "unknown", "running")


def _environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.PackageLoader("harness", "templates"), autoescape=True)


def render_index(store: Path, verdict: str = "", name: str = "") -> str:
    runs = list_runs(store)
    shown = [
        r
        for r in runs
        if (not verdict or r.verdict == verdict) and (not name or name.lower() in r.name.lower())
    ]
    trend = {n: rs for n, rs in trends(runs).items() if not name or name.lower() in n.lower()}
    return (
        _environment()
        .get_template("serve_index.html.j2")
        .render(
            store=str(store),
            analysis=f"/files/{run_files.ANALYSIS}/{run_files.ANALYSIS_PAGE}"
            if (store / run_files.ANALYSIS / run_files.ANALYSIS_PAGE).is_file()
            else None,
            runs=shown[:500],
            total=len(runs),
            campaigns=list_campaigns(store)[:50],
            trends=trend,
            verdict=verdict,
            name=name,
            verdicts=VERDICT_FILTERS,
            generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        )
    )


class StoreHandler(BaseHTTPRequestHandler):
    store: Path = Path("results")
    server_version = "strandline"

    def log_message(self, format: str, *args: object) -> None:
        log.info("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        try:
            if url.path in ("/", "/index.html"):
                verdict = (query.get("verdict") or [""])[0]
                if verdict and verdict not in VERDICT_FILTERS:
                    verdict = ""
                name = (query.get("name") or [""])[0][:100]
                self._send(
                    HTTPStatus.OK,
                    render_index(self.store, verdict, name).encode(),
                    "text/html; charset=utf-8",
                )
            elif url.path.startswith("/files/"):
                self._file(urllib.parse.unquote(url.path[len("/files/") :]))
            else:
                self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain; charset=utf-8")
        except BrokenPipeError:
            pass

    def _file(self, relative: str) -> None:
        root = self.store.resolve()
        target = (root / relative).resolve()
        if not target.is_relative_to(root):
            self._send(HTTPStatus.FORBIDDEN, b"outside the store\n", "text/plain; charset=utf-8")
            return
        if target.is_dir():
            page = target / run_files.CAMPAIGN_PAGE
            target = page if page.exists() else target / run_files.REPORT
        if not target.is_file():
            self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain; charset=utf-8")
            return
        kind = (
            TEXT_TYPES.get(target.suffix)
            or mimetypes.guess_type(target.name)[0]
            or "application/octet-stream"
        )
        if kind.startswith("text/html"):
            kind = "text/html; charset=utf-8"
        self._send(HTTPStatus.OK, target.read_bytes(), kind)

    def _send(self, status: HTTPStatus, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)


def make_server(store: Path, bind: str = "127.0.0.1", port: int = 8080) -> ThreadingHTTPServer:
    handler = type("BoundStoreHandler", (StoreHandler,), {"store": Path(store)})
    server = ThreadingHTTPServer((bind, port), handler)
    server.daemon_threads = True
    return server
