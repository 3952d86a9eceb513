"""The operator endpoints: ``POST /v1/revocations``, for admin tokens only.

``{"jti": ID}`` revokes one token; ``{"sub": NAME}`` every token of that holder issued
before now. Either may say ``"exp"``: the latest expiry of the tokens it covers (``qbroker
token --json`` prints a token's), after which the revocation is dropped; without it the
revocation is kept for the longest lifetime a token may have (broker/core/revocations.py).
An ``exp`` not in the future is refused (broker/tokens/checks.py): it would drop the revocation
at once and leave its tokens working.
Answers ``200 {"jti" | "sub", "revokedAt", "keptUntil"}``; errors in the agent API's shape.

Rules: no token or a bad one is 401; a valid agent or client token is 403 (it is a token,
but not the operator's); a body that is not exactly one of the two shapes is 400.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Final

import orjson
from starlette.types import Receive, Scope, Send

from broker.core.errors import BrokerError
from broker.http.kit import ClientGone, bearer_token, error_body, header, read_body, respond
from broker.service import Broker
from broker.store.base import StoreUnavailable
from broker.tokens.claims import jti_problem, sub_problem

log = logging.getLogger("qbroker.operator")

REVOCATIONS_PATH: Final = "/v1/revocations"
MAX_BODY_BYTES: Final = 4096
_KEYS: Final = frozenset({"jti", "sub", "exp"})


class OperatorAPI:
    """The ASGI endpoint for ``REVOCATIONS_PATH``."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        extra: list[tuple[bytes, bytes]] = []
        try:
            if scope["method"] != "POST":
                status = 405
                body = error_body("method_not_allowed", f"revocations: {scope['method']} is not allowed; use POST")
                extra.append((b"allow", b"POST"))
            else:
                status, body = 200, orjson.dumps(await self._revoke(scope, receive))
        except BrokerError as exc:
            self.broker.metrics.errors.labels(exc.code).inc()
            status, body = exc.http_status, error_body(exc.code, f"revocations: {exc.message}")
        except StoreUnavailable:
            log.warning("store unavailable", extra={"path": scope["path"]})
            status = 503
            body = error_body("store_unavailable", "revocations: the state store is unavailable; retry shortly")
        except ClientGone:
            return
        except Exception:
            log.exception("revocation failed")
            status, body = 500, error_body("internal_error", "revocations: the broker failed on this call; see its log")
        await respond(send, status, body, extra)

    async def _revoke(self, scope: Scope, receive: Receive) -> dict[str, Any]:
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        token = bearer_token(header(headers, b"authorization"))
        if token is None:
            raise BrokerError("unauthorized", "missing 'Authorization: Bearer <admin token>'")
        claims = await self.broker.tokens.verify(token, role=None)
        if claims.role != "admin":
            raise BrokerError("forbidden", f"only an admin token may revoke tokens, not {claims.role} tokens")
        too_large = f"the request body is larger than {MAX_BODY_BYTES} bytes"
        body = await read_body(receive, header(headers, b"content-length"), MAX_BODY_BYTES, too_large)
        jti, sub, exp = _parse(body)
        revocation = await self.broker.tokens.revoke(jti=jti, sub=sub, exp=exp)
        log.info(
            "token revoked" if jti is not None else "tokens of a holder revoked",
            extra={"jti": jti, "sub": sub, "by": claims.sub, "until": revocation.until},
        )
        named = {"jti": jti} if jti is not None else {"sub": sub}
        return {**named, "revokedAt": revocation.at, "keptUntil": revocation.until}


def _invalid(message: str) -> BrokerError:
    return BrokerError("invalid_arguments", message)


def _parse(body: bytes) -> tuple[str | None, str | None, float | None]:
    """``(jti, sub, exp)`` of a body of exactly one of the two shapes; raises ``invalid``."""
    shapes = 'the body must be {"jti": ID} or {"sub": NAME}, with an optional "exp" (Unix seconds)'
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise _invalid(f"{shapes}; it is not JSON") from None
    if not isinstance(value, dict):
        raise _invalid(f"{shapes}; it is not an object")
    unknown = sorted(set(value) - _KEYS)
    if unknown:
        raise _invalid(f"{shapes}; unknown key(s) {', '.join(repr(key[:40]) for key in unknown[:5])}")
    if ("jti" in value) == ("sub" in value):
        raise _invalid(f"{shapes}; give exactly one of jti and sub")
    jti, sub, exp = value.get("jti"), value.get("sub"), value.get("exp")
    problem = jti_problem(jti) if "jti" in value else sub_problem(sub)
    if problem is not None:
        raise _invalid(problem)
    if "exp" in value and (
        not isinstance(exp, (int, float)) or isinstance(exp, bool) or not math.isfinite(exp) or exp < 0
    ):
        raise _invalid("exp must be a number of Unix seconds")
    return jti, sub, None if exp is None else float(exp)
