"""The operator console in a real browser (docs/console.md), against the real daemon on etcd.

The same scenario runs in Debian's ``chromium`` (through ``chromium-driver``) and Debian's
``firefox-esr`` (through geckodriver), driven by selenium (tests/integration/browsers.py;
``make test`` installs both; nothing downloads a browser or a driver). Per browser: one
etcd, one daemon and one browser for its tests, a handful of steps, a screenshot of each step
in a pytest temporary directory (its path is printed). A browser that is not installed is
skipped, saying why, except under CI (``CI`` set, as .ci/run has it), where it fails: CI must
test both.

The daemon runs RBAC (bootstrap policy only) with two static tokens: the admin
(``system:masters``) and ``viewer``, who may read health but not events or ``/metrics``.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.event_fixtures import event_dict
from tests.integration import browsers
from tests.integration.daemon import Daemon
from tests.storage.etcdserver import EtcdServer

pytestmark = pytest.mark.integration

ADMIN_TOKEN = "console-admin-token"
VIEWER_TOKEN = "console-viewer-token"
WAIT = 15.0


def unavailable(reason: str) -> None:
    """Skip for a missing browser or etcd, but fail under CI, which must run every browser."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI must run the console's browser tests", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module", params=browsers.NAMES)
def browser_name(request: pytest.FixtureRequest) -> str:
    """Each browser in turn; every module fixture below depends on it, so each browser gets
    a fresh etcd and daemon and the scenario's names never meet another run's."""
    name = str(request.param)
    reason = browsers.missing(name)
    if reason:
        unavailable(reason)
    return name


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory, browser_name: str) -> Iterator[EtcdServer]:
    if shutil.which("etcd") is None:
        unavailable("etcd (Debian etcd-server) is not installed (make etcd)")
    server = EtcdServer(str(tmp_path_factory.mktemp("console-etcd") / "etcd"))
    server.start()
    try:
        yield server
    finally:
        server.resume()
        server.stop()


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, etcd: EtcdServer) -> Iterator[Daemon]:
    workdir = tmp_path_factory.mktemp("console-daemon")
    tokens = workdir / "tokens.csv"
    tokens.write_text(
        f'{ADMIN_TOKEN},admin,admin-uid,"system:masters"\n{VIEWER_TOKEN},viewer,viewer-uid\n'
    )
    server = Daemon(
        workdir / "d",
        [
            f"--store-servers={etcd.client_url}",
            "--store-healthcheck-timeout=1s",
            "--store-readycheck-timeout=1s",
            f"--token-auth-file={tokens}",
            "--authorization-mode=RBAC",
        ],
    )
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory, browser_name: str) -> Path:
    folder = tmp_path_factory.mktemp(f"console-screenshots-{browser_name}")
    print(f"console screenshots in {folder}")
    return folder


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory, browser_name: str) -> Iterator[WebDriver]:
    driver = browsers.start(browser_name, tmp_path_factory.mktemp(browser_name))
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(driver: WebDriver, condition: Callable[[WebDriver], Any], what: str) -> Any:
    return WebDriverWait(driver, WAIT, poll_frequency=0.05).until(condition, message=what)


def text(driver: WebDriver, element_id: str) -> str:
    return str(driver.find_element(By.ID, element_id).text)


def post_event(daemon: Daemon, name: str, **fields: Any) -> None:
    body = event_dict(name, "console", **fields)
    status, _, answer = daemon.get(
        "/apis/events.k8s.io/v1/namespaces/console/events",
        method="POST",
        headers={"Content-Type": "application/json"},
        body=json.dumps(body).encode(),
    )
    assert status == 201, answer


def row_names(driver: WebDriver) -> list[str]:
    rows = driver.find_elements(By.CSS_SELECTOR, "#events-rows tr")
    return [str(row.get_attribute("data-key")) for row in rows]


def sign_in(driver: WebDriver, daemon: Daemon, token: str) -> None:
    """Sign in with the form, from a tab that holds no token: the console keeps the token in
    sessionStorage, so a page loaded with one signs itself in and never shows the form."""
    driver.get(f"{daemon.url}/ui/")
    driver.execute_script("window.sessionStorage.clear()")
    driver.get(f"{daemon.url}/ui/")
    field = wait_for(driver, lambda d: d.find_element(By.ID, "token"), "the sign-in form")
    wait_for(driver, lambda d: field.is_displayed(), "the sign-in form shown")
    field.send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "#signin-form button").click()


