"""The operator's console (`/ui`) in a real headless Chromium, against a running `toolbridge serve --transport
http` with real upstreams: the endpoint's token guards every page, the fleet page follows an upstream that dies
and comes back, Approve releases a pinned tool only with the page's CSRF token, an upstream's markup renders
as text, and the profiles page shows the numbers `toolbridge catalog` prints."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from conftest import free_port
from fleetdir import REPO, write_config
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from servers.harness import CONTROLLABLE, TINY

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(CHROMIUM is None or CHROMEDRIVER is None,
                                reason="needs Debian's chromium and chromium-driver (.ci/run installs them)")

TOKEN = "console-token-5d1f0e8a7c"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
HOSTILE = '<script>window.pwned = 1</script><img src="x" onerror="window.pwned = 2">Echo, hostile.'
CHANGED = "Echo the text back, changed after approval."
PAGES = ("/ui", "/ui/servers/pinned", "/ui/profiles", "/ui/search?profile=default&q=echo", "/ui/audit")
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1280,900")


@dataclass(frozen=True)
class Site:
    base: str
    config: Path
    down: Path  # while it exists, the `victim` upstream exits at start


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    directory = tmp_path_factory.mktemp("console")
    down = directory / "victim-down"
    tiny = {"command": sys.executable, "connect_timeout": 30}
    config = write_config(directory / "config", {
        "pinned": {"command": sys.executable, "args": [CONTROLLABLE], "pin": True},
        "victim": {**tiny, "args": [TINY, "--fail-while", str(down)]},
        "hostile": {**tiny, "args": [TINY, "--description", HOSTILE]},
    }, {"startup_wait": 20, "audit": {"path": "audit/calls.jsonl"},
        "profiles": {"default": {}, "steady": {"toolsets": ["hostile"]}}})
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with (directory / "serve.log").open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "proxy", "serve", "--transport", "http", "--port", str(port), "--config-dir",
             str(config), "--auth-token", TOKEN], cwd=REPO, stdout=subprocess.DEVNULL, stderr=log,
            env={**os.environ, "TOOLBRIDGE_LOG_LEVEL": "warning"})
    try:
        until(lambda: _healthy(base), timeout=30)
        yield Site(base, config, down)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()


def _healthy(base: str) -> bool:
    try:
        return httpx2.get(f"{base}/healthz").status_code == 200
    except httpx2.TransportError:
        return False


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM  # type: ignore[assignment]
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def until(check: Any, timeout: float = 20) -> Any:
    """Poll `check` until it returns something true; fail after `timeout` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if found := check():
            return found
        time.sleep(0.1)
    raise AssertionError(f"not true within {timeout} s: {check}")


def sign_in(driver: Any, site: Site) -> None:
    from selenium.webdriver.common.by import By

    driver.get(f"{site.base}/ui/login")
    driver.find_element(By.NAME, "token").send_keys(TOKEN)
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    until(lambda: driver.current_url.rstrip("/").endswith("/ui") and "Fleet" in driver.title)


def status(site: Site) -> dict[str, Any]:
    return httpx2.get(f"{site.base}/status", headers=AUTH).json()


def rows(driver: Any, body: str) -> list[list[str]]:
    """The text of each row of a table body, read in one go (the fleet page rewrites its rows live)."""
    return driver.execute_script(
        "return [...document.querySelectorAll(arguments[0] + ' tr')].map(r => [...r.cells].map(c => c.textContent))",
        f"#{body}")


def test_every_page_needs_the_token_and_sends_a_strict_csp(site: Site, browser: Any) -> None:
    for path in PAGES:
        assert httpx2.get(f"{site.base}{path}").status_code == 401
        assert httpx2.get(f"{site.base}{path}", headers={"Authorization": "Bearer wrong"}).status_code == 401
        answer = httpx2.get(f"{site.base}{path}", headers=AUTH)
        assert answer.status_code == 200, path
        assert answer.headers["content-security-policy"].startswith("default-src 'none'; script-src 'self';")
    cookie = {"Cookie": f"toolbridge_console={TOKEN}"}  # what the sign-in form sets: honoured on /ui only
    assert httpx2.get(f"{site.base}/ui", headers=cookie).status_code == 200
    assert httpx2.get(f"{site.base}/status", headers=cookie).status_code == 401
    assert httpx2.get(f"{site.base}/metrics", headers=cookie).status_code == 401
    browser.delete_all_cookies()
    for path in PAGES:
        browser.get(f"{site.base}{path}")
        assert "Unauthorized" in browser.page_source and "<table" not in browser.page_source
    sign_in(browser, site)
    for path, heading in zip(PAGES, ("Fleet", "Server pinned", "Profiles", "Search playground", "Audit"), strict=True):
        browser.get(f"{site.base}{path}")
        assert browser.find_element("tag name", "h1").text == heading
    assert TOKEN not in browser.page_source


def test_the_fleet_page_follows_an_upstream_killed_and_back_without_a_reload(site: Site, browser: Any) -> None:
    sign_in(browser, site)

    def victim() -> list[str]:
        return next(row for row in rows(browser, "fleet") if row[0] == "victim")

    until(lambda: victim()[1] == "ready")
    restarts = int(victim()[5])
    marker = browser.find_element("id", "updated")  # the page stays the same: only its rows change
    site.down.touch()
    os.kill(_pid_of(str(site.down)), signal.SIGKILL)
    until(lambda: victim()[1] != "ready")
    assert victim()[1] in ("backoff", "starting", "parked", "failed")
    site.down.unlink()
    until(lambda: victim()[1] == "ready" and int(victim()[5]) > restarts, timeout=30)
    assert marker.is_displayed()


