"""``qbroker tui`` signs people in where the broker has an identity provider: the device
authorization grant (RFC 8628), a code to type in a browser.

    GET {broker}/v1/signin -> {issuer, clientId, scope}; the provider's discovery document
    a refresh token kept from last time -> a new access token, no question asked
    else POST device_authorization_endpoint -> "open URL and enter CODE"; poll the token
        endpoint (authorization_pending: wait; slow_down: wait 5 s longer) until the person
        has signed in, refused, or the code ran out

The access token is the client token of every websocket; the refresh token is kept in the
user's config directory (``$XDG_CONFIG_HOME/qbroker/sign-in.json``, else
``~/.config/qbroker/``), mode 0600 in a 0700 directory, for the next start. ``renew`` gets a
new access token when the broker closes a socket for an expired one; ``sign_out`` forgets
the kept token (and tells the provider, where it has a revocation endpoint).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TextIO

import httpx

DEVICE_GRANT: Final = "urn:ietf:params:oauth:grant-type:device_code"
TIMEOUT: Final = 10.0
SLOW_DOWN: Final = 5.0  # seconds added to the polling interval on slow_down (RFC 8628, 3.5)
RENEWED_LATELY: Final = 10.0  # seconds in which a second renewal takes the first one's token


class SignInError(Exception):
    """Signing in failed; the message says why, in a sentence."""


def kept_path() -> Path:
    """Where the refresh token is kept between runs."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "qbroker" / "sign-in.json"


def sign_in_settings(broker_url: str, http: httpx.Client) -> dict[str, str] | None:
    """The broker's GET /v1/signin, or None when people do not sign in there."""
    try:
        response = http.get(broker_url.rstrip("/") + "/v1/signin", timeout=TIMEOUT)
    except httpx.HTTPError as exc:
        raise SignInError(f"cannot reach the broker at {broker_url}: {exc}") from None
    if response.status_code == 404:
        return None
    if response.status_code != 200:
        raise SignInError(f"the broker's sign-in settings answered {response.status_code}")
    body: dict[str, str] = response.json()
    return body


@dataclass
class SignedIn:
    """A person's sign-in: the access token in use, renewed from the refresh token."""

    settings: dict[str, str]
    endpoints: dict[str, Any]
    token: str
    refresh_token: str
    http: httpx.Client
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _renewed_at: float = -float("inf")

    def renew(self) -> bool:
        """A new access token (True), or the sign-in is over (False, nothing kept any more).
        The inbox's socket and the session's close at once when the token runs out: the
        first renews, the second takes its token (a refresh token is used once)."""
        with self._lock:
            if time.monotonic() - self._renewed_at < RENEWED_LATELY:
                return bool(self.token)
            renewed = self._renew()
            self._renewed_at = time.monotonic()
            return renewed

    def _renew(self) -> bool:
        try:
            tokens = _token_call(
                self.http,
                self.endpoints,
                {
                    "grant_type": "refresh_token",
                    "refresh_token": self.refresh_token,
                    "client_id": self.settings["clientId"],
                },
            )
        except SignInError:
            _forget()
            self.token = ""
            return False
        self.token = tokens["access_token"]
        self.refresh_token = tokens.get("refresh_token") or self.refresh_token
        _keep(self.settings, self.refresh_token)
        return True


