"""`strandline serve` in a real headless Chromium: runs listed with coloured verdicts, filters,
trends, campaign table, reports served from the store and nothing outside it."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from harness import browser
from harness.report import write_report
from harness.serve import make_server
from tests.support.report_runs import make_run

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    store = tmp_path_factory.mktemp("store")
    write_report(make_run(store / "kip-hw" / "20261122T010000", lost=True))
    write_report(make_run(store / "kip-hw" / "20261122T020000", lost=False))
    write_report(make_run(store / "safe-kill" / "20261122T030000", lost=False))
    camp = store / "campaigns" / "nightly" / "20261122T040000"
    camp.mkdir(parents=True)
    (camp / "summary.json").write_text(
        json.dumps(
            {
                "as_expected": False,
                "counts": {"valid": 2, "invalid": 1},
                "tests": [{}, {}, {}],
                "seconds": 300,
            }
        )
    )
    (camp / "index.html").write_text("<html><body>campaign index</body></html>")
    server = make_server(store, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def dom(url: str) -> str:
    result = browser.dump_dom_url(url)
    assert result.ok and result.console == [], result.console
    return result.output


def test_index_lists_runs_trends_and_campaigns(served: str) -> None:
    page = dom(served + "/")
    assert page.count('class="run"') == 3
    assert page.count('data-verdict="invalid"') == 1 and page.count('data-verdict="valid"') == 2
    # Trend squares are coloured by "as expected" (these runs belong to no campaign: grey), the
    # verdict stays in the square's title.
    assert page.count('<span class="sq no-expectation"></span>') == 3 and "safe-kill" in page
    assert 'title="20261122T010000: invalid"' in page
    assert "nightly" in page and "0/3 as expected" in page and 'class="v v-false"' in page


def test_filters_by_verdict_and_name(served: str) -> None:
    page = dom(served + "/?verdict=invalid")
    assert page.count('class="run"') == 1 and "kip-hw" in page
    page = dom(served + "/?name=safe")
    assert page.count('class="run"') == 1 and 'data-verdict="valid"' in page


def test_reports_are_served_and_nothing_outside_the_store(served: str) -> None:
    page = dom(served + "/files/kip-hw/20261122T010000/report.html")
    assert 'data-verdict="invalid"' in page
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(served + "/files/%2e%2e/%2e%2e/%2e%2e/etc/passwd")
    assert err.value.code in (403, 404)
