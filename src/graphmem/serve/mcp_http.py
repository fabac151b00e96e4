"""The HTTP MCP server's defences against a local user without the token (issue 35 finding 4).

- A request must arrive whole within ``REQUEST_TIMEOUT`` seconds of its connection (or of the
  previous response on a kept-alive one): a half-sent request line, headers or body is closed
  then, instead of holding a descriptor and a connection forever. uvicorn has no such timeout of
  its own (its keep-alive timeout covers only a silent connection between requests).
- Running out of descriptors (``EMFILE``) never stops the server: asyncio's accept loop reports
  it to the loop's exception handler and retries a second later; the handler here says so in one
  line on stderr (at most once a minute) and can fail at nothing. The default one logs a
  traceback through the MCP SDK's rich handler, which imports a module to do it: that import
  needs a descriptor too, and its error stopped the server.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import time
from typing import Any

REQUEST_TIMEOUT = 10.0  # seconds a request may take to arrive whole (line, headers and body)
_EXHAUSTED = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
_SAID_EVERY = 60.0
_said = [float("-inf")]


def _say(text: str) -> None:
    """One line on stderr without opening anything (a descriptor may be what is missing)."""
    try:
        os.write(2, (text + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


def exception_handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's exception handler: resource exhaustion is one line at most once a minute, the
    rest goes to asyncio's default handler; nothing raised here can stop the server."""
    try:
        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in _EXHAUSTED:
            now = time.monotonic()
            if now - _said[0] >= _SAID_EVERY:
                _said[0] = now
                _say(f"graphmem: MCP server out of resources ({exc.strerror}): new connections "
                     "wait until open ones close; half-sent requests are closed after "
                     f"{REQUEST_TIMEOUT:.0f}s")
            return
        if _retry_after_close(context):
            return  # the server closed (shutdown) before asyncio's accept retry came due
        loop.default_exception_handler(context)
    except Exception as exc:  # the handler of last resort: report plainly, never raise
        _say(f"graphmem: MCP server: {context.get('message', 'error')} ({exc!r})")


def _retry_after_close(context: dict[str, Any]) -> bool:
    """asyncio's accept retry (scheduled a second after ``EMFILE``) running once the listening
    socket is closed: it fails on the closed socket's descriptor, harmlessly."""
    handle = context.get("handle")
    callback = getattr(handle, "_callback", None)
    return getattr(callback, "__name__", "") == "_start_serving" and any(
        isinstance(a, socket.socket) and a.fileno() == -1 for a in getattr(handle, "_args", ()) or ())


def protocol_class() -> type:
    """uvicorn's h11 HTTP protocol with the request deadline (``REQUEST_TIMEOUT``)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    waiting = (h11.IDLE, h11.SEND_BODY)  # the client's states before its request is whole

    class DeadlineProtocol(H11Protocol):
        """Closes a connection whose request has not arrived whole in time."""

        _deadline: asyncio.TimerHandle | None = None

        def _arm(self) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(REQUEST_TIMEOUT, self._expired)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expired(self) -> None:
            self._deadline = None
            if self.conn.their_state in waiting and not self.transport.is_closing():
                self.transport.close()  # connection_lost tells a waiting handler it is gone

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state not in waiting:
                self._disarm()  # the request is whole: the handler takes it from here

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state in waiting:
                self._arm()  # the next request on a kept-alive connection gets its own deadline

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return DeadlineProtocol


async def serve(app: Any, host: str, port: int) -> None:
    """Serve ``app`` with uvicorn, with the request deadline and the exception handler above."""
    import uvicorn

    asyncio.get_running_loop().set_exception_handler(exception_handler)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", http=protocol_class())
    await uvicorn.Server(config).serve()
