"""Who is calling, and which documents that caller may see (A2M §6; SECURITY.md).

A :class:`Caller` travels with every call from the transport to the store. Its
``principal`` is set only by something that authenticated the caller (the HTTP
transport's :class:`gateway.security.auth.Authenticator`, or an embedding application
handing one to the in-process client); nothing in a request body can set it.

A store's :class:`ScopePolicy` turns the caller into engine conditions that are
ANDed into every recall, timeline and fetch, so each connector applies them the
way it applies ``where`` (they are ordinary :class:`connectors.base.Condition`s).
The rules, per §6:

- **Authenticated principal** (HTTP with ``server.auth``, or in-process with a
  principal): each ``scope.filters`` entry requires the engine field to hold
  one of the principal's claim values. A principal lacking a claim sees
  nothing. A body ``owner`` must equal the principal's ``scope.owner_claim``
  (else SCOPE_DENIED); when it does and ``mapping.owner`` is set, it narrows
  to the caller's own records. ``scopes`` is declared when the store enforces
  something (filters, credential forwarding, or an owner field).
- **Local transport, no principal** (stdio, in-process): ``owner`` is taken at
  face value and filters ``mapping.owner`` (§6: same trust domain). ``scopes``
  is declared when ``mapping.owner`` is set. Claim filters have no claims to
  read, so such a store returns nothing (fail closed).
- **Network, unauthenticated** (HTTP ``auth.mode: none``): ``owner`` is
  ignored, ``scopes`` never declared (§6: a server that cannot authenticate its
  callers MUST NOT advertise it); claim filters fail closed as above.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import SecretStr

from connectors.base import Condition, Connector, Scalar, value_at
from gateway.a2m.errors import ScopeDenied
from gateway.config import StoreConfig

MAX_CLAIM_VALUES = 4096
"""More values than this in one claim is not a group list but an attack on the engine."""


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller: a subject, its claims, and how it proved them."""

    subject: str
    claims: Mapping[str, Any]
    method: str
    """How the caller proved who it is: the credential kind (`api_key`, `jwt`, or a kind a
    verifier adds); `embedded`: an application using the in-process binding authenticated
    its user itself."""
    credential: SecretStr | None = field(default=None, repr=False, compare=False)
    """The bearer token as presented, set only by a kind whose tokens an engine can check
    (a JWT); kept only for stores that forward it to the engine."""

    @property
    def label(self) -> str:
        """How the principal appears in audit lines: never a credential.

        `/`, not `:`, so the log scrubber's `api_key: <value>` rule leaves it alone.
        """
        # Printable only: a subject is issuer-chosen text, and must not forge log lines.
        subject = "".join(c if c.isprintable() else "?" for c in self.subject)
        return f"{self.method}/{subject}"


@dataclass(frozen=True, slots=True)
class Caller:
    """The transport's word on who sent a call."""

    network: bool = False
    """True over HTTP: a client-supplied owner is never trusted (§6)."""
    principal: Principal | None = None
    client: str | None = None
    """What the client calls itself (gateway.observability.client_name): audited, never trusted."""

    @property
    def rate_key(self) -> str | None:
        """The bucket a rate limit charges: the exact subject, one for all anonymous, none locally.

        The subject as issued (not its printable log label, and whatever credential
        proved it): an API key and a JWT of one subject share a bucket, two subjects
        never do.
        """
        if self.principal is not None:
            return "sub:" + self.principal.subject
        return "anonymous" if self.network else None

    @property
    def label(self) -> str:
        if self.principal is not None:
            return self.principal.label
        return "anonymous" if self.network else "local"


LOCAL = Caller()
"""stdio and in-process without a principal: the client's own trust domain."""


@runtime_checkable
class CredentialForwarding(Protocol):
    """A connector that can read with the caller's credential (``scope.forward_credential``).

    ``for_caller`` returns a connector for one call whose every engine request
    carries ``Authorization: <authorization>`` instead of the store's own
    credential, sharing the open client's connection pool and what ``open()``
    learned; it does no I/O.
    """

    def for_caller(self, authorization: str) -> Connector: ...


class NothingVisible(Exception):
    """The caller's scope admits no document: the answer is empty, no engine call needed."""


def claim_values(claims: Mapping[str, Any], path: str) -> tuple[Scalar, ...]:
    """A claim's scalar values: a scalar gives one, a list its scalars, anything else none.

    The literal name is tried first (claims such as ``https://example.com/groups``
    contain dots), then a dotted path into nested objects (``realm_access.roles``).
    """
    value = value_at(claims, path)
    items = value if isinstance(value, list) else [value]
    # An empty string names no group or tenant: it must not match a document whose ACL is "".
    out = [v for v in items if isinstance(v, str | int | float | bool) and v != ""]
    return tuple(dict.fromkeys(out))