def health_state(driver: WebDriver, endpoint: str) -> str:
    return text(driver, f"{endpoint}-state")


def test_admin_watches_health_and_events(
    browser: WebDriver, daemon: Daemon, etcd: EtcdServer, shots: Path
) -> None:
    driver = browser
    # Sign in with the form.
    sign_in(driver, daemon, ADMIN_TOKEN)
    wait_for(driver, lambda d: "admin" in text(d, "whoami"), "signed in as admin")
    driver.save_screenshot(str(shots / "1-signed-in.png"))

    # Health: every check green on both endpoints.
    wait_for(
        driver,
        lambda d: health_state(d, "livez") == "passing" and health_state(d, "readyz") == "passing",
        "livez and readyz passing",
    )
    checks = driver.find_elements(By.CSS_SELECTOR, "#readyz li")
    assert {c.get_attribute("data-check") for c in checks} >= {"ping", "etcd", "shutdown"}
    assert not driver.find_elements(By.CSS_SELECTOR, "#readyz li.failed")
    driver.save_screenshot(str(shots / "2-health-green.png"))

    # Events created through the API appear in the live table.
    wait_for(driver, lambda d: text(d, "events-stream") == "live", "the watch is live")
    started = time.monotonic()
    post_event(daemon, "normal-one")
    post_event(
        daemon,
        "warning-one",
        type="Warning",
        reason="BackOff",
        note="Back-off restarting failed container",
    )
    wait_for(
        driver,
        lambda d: {"console/normal-one", "console/warning-one"} <= set(row_names(d)),
        "both events in the table",
    )
    print(f"events shown {time.monotonic() - started:.3f} s after the first POST")
    driver.save_screenshot(str(shots / "3-events.png"))

    # Filter by Warning: the selector goes to the API and only the warning is left.
    Select(driver.find_element(By.ID, "f-type")).select_by_value("Warning")
    wait_for(
        driver,
        lambda d: row_names(d) == ["console/warning-one"],
        "only the Warning event after filtering",
    )
    assert "fieldSelector=type%3DWarning" in text(driver, "events-query")
    driver.save_screenshot(str(shots / "4-filter-warning.png"))

    # The detail panel shows the whole object as YAML.
    # A click lands on a cell (Firefox's hit testing never returns the row itself, so
    # geckodriver cannot click a <tr>); the table's listener finds the row from it.
    row = '#events-rows tr[data-key="console/warning-one"]'
    driver.find_element(By.CSS_SELECTOR, f"{row} td.note-cell").click()
    wait_for(driver, lambda d: d.find_element(By.ID, "detail").is_displayed(), "detail panel")
    yaml = text(driver, "detail-yaml")
    assert yaml.startswith("apiVersion: events.k8s.io/v1\nkind: Event\nmetadata:")
    assert "reason: BackOff" in yaml
    assert "name: warning-one" in yaml
    assert "resourceVersion:" in yaml
    driver.save_screenshot(str(shots / "5-detail.png"))
    driver.find_element(By.ID, "detail-close").click()

    # Freeze etcd: readyz turns red and names the store check with its reason.
    etcd.pause()
    try:
        wait_for(
            driver,
            lambda d: d.find_elements(By.CSS_SELECTOR, '#readyz li.failed[data-check="etcd"]'),
            "the etcd check failing on readyz",
        )
        assert health_state(driver, "readyz") == "failing"
        failed = driver.find_element(By.CSS_SELECTOR, '#readyz li.failed[data-check="etcd"]')
        assert "failed:" in failed.text
        driver.save_screenshot(str(shots / "6-etcd-frozen.png"))
    finally:
        etcd.resume()
    wait_for(driver, lambda d: health_state(d, "readyz") == "passing", "readyz recovers")
    assert not driver.find_elements(By.CSS_SELECTOR, "#readyz li.failed")
    driver.save_screenshot(str(shots / "7-recovered.png"))

    # A phone's width: one column, nothing wider than the screen.
    with browsers.phone_width(driver, 390, 844):
        assert driver.execute_script("return window.innerWidth") == 390
        wait_for(
            driver,
            lambda d: d.execute_script(
                "return document.documentElement.scrollWidth <= window.innerWidth"
            ),
            "no horizontal scrolling at 390 px",
        )
        driver.save_screenshot(str(shots / "7b-phone.png"))

    # Vital signs came from /metrics.
    assert "Requests/s" in text(driver, "vitals-figures")
    assert "Open watches" in text(driver, "vitals-figures")

    # The server restarts (same port, same etcd): the watch resumes from the last
    # resourceVersion it saw, and a new event arrives without reloading the page.
    daemon.stop()
    wait_for(driver, lambda d: text(d, "events-stream") != "live", "the watch notices")
    daemon.start()
    wait_for(driver, lambda d: text(d, "events-stream") == "live", "the watch resumes")
    post_event(daemon, "after-restart", type="Warning", reason="Restarted")
    wait_for(
        driver,
        lambda d: row_names(d) == ["console/after-restart", "console/warning-one"],
        "the new event after the restart, the old one kept",
    )
    driver.save_screenshot(str(shots / "8-resumed.png"))


