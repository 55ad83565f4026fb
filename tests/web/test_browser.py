"""The text browser against a real site: links, forms with typed values, drop-downs,
scrolling, going back, and the sites-only rule."""

import pytest

from esopt.web.browser import TextBrowser
from esopt.web.checks import query_db
from esopt.web.protocol import EPISODE_HEADER
from esopt.web.server import SiteServer

pytest.importorskip("flask")


@pytest.fixture(scope="module")
def server():
    with SiteServer("forum") as s:
        yield s


@pytest.fixture
def browser(server):
    server.reset("browser")
    b = TextBrowser([server.url], {EPISODE_HEADER: "browser"}, viewport_lines=12)
    assert b.goto("/") == ""
    yield b
    b.close()


def _id(browser, role, name):
    node = next(n for n in browser.page.nodes if n.role == role and n.name == name)
    return node.id


def test_links_and_go_back(browser, server):
    assert browser.click(_id(browser, "link", "f/python")) == ""
    assert browser.url == server.url + "/f/python" and browser.page.title.startswith("f/python")
    assert browser.go_back() == "" and browser.url == server.url + "/"
    assert browser.go_back() == "There is no previous page."
    assert "no element [999]" in browser.click(999)


def test_typed_values_are_submitted_with_the_form(browser, server):
    browser.click(_id(browser, "link", "Submit"))
    assert "no option" in browser.type(_id(browser, "combobox", "Forum"), "nonexistent")
    assert browser.type(_id(browser, "combobox", "Forum"), "Cooking") == ""  # any case
    browser.type(_id(browser, "textbox", "Title"), "Typed title", enter=False)
    browser.type(_id(browser, "textbox", "Body"), "Typed body")  # a textarea: Enter is a newline
    assert browser.url.endswith("/submit")
    assert "only type into a text field" in browser.type(_id(browser, "button", "Create post"),
                                                         "x")
    browser.click(_id(browser, "button", "Create post"))
    assert browser.page.title.startswith("Typed title")
    rows = query_db(server.episode_db("browser"),
                    "SELECT forum, body, author FROM posts WHERE title = 'Typed title'")
    assert rows == (("cooking", "Typed body", "agent_user"),)


def test_enter_in_a_search_box_submits_it(browser):
    browser.type(_id(browser, "searchbox", "Search"), "the canyon")
    assert "/search?q=the+canyon" in browser.url
    assert all("canyon" in n.name for n in browser.page.nodes
               if n.role == "link" and n.attrs["href"].startswith("/f/"))


def test_scrolling_moves_a_bounded_window(browser):
    browser.click(_id(browser, "link", "f/python"))
    first = browser.observation()
    assert "scroll down for more" in first and len(first.splitlines()) == 2 + 12 + 1
    assert browser.scroll("up") == "Already at the top."
    assert browser.scroll("down") == "" and browser.observation() != first
    while browser.scroll("down") == "":
        pass
    assert "scroll down for more" not in browser.observation()


@pytest.mark.parametrize("url", ["http://example.com/", "https://127.0.0.1:1/",
                                 "file:///etc/passwd", "/__reset", "javascript:alert(1)",
                                 "/%5f%5fhealth", "/%255F%255Freset", "/f/../__health",
                                 "//__release"])
def test_only_the_sites_are_reachable(browser, url):
    before = browser.url
    assert browser.goto(url).startswith("Refused")
    assert browser.url == before


def test_aliases_keep_server_ports_out_of_what_the_policy_reads():
    with SiteServer("forum") as a, SiteServer("forum") as b:
        shown = []
        for server in (a, b):
            tab = TextBrowser([server.url], aliases={"http://forum.test": server.url})
            assert tab.goto("http://forum.test/f/python") == ""
            assert tab.url == server.url + "/f/python"  # fetched from the real server
            tab.click(_id(tab, "link", "Next page"))
            shown.append(tab.observation())
            assert tab.goto("http://forum.test.evil/").startswith("Refused")
            tab.close()
        assert a.port != b.port and shown[0] == shown[1]
        assert "URL: http://forum.test/f/python?sort=top&page=2" in shown[0]
        assert str(a.port) not in shown[0]


def test_a_redirect_off_the_sites_is_refused_before_it_is_requested():
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    hits = []

    class Target(BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    target = ThreadingHTTPServer(("127.0.0.1", 0), Target)

    class Redirector(BaseHTTPRequestHandler):
        def do_GET(self):
            location = (f"http://127.0.0.1:{target.server_port}/secret" if self.path == "/off"
                        else "/here")
            if self.path == "/here":
                self.send_response(200)
                self.send_header("content-type", "text/html")
                self.end_headers()
                self.wfile.write(b"<h1>here</h1>")
                return
            self.send_response(302)
            self.send_header("location", location)
            self.end_headers()

        def log_message(self, *args):
            pass

    site = ThreadingHTTPServer(("127.0.0.1", 0), Redirector)
    for server in (target, site):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        tab = TextBrowser([f"http://127.0.0.1:{site.server_port}"])
        assert tab.goto(f"http://127.0.0.1:{site.server_port}/on") == ""
        assert tab.url.endswith("/here") and tab.page.nodes[0].name == "here"
        assert tab.goto("/off").startswith("Refused") and tab.url.endswith("/here")
        assert hits == []
    finally:
        for server in (target, site):
            server.shutdown()
            server.server_close()


def test_searches_take_wildcards_literally_and_paging_is_clamped(server):
    import requests

    with requests.Session() as http:
        http.headers[EPISODE_HEADER] = "browser"
        for q in ("%", "_", "\\", "%%_"):
            r = http.get(f"{server.url}/search", params={"q": q}, timeout=10)
            assert r.status_code == 200 and "<p>0 results</p>" in r.text, q
        for page in ("99999999999999999999", "-5", "0", str(2**63)):
            r = http.get(f"{server.url}/f/python", params={"page": page}, timeout=10)
            assert r.status_code == 200, page


def test_episode_copies_in_use_are_never_evicted(tmp_path, monkeypatch):
    from esopt.web.apps import common

    monkeypatch.setattr(common, "MAX_EPISODE_COPIES", 3)
    pristine = tmp_path / "pristine.db"
    pristine.write_bytes(b"db")
    store = common.EpisodeStore(pristine, tmp_path)
    held = store.open("held")
    for i in range(6):
        store.path(f"e{i}")
    assert held.exists()  # the oldest, but open
    store.path("e5")  # used: the most recent
    store.close("held")
    for i in range(6, 9):
        store.path(f"e{i}")
    assert not held.exists() and store.path("e5").exists()
