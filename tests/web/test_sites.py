"""Every site, crawled: each page reachable by links within a bound answers without a
server error, and every form, submitted empty or with junk, answers without one."""

from urllib.parse import urljoin, urlsplit

import pytest
import requests

from esopt.web.axtree import render
from esopt.web.protocol import EPISODE_HEADER
from esopt.web.server import SiteServer
from esopt.web.sites import SITES

pytest.importorskip("flask")

MAX_PAGES = 30


def _forms(page):
    seen = []
    for node in page.nodes:
        if node.form is not None and all(node.form is not f for f in seen):
            seen.append(node.form)
    return seen


@pytest.mark.parametrize("site", SITES)
def test_crawl_finds_no_server_errors(site):
    headers = {EPISODE_HEADER: "crawl"}
    with SiteServer(site) as server, requests.Session() as http:
        http.headers.update(headers)
        server.reset("crawl")
        queue, seen, statuses = ["/"], set(), []
        forms = []
        while queue and len(seen) < MAX_PAGES:
            path = queue.pop(0)
            if path in seen:
                continue
            seen.add(path)
            r = http.get(server.url + path, timeout=10)
            statuses.append((path, r.status_code))
            page = render(r.text)
            for node in page.nodes:
                if node.role == "link":
                    target = urlsplit(urljoin(server.url + path, node.attrs["href"]))
                    queue.append(target.path + (f"?{target.query}" if target.query else ""))
            forms += [(path, f) for f in _forms(page)
                      if (f.action, f.method) not in {(g.action, g.method) for _, g in forms}]
        assert len(seen) >= 8 and all(code < 500 for _, code in statuses), statuses
        assert len(forms) >= 2  # a search or filter form and at least one change
        for path, form in forms[:20]:
            action = urljoin(server.url + path, form.action or path)
            for junk in ("", "x" * 3000, "'; DROP TABLE posts; --"):
                data = {f.attrs.get("name", ""): junk for f in form.fields}
                r = (http.post(action, data=data, timeout=10) if form.method == "post"
                     else http.get(action, params=data, timeout=10))
                assert r.status_code < 500, (action, junk, r.status_code)
        assert http.get(server.url + "/", timeout=10).status_code == 200  # tables intact
