"""The real-browser option: headless Chromium (Debian's `chromium`, driven by Playwright
from PyPI through its executable path; no browser download), with the text browser's
interface and tree.

Each observation tags every element of the live DOM with its document-order index and
copies live form state (typed values, the chosen option, checkboxes) into attributes; the
serialized DOM is then rendered by `esopt.web.axtree`, so ids, roles and names are those
of the text browser, and an action finds its element again by the tag. Scripts run, forms
submit as in a browser, and every request outside the allowed origins is aborted. Slower
than the text browser (benchmarks/web.py); meant for sites that need JavaScript, such as a
real WebArena deployment.
"""

from __future__ import annotations

import shutil
import threading
from urllib.parse import urljoin

from esopt.web.axtree import Page, render
from esopt.web.browser import TextBrowser

_TAG = "data-esopt-idx"
_SNAPSHOT_JS = """() => {
  let i = 0;
  for (const el of document.querySelectorAll('*')) {
    el.setAttribute('TAG', String(i++));
    if (el.tagName === 'INPUT') {
      el.setAttribute('value', el.value);
      if (el.checked) el.setAttribute('checked', ''); else el.removeAttribute('checked');
    } else if (el.tagName === 'TEXTAREA') {
      el.textContent = el.value;
    } else if (el.tagName === 'OPTION') {
      if (el.selected) el.setAttribute('selected', ''); else el.removeAttribute('selected');
    }
  }
  return document.documentElement.outerHTML;
}""".replace("TAG", _TAG)

_LOCK = threading.Lock()
_SHARED: dict = {}


def chromium_path() -> str | None:
    """The system Chromium's executable, if installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _shared_browser():
    # One Chromium per process (hundreds of MB); each episode gets its own context.
    with _LOCK:
        if "browser" not in _SHARED:
            from playwright.sync_api import sync_playwright

            exe = chromium_path()
            if exe is None:
                raise RuntimeError("browser=chromium needs Debian's chromium (apt-get install "
                                   "chromium) and playwright (pip install esopt[browser])")
            _SHARED["playwright"] = sync_playwright().start()
            _SHARED["browser"] = _SHARED["playwright"].chromium.launch(
                executable_path=exe, args=["--no-sandbox", "--disable-gpu"])
        return _SHARED["browser"]


def stop_chromium() -> None:
    """Close the shared Chromium (tests, exit)."""
    with _LOCK:
        if "browser" in _SHARED:
            _SHARED.pop("browser").close()
            _SHARED.pop("playwright").stop()


class ChromiumBrowser(TextBrowser):
    """One Chromium tab over the allowed sites, observed as the text browser's tree."""

    def __init__(self, origins: list[str], headers: dict[str, str] | None = None,
                 viewport_lines: int = 60, max_chars: int = 6000, timeout_s: float = 10.0,
                 aliases: dict[str, str] | None = None):
        super().__init__(origins, headers, viewport_lines, max_chars, timeout_s, aliases)
        self.context = _shared_browser().new_context(extra_http_headers=headers or {})
        self.context.set_default_timeout(timeout_s * 1000)
        self.context.route("**/*", self._guard)
        self.tab = self.context.new_page()

    def _guard(self, route) -> None:
        if self.allowed(route.request.url):
            route.continue_()
        else:
            route.abort()

    def _snapshot(self, feedback: str = "") -> str:
        try:
            self.tab.wait_for_load_state()
            html = self.tab.evaluate(_SNAPSHOT_JS)
        except Exception as e:  # noqa: BLE001  (a page that closed or crashed is feedback)
            return f"The page could not be read: {type(e).__name__}."
        if self.tab.url != self.url:
            if self.url != "about:blank":
                self.history.append(self.url)
            self.url, self.offset = self.tab.url, 0
        self.page = render(html)
        return feedback

    def _load(self, method: str, url: str, data=None) -> str:
        if not self.allowed(url):
            return f"Refused: {self.shown(url)[:200]} is not one of the sites you may visit."
        try:
            response = self.tab.goto(url)
        except Exception as e:  # noqa: BLE001
            return f"The page could not be loaded: {type(e).__name__}."
        status = response.status if response is not None else 200
        return self._snapshot("" if status < 400 else f"The server answered HTTP {status}.")

    def go_back(self) -> str:
        """Reopen the previous page (the browser's own history)."""
        if not self.history:
            return "There is no previous page."
        self.tab.go_back()
        self.history.pop()
        self.url = self.tab.url
        return self._snapshot()

    def _locator(self, element: int):
        node = self.page.by_id(element)
        if node is None or _TAG not in node.attrs:
            return None, f"There is no element [{element}] on this page."
        return self.tab.locator(f'[{_TAG}="{node.attrs[_TAG]}"]'), node

    def click(self, element: int) -> str:
        """Click an element in the browser."""
        locator, node = self._locator(element)
        if locator is None:
            return node
        if node.role == "link" and not self.allowed(urljoin(self.url, node.attrs["href"])):
            return f"Refused: {node.attrs['href'][:200]} is not one of the sites you may visit."
        if node.role == "combobox":
            return f"Choose an option with type [{element}] [option]."
        try:
            locator.click()
        except Exception as e:  # noqa: BLE001
            return f"The click failed: {type(e).__name__}."
        return self._snapshot()

    def type(self, element: int, text: str, enter: bool = True) -> str:
        """Fill a field (then Enter unless told not to) or choose a drop-down option."""
        locator, node = self._locator(element)
        if locator is None:
            return node
        try:
            if node.role == "combobox":
                match = [t for _, t in node.options if t.lower() == text.strip().lower()]
                if not match:
                    return (f"[{element}] has no option {text!r}; options: "
                            + " | ".join(t for _, t in node.options))
                locator.select_option(label=match[0])
            elif node.role in ("textbox", "searchbox"):
                locator.fill(text)
                if enter and node.tag == "input":
                    locator.press("Enter")
            else:
                return f"[{element}] is a {node.role}; you can only type into a text field."
        except Exception as e:  # noqa: BLE001
            return f"Typing failed: {type(e).__name__}."
        return self._snapshot()

    def close(self) -> None:
        """Close the tab's context."""
        self.context.close()
        self.page = Page("", [])