def test_forbidden_user_sees_the_message(browser: WebDriver, daemon: Daemon, shots: Path) -> None:
    driver = browser
    sign_in(driver, daemon, VIEWER_TOKEN)
    wait_for(driver, lambda d: "viewer" in text(d, "whoami"), "signed in as viewer")
    wait_for(driver, lambda d: "Forbidden (403)" in text(d, "events-error"), "events 403")
    assert 'User "viewer" cannot list resource "events"' in text(driver, "events-error")
    wait_for(driver, lambda d: "Forbidden (403)" in text(d, "vitals-error"), "metrics 403")
    # Health is public information (system:public-info-viewer).
    wait_for(driver, lambda d: health_state(d, "readyz") == "passing", "viewer reads readyz")
    driver.save_screenshot(str(shots / "9-forbidden.png"))

    # A bad token is refused with a message, not a blank page.
    driver.find_element(By.ID, "signout").click()
    wait_for(driver, lambda d: d.find_element(By.ID, "token").is_displayed(), "signed out")
    sign_in(driver, daemon, "not-a-token")
    wait_for(driver, lambda d: "Unauthorized (401)" in text(d, "signin-error"), "401 message")
    driver.save_screenshot(str(shots / "10-unauthorized.png"))


def test_graceful_stop_is_visible(
    browser: WebDriver, start_daemon: Callable[..., Daemon], tmp_path: Path, shots: Path
) -> None:
    """A SIGTERM with --shutdown-delay-duration: readyz fails on its shutdown check while the
    server still answers, and the console says the server is stopping. The admin signs in
    with the URL ``make run`` prints (the token in the fragment)."""
    tokens = tmp_path / "tokens.csv"
    tokens.write_text(f'{ADMIN_TOKEN},admin,admin-uid,"system:masters"\n')
    daemon = start_daemon([f"--token-auth-file={tokens}", "--shutdown-delay-duration=30s"])
    driver = browser
    driver.get(f"{daemon.url}/ui/#token={ADMIN_TOKEN}")
    wait_for(driver, lambda d: "admin" in text(d, "whoami"), "signed in from the URL")
    assert "token" not in str(driver.current_url)
    wait_for(driver, lambda d: health_state(d, "readyz") == "passing", "readyz passing")
    daemon.signal()
    wait_for(driver, lambda d: d.find_element(By.ID, "shutdown").is_displayed(), "shutdown")
    assert driver.find_elements(By.CSS_SELECTOR, '#readyz li.failed[data-check="shutdown"]')
    assert health_state(driver, "livez") == "passing"
    driver.save_screenshot(str(shots / "11-shutting-down.png"))


