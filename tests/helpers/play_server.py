"""A play session's pages served in this process on a free loopback port (uvicorn in a thread),
so that a test can both drive the pages and read the session they play."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from benchmark.play.app import create_app
from benchmark.play.session import PlaySession

START_TIMEOUT_S = 30.0


@contextmanager
def serving(session: PlaySession) -> Iterator[str]:
    """Serve ``session`` while the block runs; yields the base URL (``http://127.0.0.1:<port>``)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(create_app(session), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the play server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def seat_url(base: str, session: PlaySession, agent: str) -> str:
    return f"{base}/seat/{session.seats[agent].token}"
