"""The site servers: start on loopback in bounded time, serve 1000 requests, reset to the
seed per episode, keep episodes apart, guard the admin endpoints, leave no process."""

import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import psutil
import pytest
import requests

from esopt.web.checks import query_db
from esopt.web.protocol import ADMIN_HEADER, EPISODE_HEADER
from esopt.web.server import SiteServer
from esopt.web.sites import SITES, site_module

pytest.importorskip("flask")


@pytest.fixture(scope="module")
def forum():
    with SiteServer("forum") as server:
        yield server


@pytest.mark.parametrize("site", SITES)
def test_each_site_starts_serves_its_home_page_and_stops(site):
    t0 = time.perf_counter()
    with SiteServer(site) as server:
        started_s = time.perf_counter() - t0
        r = requests.get(server.url + "/", timeout=5)
        assert r.status_code == 200 and "<nav>" in r.text
        # Loopback only: the listening socket is bound to 127.0.0.1, not 0.0.0.0.
        laddrs = [c.laddr for c in psutil.Process(server.pid).net_connections("tcp")
                  if c.status == psutil.CONN_LISTEN]
        assert laddrs == [("127.0.0.1", server.port)]
    # Loose bound (a loaded 2-core machine); benchmarks/web.py has the figures (~0.3 s).
    assert started_s < 15


def test_stop_ends_the_child_by_pid():
    server = SiteServer("map").start()
    pid = server.pid
    assert psutil.pid_exists(pid)
    server.stop()
    assert not psutil.pid_exists(pid) and server.pid is None
    with pytest.raises(requests.ConnectionError):
        requests.get(server.url, timeout=2)
    server.stop()  # idempotent


def test_child_exits_when_its_parent_is_killed():
    code = ("from esopt.web.server import SiteServer; import time; "
            "s = SiteServer('forum').start(); print(s.pid, s._dir.name, flush=True); "
            "time.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    pid, workdir = parent.stdout.readline().split()
    child = int(pid)
    assert psutil.pid_exists(child)
    os.kill(parent.pid, signal.SIGKILL)  # no atexit, no stop(): the child must notice
    parent.wait()
    deadline = time.monotonic() + 10
    while psutil.pid_exists(child) and psutil.Process(child).status() != "zombie":
        assert time.monotonic() < deadline, "server child outlived its killed parent"
        time.sleep(0.1)
    time.sleep(0.2)
    assert not os.path.exists(workdir)  # its database copies are gone too


def test_a_thousand_bounded_requests(forum):
    paths = ["/", "/f/python", "/f/books?sort=new", "/search?q=the", "/f/books/1",
             "/u/agent_user", "/submit", "/f/nope"]

    def get(i):
        r = requests.get(forum.url + paths[i % len(paths)], timeout=10,
                         headers={EPISODE_HEADER: f"load{i % 4}"})
        return r.status_code

    t0 = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(get, range(1000)))
    assert codes.count(404) == 125 and codes.count(200) == 875
    assert time.perf_counter() - t0 < 60
    assert requests.get(forum.url + "/__health", timeout=5).text == "ok"  # still up


def _post_score(server, episode, post_id=1):
    return query_db(server.episode_db(episode), "SELECT score FROM posts WHERE id = ?",
                    (post_id,))[0][0]


def test_reset_restores_the_seed_and_episodes_are_apart(forum):
    seeded = next(p for p in site_module("forum").generate(0)["posts"] if p["id"] == 1)
    for episode in ("a", "b"):
        forum.reset(episode)
    vote = forum.url + f"/f/{seeded['forum']}/1/vote"
    assert requests.post(vote, headers={EPISODE_HEADER: "a"}, timeout=5).ok
    assert _post_score(forum, "a") == seeded["score"] + 1
    assert _post_score(forum, "b") == seeded["score"]
    forum.reset("a")
    assert _post_score(forum, "a") == seeded["score"]
    forum.release("b")
    assert not forum.episode_db("b").exists()


def test_admin_endpoints_need_the_key(forum):
    for path in ("/__reset", "/__release"):
        assert requests.post(forum.url + path, timeout=5).status_code == 403
        assert requests.post(forum.url + path, headers={ADMIN_HEADER: "guess"},
                             timeout=5).status_code == 403
    assert requests.get(forum.url + "/", headers={EPISODE_HEADER: "../etc"},
                        timeout=5).status_code == 400


def test_data_is_a_function_of_the_seed():
    for site in SITES:
        module = site_module(site)
        assert module.generate(0) == module.generate(0)
        assert module.generate(0) != module.generate(1)


def test_a_port_in_use_does_not_matter():
    # The child binds port 0 itself: two servers of one site never collide.
    with socket.socket() as busy, SiteServer("gitlab") as a, SiteServer("gitlab") as b:
        busy.bind(("127.0.0.1", 0))
        assert a.port != b.port
        assert requests.get(a.url, timeout=5).text == requests.get(b.url, timeout=5).text