# An async function called at once: Firefox, unlike Chromium, does not accept ``await`` at
# the top of an executed script.
REFLECTOR_SCRIPT = """
const done = arguments[arguments.length - 1];
(async () => {
const { EventStream, queryFor } = await import("./static/events.js");
const event = (name, rv, type = "Normal") => ({
  metadata: { namespace: "ns", name, resourceVersion: String(rv) },
  eventTime: `2026-11-22T10:00:${String(rv % 60).padStart(2, "0")}.000000Z`,
  type, reason: "R", regarding: { kind: "Pod", name: "p" }, note: "n",
});
const lines = (...items) => items.map((item) => JSON.stringify(item) + "\\n").join("");
const answers = [
  () => ({ items: [event("a", 5)], metadata: { resourceVersion: "5" } }),
  () => lines({ type: "ADDED", object: event("b", 6) },
              { type: "ERROR", object: { kind: "Status", code: 410, reason: "Expired" } }),
  () => ({ items: [event("b", 6), event("c", 9)], metadata: { resourceVersion: "9" } }),
  () => lines({ type: "BOOKMARK", object: { metadata: { resourceVersion: "12" } } }),
];
const urls = [];
const real = window.fetch;
let finish;
const parked = new Promise((resolve) => { finish = resolve; });
window.fetch = (url) => {
  urls.push(String(url));
  const answer = answers.shift();
  if (!answer) {
    finish();
    return new Promise(() => {});
  }
  const body = answer();
  return Promise.resolve(new Response(typeof body === "string" ? body : JSON.stringify(body)));
};
const stream = new EventStream({ namespace: "ns", type: "Warning", object: "Pod/p,q" }, () => {});
stream.run();
await parked;
stream.stop();
window.fetch = real;
const relisted = Array.from(stream.items.keys()).sort();

// 10,000 events: the table keeps the newest 200 and says how many there are.
const big = new EventStream({}, () => {});
for (let i = 0; i < 10000; i++) {
  big.apply({ type: "ADDED", object: event(`e${i}`, 100 + i) });
}
const started = performance.now();
big.render();
const renderMs = performance.now() - started;
const rows = document.querySelectorAll("#events-rows tr").length;
const note = document.getElementById("events-note").textContent;
big.stop();
const query = queryFor({ reason: "a=b" }).params.toString();

// A watch left unanswered (Firefox answers fetch() only with the first bytes) and dropped
// after a while was connected: the backoff starts again from 1 s, however long it had grown.
const states = [];
let watches = 0;
let drop;
const dropped = new Promise((resolve) => { drop = resolve; });
window.fetch = (url) => {
  if (!String(url).includes("watch=1")) {
    const list = { items: [], metadata: { resourceVersion: "7" } };
    return Promise.resolve(new Response(JSON.stringify(list)));
  }
  if (watches++) {
    return new Promise(() => {});
  }
  quiet.backoff = 16000;
  return new Promise((resolve, reject) => setTimeout(() => {
    reject(new TypeError("NetworkError"));
    setTimeout(drop, 50);
  }, 1100));
};
const quiet = new EventStream({}, (state, text) => states.push(text));
quiet.run();
await dropped;
quiet.stop();
window.fetch = real;
done({ urls, relisted, rows, note, renderMs, query, states });
})();
"""


def test_reflector_relists_on_410_and_keeps_10000_events(
    browser: WebDriver, daemon: Daemon
) -> None:
    """The events module's reflector, in the browser with a stand-in fetch: list, watch
    from the list's resourceVersion, relist on a 410 ERROR, resume from a bookmark's
    resourceVersion after the server ends the stream; selectors escaped as
    k8s.io/apimachinery/pkg/fields does; 10,000 events render as the newest 200; a watch
    dropped after a while unanswered backs off from 1 s again."""
    driver = browser
    driver.get(f"{daemon.url}/ui/")
    driver.set_script_timeout(30)
    result = driver.execute_async_script(REFLECTOR_SCRIPT)
    base = "/apis/events.k8s.io/v1/namespaces/ns/events?"
    selector = "fieldSelector=type%3DWarning%2Cregarding.kind%3DPod%2Cregarding.name%3Dp%5C%2Cq"
    bookmarks = "&allowWatchBookmarks=true"
    assert result["urls"] == [
        f"{base}{selector}&limit=500",
        f"{base}{selector}&watch=1&resourceVersion=5{bookmarks}",
        f"{base}{selector}&limit=500",
        f"{base}{selector}&watch=1&resourceVersion=9{bookmarks}",
        f"{base}{selector}&watch=1&resourceVersion=12{bookmarks}",
    ]
    assert result["relisted"] == ["ns/b", "ns/c"]
    assert result["query"] == "fieldSelector=reason%3Da%5C%3Db"
    assert result["states"] == ["listing…", "live", "reconnecting in 1 s"]
    assert result["rows"] == 200
    assert result["note"] == (
        "Showing the newest 200 of 10000 events; narrow the filters to see the others."
    )
    print(f"10,000 events rendered in {result['renderMs']:.1f} ms")
