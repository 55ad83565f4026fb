"""A text browser: an HTTP session, pages rendered to accessibility trees, WebArena actions.

Clicking a link follows it; clicking a submit button submits its form with the values typed
so far; `type` fills a text field or chooses a drop-down option (and presses Enter in a
single-line field unless told `[0]`, as WebArena does). The observation is a window of the
tree's lines (`scroll` moves it). Only the allowed sites can be visited: any other URL, and
the servers' admin paths, are refused with feedback.

`aliases` show the local sites under stable names (http://forum.test for
http://127.0.0.1:40123): the port a server got must not reach the policy's prompt, or the
same task would read differently in two worker processes (ES scores every direction of a
generation on the same prompts). URLs the policy writes with an alias are resolved back.
"""

from __future__ import annotations

import html
import posixpath
from urllib.parse import unquote, urlencode, urljoin, urlsplit, urlunsplit

import requests

from esopt.web.actions import Action
from esopt.web.axtree import Node, Page, render

MAX_BODY_BYTES = 2_000_000
MAX_REDIRECTS = 10


class TextBrowser:
    """One tab over the allowed sites (`origins`: base URLs such as http://127.0.0.1:8080)."""

    def __init__(self, origins: list[str], headers: dict[str, str] | None = None,
                 viewport_lines: int = 60, max_chars: int = 6000, timeout_s: float = 10.0,
                 aliases: dict[str, str] | None = None):
        self.origins = {urlsplit(o).netloc for o in origins}
        # shown origin -> real origin, both without a trailing slash
        self.aliases = {a.rstrip("/"): r.rstrip("/") for a, r in (aliases or {}).items()}
        self.session = requests.Session()
        self.session.headers.update(headers or {})
        self.viewport_lines, self.max_chars, self.timeout_s = viewport_lines, max_chars, timeout_s
        self.url = "about:blank"
        self.page = Page("", [])
        self.offset = 0
        self.history: list[str] = []

    def allowed(self, url: str) -> bool:
        """Whether `url` lies on one of the sites (and not on an admin path)."""
        parts = urlsplit(url)
        path = parts.path
        for _ in range(4):  # as the server will read it: %5f%5fhealth, %255f, /a/../__x
            path = unquote(path)
        path = posixpath.normpath("/" + path.lstrip("/"))
        return (parts.scheme in ("http", "https") and parts.netloc in self.origins
                and not path.startswith("/__"))

    def _load(self, method: str, url: str, data: list[tuple[str, str]] | None = None) -> str:
        # Redirects are followed here, one hop at a time, so that a redirect off the sites
        # is refused before it is requested (requests would follow it first).
        for _ in range(MAX_REDIRECTS + 1):
            if not self.allowed(url):
                return f"Refused: {self.shown(url)[:200]} is not one of the sites you may visit."
            try:
                with self.session.request(method, url, data=data, timeout=self.timeout_s,
                                          stream=True, allow_redirects=False) as r:
                    location = r.headers.get("location") if r.is_redirect else None
                    body = b"" if location else r.raw.read(MAX_BODY_BYTES, decode_content=True)
                    status, kind = r.status_code, r.headers.get("content-type", "")
            except requests.RequestException as e:
                return f"The page could not be loaded: {type(e).__name__}."
            if location is None:
                break
            url = urljoin(url, location)
            if status != 307 and status != 308:  # 301/302/303: the browser's GET
                method, data = "GET", None
        else:
            return "The page could not be loaded: too many redirects."
        if self.url != "about:blank":
            self.history.append(self.url)
        self.url, self.offset = url, 0
        text = body.decode("utf-8", errors="replace")
        self.page = render(text if "html" in kind else f"<pre>{html.escape(text[:4000])}</pre>")
        return "" if status < 400 else f"The server answered HTTP {status}."

    def shown(self, url: str) -> str:
        """A URL as the policy sees it (real origins replaced by their aliases)."""
        for alias, real in self.aliases.items():
            if url == real or url.startswith(real + "/"):
                return alias + url[len(real):]
        return url

    def real(self, url: str) -> str:
        """A URL the policy wrote, with an alias replaced by its real origin."""
        for alias, real in self.aliases.items():
            if url == alias or url.startswith(alias + "/") or url.startswith(alias + "?"):
                return real + url[len(alias):]
        return url

    def goto(self, url: str) -> str:
        """Open a URL (relative URLs resolve against the current page)."""
        base = self.url if self.url != "about:blank" else f"http://{sorted(self.origins)[0]}/"
        return self._load("GET", urljoin(base, self.real(url.strip())))

    def go_back(self) -> str:
        """Reopen the previous page."""
        if not self.history:
            return "There is no previous page."
        url = self.history.pop()
        depth = len(self.history)
        feedback = self._load("GET", url)
        del self.history[depth:]  # going back does not record the page we left
        return feedback

    def _node(self, element: int | None) -> Node | str:
        node = self.page.by_id(element) if element is not None else None
        return node if node is not None else f"There is no element [{element}] on this page."

    def click(self, element: int) -> str:
        """Click an element: follow a link, submit a form, toggle a checkbox."""
        node = self._node(element)
        if isinstance(node, str):
            return node
        if node.role == "link":
            return self._load("GET", urljoin(self.url, node.attrs["href"]))
        if node.role == "button" and node.form is not None:
            return self._submit(node)
        if node.role == "checkbox":
            node.checked = not node.checked
            return ""
        if node.role == "combobox":
            return f"Choose an option with type [{element}] [option]."
        return ""  # clicking text does nothing, as in a browser

    def type(self, element: int, text: str, enter: bool = True) -> str:
        """Type into a text field (Enter submits a single-line field's form) or choose an
        option of a drop-down by its text."""
        node = self._node(element)
        if isinstance(node, str):
            return node
        if node.role == "combobox":
            match = [t for _, t in node.options if t.lower() == text.strip().lower()]
            if not match:
                return (f"[{element}] has no option {text!r}; options: "
                        + " | ".join(t for _, t in node.options))
            node.value = match[0]
            return ""
        if node.role not in ("textbox", "searchbox"):
            return f"[{element}] is a {node.role}; you can only type into a text field."
        node.value = text
        if enter and node.tag == "input" and node.form is not None:
            return self._submit(node)
        return ""

    def _submit(self, trigger: Node) -> str:
        form = trigger.form
        data: list[tuple[str, str]] = []
        for f in form.fields:
            name = f.attrs.get("name", "")
            if f.role == "combobox":
                data += [(name, v) for v, t in f.options if t == f.value][:1]
            elif f.role == "checkbox":
                data += [(name, f.attrs.get("value", "on"))] if f.checked else []
            elif f.role != "button":
                data.append((name, f.value))
        if trigger.role == "button" and trigger.attrs.get("name"):
            data.append((trigger.attrs["name"], trigger.attrs.get("value", "")))
        action = urljoin(self.url, form.action or self.url)
        if form.method == "post":
            return self._load("POST", action, data)
        parts = urlsplit(action)
        return self._load("GET", urlunsplit(parts._replace(query=urlencode(data))))

    def scroll(self, direction: str) -> str:
        """Move the window by most of its height."""
        step = max(1, self.viewport_lines - 5)
        lines = len(self.page.nodes)
        new = max(0, min(self.offset + (step if direction == "down" else -step),
                         max(0, lines - self.viewport_lines)))
        edge = "bottom" if direction == "down" else "top"
        feedback = "" if new != self.offset else f"Already at the {edge}."
        self.offset = new
        return feedback

    def act(self, action: Action) -> str:
        """Apply one action (not stop); return feedback ("" when it simply worked)."""
        if action.verb == "click":
            return self.click(action.element)
        if action.verb == "type":
            return self.type(action.element, action.text, action.enter)
        if action.verb == "goto":
            return self.goto(action.text)
        if action.verb == "scroll":
            return self.scroll(action.text)
        if action.verb == "go_back":
            return self.go_back()
        return ""  # hover: nothing to show in a text tree

    def observation(self) -> str:
        """The page's title, URL and the visible window of its tree (bounded length)."""
        lines = self.page.lines()
        window = lines[self.offset:self.offset + self.viewport_lines]
        text = "\n".join(line[:300] for line in window)[: self.max_chars]
        where = (f"(lines {self.offset + 1}-{self.offset + len(window)} of {len(lines)}"
                 + ("; scroll down for more)" if self.offset + len(window) < len(lines) else ")"))
        return f"Tab: {self.page.title}\nURL: {self.shown(self.url)}\n{text}\n{where}"

    def close(self) -> None:
        """Close the HTTP session."""
        self.session.close()
