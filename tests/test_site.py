"""The documentation site in a real browser: built strictly, served, and its quick start and
reference pages loaded in headless Chromium (Debian's ``chromium``), offline. A page that does
not render, a request of its that fails, a link (or its anchor) that leads nowhere, or a request
for another host fails the test. Screenshots of the quick start and of the job states go to
``$KFCOMPILE_SCREENSHOTS`` (CI prints where).

Needs the ``docs`` extra and ``chromium``; skipped without them, unless
``KFCOMPILE_REQUIRE_SITE`` is set (CI), which makes that a failure. ``KFCOMPILE_SITE``: a site
already built (``mkdocs build --strict --site-dir DIR``), else this builds one.
"""

from __future__ import annotations

import functools
import html.parser
import http.server
import os
import shutil
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The pages a reader starts from, and what each must show once rendered.
PAGES = {
    "": "One spec, every Kubeflow release",
    "getting-started/": "Render it",
    "running/states/": "Job states",
    "specs/reference/": "Field reference",
    "targets/": "What each target can express",
    "cli/": "kfcompile explain",
    "library/": "A service: one watch for many jobs",
    "library/api-core/": "kfcompile.render",
    "library/api-lifecycle/": "kfcompile.lifecycle.watch_jobs",
}
DIAGRAMS = {"", "running/states/"}  # pages with a drawn diagram
SHOTS = {"getting-started/": "quick-start.png", "running/states/": "job-states.png"}
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # offline: every host but this one is unknown, so a page that needs a CDN shows it
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    "--virtual-time-budget=5000",  # let its scripts run
]


def _require(what: str) -> None:
    if os.environ.get("KFCOMPILE_REQUIRE_SITE"):
        pytest.fail(f"KFCOMPILE_REQUIRE_SITE is set but {what}")
    pytest.skip(f"the site's browser test needs {what}")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built = os.environ.get("KFCOMPILE_SITE")
    if built:
        return Path(built)
    try:
        import mkdocs  # noqa: F401
    except ImportError:
        _require('the docs extra (pip install -e ".[docs]")')
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


class Served(http.server.SimpleHTTPRequestHandler):
    """The built site, each request's path and status noted."""

    seen: list[tuple[str, int]]

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        self.seen.append((self.path, int(code)))

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server(site: Path) -> Iterator[tuple[str, list[tuple[str, int]]]]:
    seen: list[tuple[str, int]] = []
    handler = type("Handler", (Served,), {"seen": seen})
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(site))
    )
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/", seen
    finally:
        httpd.shutdown()
        thread.join()


@pytest.fixture(scope="module")
def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        _require("chromium (apt-get install chromium)")
    return str(found)


def browse(chromium: str, url: str, tmp: Path, *more: str) -> str:
    """The page as Chromium rendered it (its DOM after its scripts ran)."""
    profile = tmp / "profile"
    done = subprocess.run(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *more, url],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


class Links(html.parser.HTMLParser):
    """The links and the ids of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(str(found["id"]))
        for name in ("href", "src"):
            if found.get(name) and (tag, name) != ("a", "src"):
                self.links.append(str(found[name]))


def parsed(text: str) -> Links:
    links = Links()
    links.feed(text)
    return links


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p or "home")
def test_the_page_renders_offline_in_a_browser(
    page: str,
    server: tuple[str, list[tuple[str, int]]],
    chromium: str,
    tmp_path: Path,
) -> None:
    base, seen = server
    seen.clear()
    dom = browse(chromium, base + page, tmp_path, "--dump-dom")
    assert PAGES[page] in dom, f"{page}: not rendered"
    assert "404 - Not found" not in dom
    if page in DIAGRAMS:
        assert '<svg xmlns="http://www.w3.org/2000/svg" class="kf-diagram"' in dom
    assert "mermaid.min.js" not in dom  # no diagram is drawn by a script from elsewhere
    failed = [(path, code) for path, code in seen if code >= 400]
    assert seen and failed == [], f"{page}: requests that failed: {failed}"
    shot = SHOTS.get(page)
    if shot:
        where = Path(os.environ.get("KFCOMPILE_SCREENSHOTS") or tmp_path)
        where.mkdir(parents=True, exist_ok=True)
        browse(chromium, base + page, tmp_path, "--window-size=1280,2400",
               f"--screenshot={where / shot}")  # fmt: skip
        assert (where / shot).stat().st_size > 10_000


def test_every_link_of_the_site_leads_somewhere(site: Path) -> None:
    """Every internal link and resource of every page, and its anchor, exists."""
    # (404.html is served at whatever address was missing: its links are from the root)
    pages = {p: parsed(p.read_text(encoding="utf-8")) for p in site.rglob("*.html")}
    del pages[site / "404.html"]
    broken = []
    for page, links in pages.items():
        for link in links.links:
            url = urllib.parse.urlsplit(link)
            if url.scheme in ("http", "https", "mailto", "data") or url.netloc:
                continue
            target = (page.parent / urllib.parse.unquote(url.path)).resolve() if url.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site)}: {link}")
            elif url.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else parsed(target.read_text()).ids
                if url.fragment not in ids:
                    broken.append(f"{page.relative_to(site)}: {link} (no such anchor)")
    assert broken == []