def sign_in(
    settings: dict[str, str],
    http: httpx.Client,
    out: TextIO,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> SignedIn:
    """Signed in: with the refresh token kept from last time, else with a device code."""
    endpoints = _discovery(settings, http)
    kept = _kept(settings)
    if kept:
        signed = SignedIn(settings, endpoints, "", kept, http)
        if signed.renew():
            return signed
        out.write("qbroker tui: your last sign-in has ended; sign in again.\n")
    return _device_flow(settings, endpoints, http, out, sleep)


def sign_out(settings: dict[str, str], http: httpx.Client) -> bool:
    """Forget the kept refresh token (telling the provider); whether there was one."""
    kept = _kept(settings)
    _forget()
    if not kept:
        return False
    try:
        endpoint = _discovery(settings, http).get("revocation_endpoint")
        if endpoint:
            http.post(
                endpoint,
                data={"token": kept, "token_type_hint": "refresh_token", "client_id": settings["clientId"]},
                timeout=TIMEOUT,
            )
    except (httpx.HTTPError, SignInError):
        pass  # forgotten here either way
    return True


def _device_flow(
    settings: dict[str, str], endpoints: dict[str, Any], http: httpx.Client, out: TextIO, sleep: Callable[[float], None]
) -> SignedIn:
    endpoint = endpoints.get("device_authorization_endpoint")
    if not endpoint:
        raise SignInError("the identity provider offers no device sign-in (no device_authorization_endpoint)")
    try:
        response = http.post(
            endpoint, data={"client_id": settings["clientId"], "scope": settings["scope"]}, timeout=TIMEOUT
        )
    except httpx.HTTPError as exc:
        raise SignInError(f"cannot reach the identity provider: {exc}") from None
    if response.status_code != 200:
        raise SignInError(f"the identity provider refused a device code: {_why(response)}")
    grant = response.json()
    where = grant.get("verification_uri_complete") or grant["verification_uri"]
    out.write(
        f"To sign in, open {grant['verification_uri']} in a browser\nand enter the code {grant['user_code']}\n"
        + (f"  (or open {where})\n" if where != grant["verification_uri"] else "")
        + "Waiting for you to sign in… (Ctrl-C stops)\n"
    )
    out.flush()
    interval = float(grant.get("interval") or 5)
    deadline = time.monotonic() + float(grant.get("expires_in") or 600)
    while time.monotonic() < deadline:
        sleep(interval)
        try:
            tokens = _token_call(
                http,
                endpoints,
                {"grant_type": DEVICE_GRANT, "device_code": grant["device_code"], "client_id": settings["clientId"]},
            )
        except _Pending as pending:
            if pending.code == "slow_down":
                interval += SLOW_DOWN
            continue
        signed = SignedIn(settings, endpoints, tokens["access_token"], tokens.get("refresh_token", ""), http)
        if signed.refresh_token:
            _keep(settings, signed.refresh_token)
        out.write("Signed in.\n")
        out.flush()
        return signed
    raise SignInError("the code ran out before anyone signed in with it; run the command again for a new one")


class _Pending(SignInError):
    """The device code is not signed in with yet (authorization_pending, slow_down)."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


def _discovery(settings: dict[str, str], http: httpx.Client) -> dict[str, Any]:
    url = settings["issuer"].rstrip("/") + "/.well-known/openid-configuration"
    try:
        response = http.get(url, timeout=TIMEOUT)
    except httpx.HTTPError as exc:
        raise SignInError(f"cannot reach the identity provider at {settings['issuer']}: {exc}") from None
    if response.status_code != 200:
        raise SignInError(f"the identity provider's discovery document answered {response.status_code}")
    document: dict[str, Any] = response.json()
    return document


def _token_call(http: httpx.Client, endpoints: dict[str, Any], form: dict[str, str]) -> dict[str, Any]:
    try:
        response = http.post(endpoints["token_endpoint"], data=form, timeout=TIMEOUT)
    except httpx.HTTPError as exc:
        raise SignInError(f"cannot reach the identity provider: {exc}") from None
    if response.status_code == 200:
        body: dict[str, Any] = response.json()
        if isinstance(body.get("access_token"), str):
            return body
        raise SignInError("the identity provider's answer has no access token")
    error = _error_code(response)
    if error in ("authorization_pending", "slow_down"):
        raise _Pending(error)
    if error == "access_denied":
        raise SignInError("the sign-in was refused in the browser")
    if error == "expired_token":
        raise SignInError("the code ran out before anyone signed in with it; run the command again for a new one")
    raise SignInError(f"the identity provider refused: {_why(response)}")


def _error_code(response: httpx.Response) -> str:
    try:
        return str(response.json().get("error", ""))
    except ValueError:
        return ""


def _why(response: httpx.Response) -> str:
    try:
        body = response.json()
        return str(body.get("error_description") or body.get("error") or response.status_code)
    except ValueError:
        return str(response.status_code)


def _kept(settings: dict[str, str]) -> str:
    """The refresh token kept for this provider and client, or ""."""
    try:
        kept = json.loads(kept_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    same = kept.get("issuer") == settings["issuer"] and kept.get("clientId") == settings["clientId"]
    token = kept.get("refreshToken")
    return token if same and isinstance(token, str) else ""


def _keep(settings: dict[str, str], refresh_token: str) -> None:
    """Write the refresh token, readable by this user only (0600, in a 0700 directory)."""
    path = kept_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    body = json.dumps({"issuer": settings["issuer"], "clientId": settings["clientId"], "refreshToken": refresh_token})
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # a file that existed keeps its mode through O_CREAT: set it anyway
        os.write(fd, body.encode("utf-8"))
    finally:
        os.close(fd)


def _forget() -> None:
    with contextlib.suppress(FileNotFoundError):
        kept_path().unlink()
