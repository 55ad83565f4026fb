"""The Chromium option (Playwright + Debian's chromium; skipped where either is missing):
the same tree as the text browser, the oracle's episodes, the sites-only rule."""

import pytest

from esopt.envs import make_env
from esopt.web.agents import OracleAgent, play
from esopt.web.browser import TextBrowser
from esopt.web.chromium import chromium_path
from esopt.web.server import SiteServer

pytest.importorskip("flask")
pytest.importorskip("playwright")
if chromium_path() is None:
    pytest.skip("no chromium executable", allow_module_level=True)


@pytest.fixture(scope="module")
def chromium():
    from esopt.web.chromium import stop_chromium
    from esopt.web.server import stop_shared_sites

    yield
    stop_chromium()
    stop_shared_sites()


def test_chromium_shows_the_text_browsers_tree(chromium):
    from esopt.web.chromium import ChromiumBrowser

    with SiteServer("shop") as s:
        tabs = [ChromiumBrowser([s.url]), TextBrowser([s.url])]
        for path in ("/", "/category/kitchen?sort=price_asc", "/product/3", "/account/orders"):
            trees = []
            for tab in tabs:
                assert tab.goto(path) == ""
                trees.append(tab.observation())
            assert trees[0] == trees[1]
        assert tabs[0].goto("http://example.com/").startswith("Refused")
        for tab in tabs:
            tab.close()


def test_oracle_episodes_through_chromium(chromium):
    env = make_env("web", browser="chromium")
    kinds = {}
    for i, task in enumerate(env.tasks):
        kinds.setdefault(task.check.kind, i)
    for i in kinds.values():  # one task of each check kind
        assert play(env, i, OracleAgent)[0], env.tasks[i].id
