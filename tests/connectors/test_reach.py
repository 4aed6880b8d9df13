"""why_unreachable names the kind of failure from a real socket's error, never the host."""

from __future__ import annotations

import socket
import ssl
import threading

from connectors.errors import EngineTimeout, EngineUnavailable
from connectors.reach import why_unreachable


def _wrapped(cause: BaseException) -> EngineUnavailable:
    try:
        raise EngineUnavailable("the engine cannot be reached") from cause
    except EngineUnavailable as exc:
        return exc


def _caught(action: object) -> BaseException:
    try:
        action()  # type: ignore[operator]
    except OSError as exc:
        return exc
    raise AssertionError("expected the socket call to fail")


def test_a_name_that_does_not_resolve() -> None:
    exc = _caught(lambda: socket.getaddrinfo("no-such-host.invalid", 9200))
    assert why_unreachable(_wrapped(exc)) == "its host name does not resolve (DNS)"


def test_a_refused_connection() -> None:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        port = sock.getsockname()[1]
    exc = _caught(lambda: socket.create_connection(("127.0.0.1", port), timeout=5))
    why = why_unreachable(_wrapped(exc))
    assert why is not None
    assert why.startswith("the connection was refused")
    assert "127.0.0.1" not in why
    assert str(port) not in why


def test_tls_to_a_plain_http_server() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]

        def answer_plain() -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(4096)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

        thread = threading.Thread(target=answer_plain)
        thread.start()
        context = ssl.create_default_context()

        def handshake() -> None:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
                context.wrap_socket(raw, server_hostname="engine.test")

        exc = _caught(handshake)
        thread.join(timeout=5)
    why = why_unreachable(_wrapped(exc))
    assert why is not None
    assert why.startswith("TLS failed")
    assert "engine.test" not in why


def test_a_timeout_and_nothing_known() -> None:
    assert why_unreachable(EngineTimeout("no answer")) is not None
    # A failure with no cause says nothing rather than guess.
    assert why_unreachable(EngineUnavailable("the engine cannot be reached")) is None


def test_the_cause_is_found_through_wrappers() -> None:
    exc: BaseException = ConnectionRefusedError(111, "refused")
    for _ in range(3):
        exc = _wrapped(exc)
    assert why_unreachable(exc) is not None
