"""The local web sites and the text browser: server start time, request latency and
throughput (keep-alive HTTP/1.1 against werkzeug's HTTP/1.0 default), oracle episodes per
second through the environment, and the Playwright + Chromium browser path when present.

    OMP_NUM_THREADS=1 python benchmarks/web.py [--requests 1000] [--episodes 60] [--chromium]

Start time: from `SiteServer.start()` to the first served page, each site 3 times
(median). Latency: sequential GETs of a fixed page mix with one keep-alive session. Throughput: the
same mix from 8 client threads. Episodes: the oracle over the first N tasks (all sites)
through `make_env("web")`, servers already warm. Chromium (`--chromium`, needs `playwright`
from PyPI and Debian's `chromium`): page load + tree of the same pages, `ChromiumBrowser`
against `TextBrowser`, and the browser's launch time.
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import requests

from esopt.web.server import SiteServer, stop_shared_sites
from esopt.web.sites import SITES

PAGES = ["/", "/f/python", "/f/books?sort=new", "/search?q=the", "/f/books/1", "/u/agent_user"]


def start_times(repeats: int = 3) -> dict[str, float]:
    out = {}
    for site in SITES:
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            with SiteServer(site) as s:
                requests.get(s.url + "/", timeout=10).raise_for_status()
                times.append(time.perf_counter() - t0)
        out[site] = statistics.median(times)
    return out


def latency_and_throughput(n: int, keep_alive: bool) -> tuple[float, float, float]:
    with SiteServer("forum", keep_alive=keep_alive) as s:
        session = requests.Session()
        lat = []
        for i in range(n):
            t0 = time.perf_counter()
            session.get(s.url + PAGES[i % len(PAGES)], timeout=10).raise_for_status()
            lat.append(time.perf_counter() - t0)
        sessions = [requests.Session() for _ in range(8)]

        def get(i):
            sessions[i % 8].get(s.url + PAGES[i % len(PAGES)], timeout=10).raise_for_status()

        t0 = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(get, range(n)))
        rate = n / (time.perf_counter() - t0)
    lat.sort()
    return lat[len(lat) // 2] * 1e3, lat[int(len(lat) * 0.95)] * 1e3, rate


def oracle_episodes(n: int) -> tuple[float, float, int]:
    from esopt.envs import make_env
    from esopt.web.agents import OracleAgent, play

    env = make_env("web")
    stride = max(1, len(env.tasks) // n)
    for i in range(0, len(env.tasks), 40):  # start every site once, untimed
        env.reset(i)
        env.close()
    steps, solved = 0, 0
    t0 = time.perf_counter()
    for i in range(0, stride * n, stride):
        ok, actions = play(env, i, OracleAgent)
        steps, solved = steps + len(actions), solved + ok
    dt = time.perf_counter() - t0
    stop_shared_sites()
    return n / dt, steps / dt, solved


def chromium_pages(n: int) -> tuple[float, float, float]:
    """Median ms per page load + tree for the Chromium and the text browser, and
    Chromium's launch time in seconds."""
    from esopt.web.browser import TextBrowser
    from esopt.web.chromium import ChromiumBrowser, stop_chromium

    with SiteServer("forum") as s:
        t0 = time.perf_counter()
        chrome_tab = ChromiumBrowser([s.url])
        launch = time.perf_counter() - t0
        out = []
        for tab in (chrome_tab, TextBrowser([s.url])):
            times = []
            for i in range(n):
                t0 = time.perf_counter()
                tab.goto(s.url + PAGES[i % len(PAGES)])
                tab.observation()
                times.append(time.perf_counter() - t0)
            tab.close()
            out.append(statistics.median(times) * 1e3)
        stop_chromium()
    return out[0], out[1], launch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--episodes", type=int, default=60)
    ap.add_argument("--chromium", action="store_true")
    args = ap.parse_args()
    for site, s in start_times().items():
        print(f"start {site:7s} {s:.2f} s (median of 3, to the first page)")
    for keep_alive in (True, False):
        p50, p95, rate = latency_and_throughput(args.requests, keep_alive)
        kind = "HTTP/1.1 keep-alive" if keep_alive else "HTTP/1.0 (werkzeug default)"
        print(f"{kind:28s} latency p50 {p50:.1f} ms, p95 {p95:.1f} ms; "
              f"{rate:.0f} requests/s from 8 threads")
    eps, steps, solved = oracle_episodes(args.episodes)
    print(f"oracle through the env: {eps:.1f} episodes/s, {steps:.0f} actions/s, "
          f"{solved}/{args.episodes} solved")
    if args.chromium:
        chrome, plain, launch = chromium_pages(60)
        print(f"page + tree: chromium {chrome:.1f} ms, text browser {plain:.1f} ms (median); "
              f"chromium launch {launch:.1f} s")


if __name__ == "__main__":
    main()
