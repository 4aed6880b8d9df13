"""In-process binding (§8.1): serialises to JSON and back, as a remote call would."""

from __future__ import annotations

import itertools
from functools import partial
from typing import Any

import orjson

from gateway.a2m.dispatcher import Dispatcher
from gateway.a2m.errors import A2MError
from gateway.a2m.jsonrpc import handle_message
from gateway.security.scopes import Caller, Principal


class A2MRemoteError(Exception):
    """A JSON-RPC error object returned by the server."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.data = data


async def _refuse(refusal: A2MError, method: str, params: Any) -> Any:
    raise refusal


class InProcessClient:
    """Call a store from the same process, through the same JSON the network carries.

    Without a principal the caller is local (§6: `owner` is taken at face value).
    An application that authenticated its user itself passes that user's
    principal, and the store scopes every call to it as it would over HTTP; each
    message is charged to that principal's rate limit, as one HTTP request is.
    """

    def __init__(self, dispatcher: Dispatcher, principal: Principal | None = None) -> None:
        self._dispatcher = dispatcher
        self._caller = Caller(network=False, principal=principal)
        self._ids = itertools.count(1)

    async def _dispatch(self, method: str, params: Any) -> Any:
        return await self._dispatcher.dispatch(method, params, self._caller)

    async def send(
        self, message: dict[str, Any] | list[Any] | str | bytes
    ) -> dict[str, Any] | None:
        """Send one raw JSON-RPC message; returns the response object (None for a notification)."""
        raw = message if isinstance(message, str | bytes) else orjson.dumps(message)
        dispatcher = self._dispatcher
        refused = await dispatcher.ledger.charge(self._caller, dispatcher.store.name)
        if refused is None:
            body = await handle_message(raw, self._dispatch)
        else:
            body = await handle_message(raw, partial(_refuse, refused))
        if body is None:
            return None
        response: dict[str, Any] = orjson.loads(body)
        return response

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Call a method and return its result.

        Raises:
            A2MRemoteError: the server answered with an error object.
        """
        request: dict[str, Any] = {"jsonrpc": "2.0", "id": next(self._ids), "method": method}
        if params is not None:
            request["params"] = params
        response = await self.send(request)
        assert response is not None
        if "error" in response:
            err = response["error"]
            raise A2MRemoteError(err["code"], err["message"], err.get("data"))
        return response["result"]
