"""The server child: `python -m esopt.web.serve SITE PRISTINE WORKDIR [--http10]` serves one
site on a free loopback port, prints `LISTENING <port>` once, and exits when its parent is
gone.

The admin key comes in the environment (ESOPT_WEB_ADMIN_KEY), never on the command line
(which other users can read). werkzeug's threaded server, not uvicorn: it ships with Flask
(no ASGI adapter, no extra dependency), starts in a fraction of a second, and a thread per
request is plenty for one agent's clicks (benchmarks/web.py measures it). HTTP/1.1 keeps
the browser's connection open between requests (werkzeug's default, HTTP/1.0, opens one per
request); `--http10` is kept for the benchmark's comparison.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import threading
import time
from pathlib import Path

from werkzeug.serving import WSGIRequestHandler, make_server

from esopt.web.apps import create_app
from esopt.web.apps.common import EpisodeStore


def _exit_with_parent(parent: int, workdir: Path) -> None:
    # A parent killed hard (SIGKILL, OOM) cannot stop us or delete our files; we notice it
    # is gone, delete them and leave.
    while os.getppid() == parent:
        time.sleep(0.5)
    shutil.rmtree(workdir, ignore_errors=True)
    os._exit(0)


class _KeepAliveHandler(WSGIRequestHandler):
    protocol_version = "HTTP/1.1"


def main(argv: list[str]) -> None:
    """Serve site argv[0] from the pristine database argv[1], episode copies in argv[2]."""
    http10 = "--http10" in argv
    site, pristine, workdir = [a for a in argv if a != "--http10"]
    parent = os.getppid()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    app = create_app(site, EpisodeStore(Path(pristine), Path(workdir)),
                     os.environ["ESOPT_WEB_ADMIN_KEY"])
    server = make_server("127.0.0.1", 0, app, threaded=True,
                         request_handler=WSGIRequestHandler if http10 else _KeepAliveHandler)
    threading.Thread(target=_exit_with_parent, args=(parent, Path(workdir)), daemon=True).start()
    print(f"LISTENING {server.server_port}", flush=True)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # nobody reads the pipe after the first line
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
