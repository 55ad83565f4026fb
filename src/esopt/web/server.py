"""Start, reset and stop the site servers: one child process per site on 127.0.0.1.

`SiteServer` writes the site's seeded database once (the pristine copy), starts the child
(`esopt.web.serve`) on a free port the child picks itself (no race between choosing a port
and binding it), resets an episode's copy over HTTP, and ends the child by its pid.
`shared_sites` keeps one server per (site, data seed) per process, stopped at exit.
"""

from __future__ import annotations

import atexit
import os
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

from esopt.web.protocol import ADMIN_HEADER, EPISODE_HEADER, episode_db_path, write_db
from esopt.web.sites import site_module

START_TIMEOUT_S = 30.0


class SiteServer:
    """One site as a real web server on loopback; use as a context manager or start/stop."""

    def __init__(self, site: str, data_seed: int = 0, keep_alive: bool = True):
        self.site, self.data_seed, self.keep_alive = site, data_seed, keep_alive
        self.module = site_module(site)
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.admin_key = secrets.token_hex(16)
        self._dir: tempfile.TemporaryDirectory | None = None
        self._admin_session = requests.Session()

    @property
    def url(self) -> str:
        """The base URL, e.g. http://127.0.0.1:40123."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The child's pid while it runs."""
        return self.proc.pid if self.proc else None

    def start(self) -> SiteServer:
        """Write the pristine database, start the child and wait until it listens."""
        if self.proc is not None:
            return self
        self._dir = tempfile.TemporaryDirectory(prefix=f"esopt-web-{self.site}-")
        root = Path(self._dir.name)
        pristine = write_db(self.module.SCHEMA, self.module.generate(self.data_seed),
                            root / "pristine.sqlite")
        env = {**os.environ, "ESOPT_WEB_ADMIN_KEY": self.admin_key, "OMP_NUM_THREADS": "1"}
        with open(root / "server.log", "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "esopt.web.serve", self.site, str(pristine), str(root)]
                + ([] if self.keep_alive else ["--http10"]),
                stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, env=env,
                start_new_session=True)  # its own group: a Ctrl-C here does not reach it
        try:
            self.port = self._read_port()
        except BaseException:
            self.stop()
            raise
        return self

    def _read_port(self) -> int:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.1)
            if ready:
                line = self.proc.stdout.readline().decode()
                if line.startswith("LISTENING "):
                    return int(line.split()[1])
            if self.proc.poll() is not None:
                break
        log = (Path(self._dir.name) / "server.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"site {self.site} did not start: {log}")

    def stop(self, timeout_s: float = 5.0) -> None:
        """End the child by its pid (TERM, then KILL) and delete its files."""
        proc, self.proc = self.proc, None
        if proc is not None:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait()
            proc.stdout.close()
        self._admin_session.close()
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def reset(self, episode: str) -> None:
        """Give episode `episode` a fresh copy of the seeded database."""
        self._admin("/__reset", episode)

    def release(self, episode: str) -> None:
        """Drop episode `episode`'s database copy."""
        self._admin("/__release", episode)

    def _admin(self, path: str, episode: str) -> None:
        r = self._admin_session.post(self.url + path, timeout=10, headers={
            ADMIN_HEADER: self.admin_key, EPISODE_HEADER: episode})
        r.raise_for_status()

    def episode_db(self, episode: str) -> Path:
        """The episode's database file (the checks read it)."""
        return episode_db_path(Path(self._dir.name), episode)

    def __enter__(self) -> SiteServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


_SHARED: dict[tuple[str, int], SiteServer] = {}
_SHARED_LOCK = threading.Lock()


def shared_site(site: str, data_seed: int = 0) -> SiteServer:
    """This process's running server of `site` (started on first use, stopped at exit)."""
    with _SHARED_LOCK:
        server = _SHARED.get((site, data_seed))
        if server is None or server.proc is None or server.proc.poll() is not None:
            server = _SHARED[(site, data_seed)] = SiteServer(site, data_seed).start()
        return server


@atexit.register
def stop_shared_sites() -> None:
    """Stop every shared server (at exit; tests call it too)."""
    with _SHARED_LOCK:
        for server in _SHARED.values():
            server.stop()
        _SHARED.clear()