def under_prefix(value: Scalar, prefix: str) -> str | None:
    """A string claim value without `prefix`; None when it lacks it or nothing is left.

    Keycloak's group claim holds full paths (``/tenants/A``): a leaf name alone would let
    ``/A`` or ``/other/A``, different groups, pass as tenant ``A``.
    """
    if not isinstance(value, str) or not value.startswith(prefix):
        return None
    return value[len(prefix) :] or None


@dataclass(frozen=True, slots=True)
class _Source:
    """One claim a filter reads, with its prefix rules (from a ClaimSource)."""

    claim: str
    prefix: str
    strip_prefix: str


@dataclass(frozen=True, slots=True)
class _Rule:
    """One scope filter, compiled once: the engine field and the claims it reads."""

    field: str
    sources: tuple[_Source, ...]

    def values(self, claims: Mapping[str, Any]) -> list[Scalar]:
        """The distinct values this rule admits for ``claims``, in claim order."""
        values: list[Scalar] = []
        for source in self.sources:
            for v in claim_values(claims, source.claim):
                if source.strip_prefix:
                    stripped = under_prefix(v, source.strip_prefix)
                    if stripped is None:
                        continue
                    v = stripped
                values.append(f"{source.prefix}{v}" if source.prefix else v)
        return list(dict.fromkeys(values))


class ScopePolicy:
    """One store's document-level security, applied to every read.

    The store's config does not change while it serves, so its filters are compiled
    once here and each call only reads the caller's claims.
    """

    def __init__(self, config: StoreConfig) -> None:
        scope = config.scope
        self._owner_field = config.mapping.owner
        self._owner_claim = scope.owner_claim
        self._enforced = scope.enforced
        self._forward = scope.forward_credential
        self._rules = tuple(
            _Rule(f.field, tuple(_Source(c.claim, c.prefix, c.strip_prefix) for c in f.claims))
            for f in scope.filters
        )
        self._allow = {claim: frozenset(values) for claim, values in scope.allow.items()}
        # Who sees `scopes` declared, per kind of caller without a principal.
        self._declared_for_principal = self._enforced or self._owner_field is not None
        self._declared_locally = self._owner_field is not None

    def may_use(self, caller: Caller) -> bool:
        """Whether `caller` may use this store at all (``scope.allow``).

        With no `allow`, everyone who reaches the store may. With one, only a principal
        holding one of the listed values in one of the listed claims: a caller without
        a principal (anonymous HTTP, stdio, a local recall) may not (fail closed).
        """
        if not self._allow:
            return True
        principal = caller.principal
        if principal is None:
            return False
        return any(
            not allowed.isdisjoint(claim_values(principal.claims, claim))
            for claim, allowed in self._allow.items()
        )

    def declared(self, caller: Caller) -> bool:
        """Whether `scopes` is true for this caller (docs/protocol.md).

        For a principal it is whenever the store narrows by it: claim filters,
        credential forwarding, or an owner field that `owner` filters.
        """
        if caller.principal is not None:
            return self._declared_for_principal
        if caller.network:
            return False
        return self._declared_locally

    def conditions(self, caller: Caller, owner: str | None) -> tuple[Condition, ...]:
        """The conditions every engine request of this call must carry.

        Raises:
            ScopeDenied: an authenticated caller asked for an owner other than itself,
                or the store forwards credentials and the caller has none to forward.
            NothingVisible: the caller's scope admits no document.
        """
        principal = caller.principal
        if principal is None:
            if self._enforced:
                # Claim filters without claims, or engine security without a token to
                # forward: fail closed rather than read with the gateway's own rights.
                raise NothingVisible
            if not caller.network and owner is not None and self._owner_field is not None:
                return (Condition(field=self._owner_field, values=(owner,)),)
            return ()

        if self._forward and principal.credential is None:
            raise ScopeDenied(
                "This store passes the caller's token to the search engine; "
                "an API-key credential is not one the engine can check"
            )
        conds: list[Condition] = []
        for rule in self._rules:
            values = rule.values(principal.claims)
            if not values or len(values) > MAX_CLAIM_VALUES:
                raise NothingVisible
            conds.append(Condition(field=rule.field, values=tuple(values)))
        if owner is not None and self._declared_for_principal:
            mine = claim_values(principal.claims, self._owner_claim)
            if len(mine) != 1 or str(mine[0]) != owner:
                # Refused rather than ignored (§6 allows both): a client that believes it
                # is reading another owner's records must learn that it is not.
                raise ScopeDenied(
                    "owner does not match the authenticated principal",
                    data={"param": "owner"},
                )
            if self._owner_field is not None:
                conds.append(Condition(field=self._owner_field, values=(owner,)))
        return tuple(conds)

    def engine_authorization(self, caller: Caller) -> str | None:
        """The Authorization header to send the engine for this caller, when forwarding."""
        if not self._forward or caller.principal is None:
            return None
        credential = caller.principal.credential
        if credential is None:
            return None
        return f"Bearer {credential.get_secret_value()}"