def _pid_of(marker: str) -> int:
    """The upstream process whose command line names `marker` (its watchdog runs another program)."""
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if marker.encode() in argv and TINY.encode() in argv:
            return int(entry.name)
    raise AssertionError(f"no process runs with {marker}")


async def _call(site: Site, name: str, arguments: dict[str, Any]) -> None:
    async with httpx2.AsyncClient(headers=AUTH, timeout=30) as http, \
            Client(streamable_http_client(f"{site.base}/mcp", http_client=http), mode="legacy") as client:
        result = await client.call_tool("tool_call", {"name": name, "arguments": arguments})
        assert not result.is_error, result


def test_approve_releases_a_pinned_tool_and_a_forged_post_does_not(site: Site, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    anyio.run(_call, site, "pinned__change_tool", {"name": "echo", "description": CHANGED})

    def pending() -> list[tuple[str, bool]]:
        return [(c["tool"], c["held"]) for c in status(site)["tool_changes"] if c["server"] == "pinned"]

    until(lambda: pending() == [("echo", True)])
    approve = f"{site.base}/ui/servers/pinned/approve"
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    assert httpx2.post(approve, headers={**AUTH, **form}, content="tool=echo").status_code == 403
    assert httpx2.post(approve, headers={**AUTH, **form}, content="tool=echo&csrf=0123abcd").status_code == 403
    assert httpx2.post(approve, content="tool=echo").status_code == 401
    sign_in(browser, site)
    browser.get(f"{site.base}/ui/servers/pinned")
    csrf = browser.find_element(By.CSS_SELECTOR, "form.approve input[name=csrf]").get_attribute("value")
    evil = {**AUTH, **form, "Origin": "http://evil.example"}  # the token is right, the page it came from is not
    assert httpx2.post(approve, headers=evil, content=f"tool=echo&csrf={csrf}").status_code in (400, 403)
    assert pending() == [("echo", True)]
    tools = [row[0] for row in rows(browser, "tools")]
    assert "pinned__echo" not in tools and "pinned__pid" in tools  # withheld while the change waits

    browser.find_element(By.XPATH, "//button[text()='Approve echo']").click()
    until(lambda: pending() == [])

    def echo_served() -> bool:
        browser.get(f"{site.base}/ui/servers/pinned")
        return any(row[0] == "pinned__echo" and row[1] == CHANGED for row in rows(browser, "tools"))

    until(echo_served)
    assert "None." in browser.find_element(By.ID, "pending").text


def test_markup_an_upstream_sends_renders_as_text(site: Site, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    sign_in(browser, site)
    for path in ("/ui/profiles", "/ui/search?profile=steady&q=hostile+echo", "/ui/servers/hostile"):
        browser.get(f"{site.base}{path}")
        assert HOSTILE[:40] in browser.find_element(By.TAG_NAME, "main").text, path  # listings shorten it
        assert browser.find_elements(By.CSS_SELECTOR, "main img, main script") == []
        assert browser.execute_script("return window.pwned") is None
    assert HOSTILE in [row[1] for row in rows(browser, "tools")]
    browser.find_element(By.TAG_NAME, "details").click()  # the schema, with the same text in it
    assert json.dumps(HOSTILE) in browser.find_element(By.TAG_NAME, "pre").text


def test_the_profiles_page_shows_what_toolbridge_catalog_prints(site: Site, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    printed = subprocess.run(
        [sys.executable, "-m", "proxy", "catalog", "--json", "--profile", "steady", "--config-dir", str(site.config)],
        capture_output=True, text=True, timeout=60, cwd=REPO, env={**os.environ, "TOOLBRIDGE_LOG_LEVEL": "error"})
    assert printed.returncode == 0, printed.stderr
    catalog = json.loads(printed.stdout)
    sign_in(browser, site)
    browser.get(f"{site.base}/ui/profiles")
    section = browser.find_element(By.CSS_SELECTOR, 'section[data-profile="steady"]')
    for field in ("tier", "form", "budget", "listing_tokens", "tokens", "raw_schema_tokens", "core_tools",
                  "deferred_tools"):
        assert section.find_element(By.CSS_SELECTOR, f'dd[data-field="{field}"]').text == str(catalog[field]), field
    listing = next(t["description"] for t in catalog["tools"] if t["name"] == "tool_search")
    assert section.find_element(By.TAG_NAME, "pre").text == listing.strip()


def test_the_search_playground_ranks_with_both_legs_and_the_audit_page_filters(site: Site, browser: Any) -> None:
    sign_in(browser, site)
    anyio.run(_call, site, "victim__echo", {"text": "audited"})

    def fused() -> list[list[str]] | None:
        browser.get(f"{site.base}/ui/search?profile=default&q=echo+the+text+back")
        found = rows(browser, "matches")
        return found if "fused" in browser.page_source else None

    matches = until(fused, timeout=30)
    assert "victim__echo" in {row[1] for row in matches[:3]}
    assert all(row[3] != "-" and row[4] != "-" for row in matches[:3])  # each has a lexical and a semantic share

    browser.get(f"{site.base}/ui/audit?server=victim&tool=victim__echo&principal=anonymous")
    audited = rows(browser, "audit")
    assert audited and all(row[3] == "victim" and row[4] == "victim__echo" for row in audited)
    browser.get(f"{site.base}/ui/audit?server=victim&principal=someone-else")
    assert rows(browser, "audit") == []
