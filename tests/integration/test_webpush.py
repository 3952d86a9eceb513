"""Browser push end to end, against real brokers and a fake push service on 127.0.0.1
(tests/helpers/push_service.py checks the VAPID JWT and decrypts each push with the keys
of a device the test made, as a browser would).

- ``/v1/push/key`` and ``/v1/push/subscriptions``: the token, the body's rules and limits,
  the allow-list of push services, DELETE; 404 where no webpush route is configured;
- the VAPID key: generated once into the data dir (0600) and kept across restarts, or
  QBROKER_VAPID_PRIVATE_KEY, the same on every broker;
- a questionnaire started with nobody connected: one push per device across two brokers on
  Redis, encrypted for that device, its payload the public fields only (field by field);
  a device whose push service answers 410 (or 404) is dropped; a 503 is retried;
- the wait for a first client: long where a device is subscribed, the broker's own where
  the only route is web push and nobody subscribed (or only with a token revoked since);
- POST /v1/push/subscriptions rate-limited per token (429 rate_limited, Retry-After);
- every token checked on every use: a device subscribed with a token revoked since (by its
  jti, or by its holder's sub) is pushed nothing and dropped, on two brokers on Redis, while
  the other devices of the session get their push.
"""

from __future__ import annotations

import asyncio
import os
import stat
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import httpx
import jwt
import pytest

from broker.notify.vapid import generate_private_key
from broker.store.redis import RedisStore
from tests.helpers.processes import BrokerProcess, broker, broker_env, free_port, redis_server, token
from tests.helpers.push_service import PushService, push_service, unb64url
from tests.helpers.samples import new_sid, single, start_body
from tests.helpers.waiting import wait_until

PUBLIC_URL = "https://qbroker.example.test"
SUBJECT = "mailto:ops@example.test"
ROUTES = '[[route]]\nsessions = "push:*"\nkind = "webpush"\n'
PAYLOAD_KEYS = {"title", "body", "link", "session", "questionnaire"}


def _settings(service: PushService, routes_path: str, **extra: object) -> dict[str, Any]:
    return {
        "notify_config": routes_path,
        "push_services": service.origin,
        "public_url": PUBLIC_URL,
        "vapid_subject": SUBJECT,
        "notify_retry_delay": 0.3,
        "notify_timeout": 2,
        "client_wait": 1,
        "notify_client_wait": 30,
        **extra,
    }


@contextmanager
def _routes_file(text: str = ROUTES) -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="qbroker-push-") as directory:
        path = os.path.join(directory, "notify.toml")
        with open(path, "w") as handle:
            handle.write(text)
        yield path


def _subscribe(url: str, tok: str, subscription: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{url}/v1/push/subscriptions", json=subscription, headers={"Authorization": f"Bearer {tok}"})


def _revoke(url: str, body: dict[str, str]) -> None:
    admin = token("*", "admin", 600, sub="ops")
    response = httpx.post(f"{url}/v1/revocations", json=body, headers={"Authorization": f"Bearer {admin}"})
    assert response.status_code == 200, response.text


def _refused_on(processes: list[BrokerProcess], tok: str) -> None:
    """Wait until every broker refuses ``tok`` (each has read the revocation)."""
    for process in processes:

        def refused(url: str = process.url) -> bool:
            response = httpx.request(
                "DELETE",
                f"{url}/v1/push/subscriptions",
                json={"endpoint": "https://nowhere.example/x"},
                headers={"Authorization": f"Bearer {tok}"},
            )
            return response.status_code == 401

        wait_until(refused, timeout=5, what=f"{process.url} to refuse the revoked token")


def _holder(name: str) -> str:
    """A holder (sub) of this test's alone: a revocation by sub outlives the test."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


def _start(url: str, sid: str, wait: float = 0) -> httpx.Response:
    question = single("target", label="Deploy target", prompt="Where should v2.3 go?")
    return httpx.post(
        f"{url}/v1/sessions/{sid}/questionnaire",
        params={"wait": wait},
        json=start_body(question),
        headers={"Authorization": f"Bearer {token(sid, 'agent', sub='release-bot')}"},
        timeout=wait + 10,
    )


# --- the endpoints, on one broker with the memory store ------------------------------


@pytest.fixture(scope="module")
def memory_push() -> Iterator[tuple[BrokerProcess, PushService]]:
    with push_service() as service, _routes_file() as routes, broker(None, **_settings(service, routes)) as process:
        yield process, service


def test_the_key_is_the_broker_s_vapid_public_key_made_once_in_the_data_dir(
    memory_push: tuple[BrokerProcess, PushService],
) -> None:
    process, _ = memory_push
    response = httpx.get(f"{process.url}/v1/push/key")
    assert response.status_code == 200, response.text
    key = response.json()["publicKey"]
    assert set(response.json()) == {"publicKey"}
    raw = unb64url(key)
    assert len(raw) == 65 and raw[0] == 4 and "=" not in key  # applicationServerKey: uncompressed P-256
    kept = os.path.join(process.data_dir, "vapid-private-key")
    assert stat.S_IMODE(os.stat(kept).st_mode) == 0o600
    # A restart on the same data dir keeps the key (subscriptions made with it still work).
    process.stop()
    process.start()
    assert httpx.get(f"{process.url}/v1/push/key").json()["publicKey"] == key


def test_a_subscription_needs_a_client_token(memory_push: tuple[BrokerProcess, PushService]) -> None:
    process, service = memory_push
    subscription = service.device("tokenless").subscription()
    url = f"{process.url}/v1/push/subscriptions"
    assert httpx.post(url, json=subscription).status_code == 401
    assert _subscribe(process.url, "not-a-token", subscription).status_code == 401
    agent = _subscribe(process.url, token("push:a", "agent"), subscription)
    assert agent.status_code == 401, agent.text
    expired = _subscribe(process.url, token("push:a", "client", ttl=-10), subscription)
    assert expired.status_code == 401
    assert expired.json()["error"]["code"] == "unauthorized"


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda s: s.update(endpoint="http://10.0.0.1:6379/push/x"), "is not a push service"),
        (lambda s: s.update(endpoint="not a url"), "push service"),
        (lambda s: s.update(endpoint="https://[x/"), "not a URL"),
        (lambda s: s.update(endpoint="https://[::1/push"), "not a URL"),
        (lambda s: s.update(endpoint="x" * 2000), "up to 1024"),
        (lambda s: s["keys"].update(p256dh="BAAA"), "p256dh"),
        (lambda s: s["keys"].update(p256dh="B" + "A" * 86), "not a point on P-256"),
        (lambda s: s["keys"].update(auth="short"), "auth"),
        (lambda s: s.pop("keys"), "keys"),
        (lambda s: s.update(expirationTime="soon"), "expirationTime"),
        (lambda s: s.update(expirationTime=1000), "expired already"),
    ],
)
def test_a_subscription_the_broker_cannot_use_is_refused_saying_why(
    memory_push: tuple[BrokerProcess, PushService], change: Any, words: str
) -> None:
    process, service = memory_push
    subscription = service.device("bad").subscription()
    change(subscription)
    response = _subscribe(process.url, token("push:*", "client"), subscription)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_arguments"
    assert words in response.json()["error"]["message"]


def test_a_body_over_4_kib_or_not_json_is_refused(memory_push: tuple[BrokerProcess, PushService]) -> None:
    process, service = memory_push
    headers = {"Authorization": f"Bearer {token('push:*', 'client')}"}
    big = {**service.device("big").subscription(), "padding": "x" * 5000}
    response = httpx.post(f"{process.url}/v1/push/subscriptions", json=big, headers=headers)
    assert response.status_code == 413 and response.json()["error"]["code"] == "payload_too_large"
    response = httpx.post(f"{process.url}/v1/push/subscriptions", content=b"{nope", headers=headers)
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_arguments"


def test_subscribe_then_delete_under_the_token_s_scope(memory_push: tuple[BrokerProcess, PushService]) -> None:
    process, service = memory_push
    device = service.device("laptop")
    tok = token("push:team-*", "client", ttl=3600, sub="alice")
    before = time.time()
    response = _subscribe(process.url, tok, device.subscription())
    assert response.status_code == 201, response.text
    assert response.json()["scope"] == "push:team-*"
    assert before + 3600 - 5 <= response.json()["expiresAt"] <= time.time() + 3601  # the token's expiry
    url = f"{process.url}/v1/push/subscriptions"
    other_scope = httpx.request(
        "DELETE",
        url,
        json={"endpoint": device.endpoint},
        headers={"Authorization": f"Bearer {token('push:x', 'client')}"},
    )
    assert other_scope.status_code == 404 and other_scope.json()["error"]["code"] == "not_found"
    headers = {"Authorization": f"Bearer {tok}"}
    assert httpx.request("DELETE", url, json={"endpoint": device.endpoint}, headers=headers).status_code == 204
    assert httpx.request("DELETE", url, json={"endpoint": device.endpoint}, headers=headers).status_code == 404


def test_other_methods_are_405_naming_the_allowed_ones(memory_push: tuple[BrokerProcess, PushService]) -> None:
    process, _ = memory_push
    response = httpx.put(f"{process.url}/v1/push/subscriptions")
    assert response.status_code == 405 and response.headers["allow"] == "POST, DELETE"
    response = httpx.post(f"{process.url}/v1/push/key")
    assert response.status_code == 405 and response.headers["allow"] == "GET, HEAD"


def test_posting_subscriptions_is_rate_limited_per_token() -> None:
    limits = {"push_subscribe_per_minute": 60, "push_subscribe_burst": 3}  # one a second, three at once
    with push_service() as service, _routes_file() as routes, broker(None, **_settings(service, routes, **limits)) as p:
        sid = new_sid("push:eager")
        eager, other = token(sid, "client", 3600, sub="eager"), token(sid, "client", 3600, sub="eager")
        device = service.device("eager").subscription()
        assert [_subscribe(p.url, eager, device).status_code for _ in range(3)] == [201, 201, 201]
        refused = _subscribe(p.url, eager, device)
        assert refused.status_code == 429, refused.text
        assert refused.headers["retry-after"] == "1"
        assert set(refused.json()) == {"error"} and refused.json()["error"]["code"] == "rate_limited"
        assert refused.json()["error"]["message"].startswith("push: too many subscriptions posted with this token")
        # Invalid bodies count too (they cost the same to refuse), and the limit is the token's:
        # another token of the same holder and scope posts, and the first may still DELETE.
        assert _subscribe(p.url, eager, {"endpoint": "nope"}).status_code == 429
        assert _subscribe(p.url, other, service.device("other").subscription()).status_code == 201
        headers = {"Authorization": f"Bearer {eager}"}
        deleted = httpx.request(
            "DELETE", f"{p.url}/v1/push/subscriptions", json={"endpoint": device["endpoint"]}, headers=headers
        )
        assert deleted.status_code == 204, deleted.text
        time.sleep(1.1)  # Retry-After: then one more is allowed
        assert _subscribe(p.url, eager, device).status_code == 201
        assert _subscribe(p.url, eager, device).status_code == 429


def test_without_a_webpush_route_there_is_no_key_and_no_subscription() -> None:
    with broker() as process:
        response = httpx.get(f"{process.url}/v1/push/key")
        assert response.status_code == 404 and response.json()["error"]["code"] == "push_not_configured"
        posted = _subscribe(process.url, token("s", "client"), {"endpoint": "https://fcm.googleapis.com/x"})
        assert posted.status_code == 404


def test_the_wait_for_a_first_client_is_long_only_where_a_device_may_be_pushed(
    memory_push: tuple[BrokerProcess, PushService],
) -> None:
    process, service = memory_push
    nobody = new_sid("push:lonely")
    started = time.monotonic()
    response = _start(process.url, nobody, wait=10)
    assert response.status_code == 200, response.text
    assert response.json()["details"]["cancellationReason"] == "ui_unavailable"
    assert time.monotonic() - started < 6  # QBROKER_CLIENT_WAIT (1 s), not the 30 s of a route

    subscribed = new_sid("push:waited")
    assert (
        _subscribe(process.url, token(subscribed, "client"), service.device("waiter").subscription()).status_code == 201
    )
    response = _start(process.url, subscribed, wait=3)
    assert response.status_code == 202, response.text  # still waiting for the person, after 3 s


def _kept_endpoints(redis_url: str, session_id: str) -> set[str]:
    """The endpoints the brokers' Redis keeps for a session (read as a broker reads them)."""

    async def read() -> set[str]:
        store = RedisStore(redis_url, 60.0)
        try:
            return {s.endpoint for s in await store.push_subscriptions(session_id, time.time())}
        finally:
            await store.close()

    return asyncio.run(read())


# --- delivery, from two brokers on Redis ---------------------------------------------


@pytest.fixture(scope="module")
def redis_push() -> Iterator[tuple[list[BrokerProcess], PushService, str]]:
    with ExitStack() as stack:
        server = stack.enter_context(redis_server())
        service = stack.enter_context(push_service())
        routes = stack.enter_context(_routes_file())
        directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="qbroker-push-"))
        key = generate_private_key()  # QBROKER_VAPID_PRIVATE_KEY: every broker signs with it
        processes = []
        for number in range(2):
            data_dir = os.path.join(directory, f"broker-{number}")
            os.mkdir(data_dir)
            env = broker_env(data_dir, server.url, **_settings(service, routes, vapid_private_key=key))
            process = BrokerProcess(free_port(), env, data_dir).start()
            stack.callback(process.stop)
            processes.append(process)
        yield processes, service, server.url


def test_both_brokers_give_the_configured_key(redis_push: tuple[list[BrokerProcess], PushService, str]) -> None:
    processes, _, _ = redis_push
    keys = {httpx.get(f"{p.url}/v1/push/key").json()["publicKey"] for p in processes}
    assert len(keys) == 1
    assert not os.path.exists(os.path.join(processes[0].data_dir, "vapid-private-key"))


@pytest.mark.floors  # at the dependency floors too: pywebpush's encryption and py-vapid's signature
def test_a_waiting_questionnaire_is_pushed_once_to_each_device_encrypted_for_it(
    redis_push: tuple[list[BrokerProcess], PushService, str],
) -> None:
    processes, service, _ = redis_push
    sid = new_sid("push:team-a")
    phone, laptop = service.device("phone"), service.device("laptop")
    # One device for the whole team (a pattern token, posted to one broker), one for this session
    # alone (posted to the other); the phone posts twice (a second visit): still one device.
    pattern = token("push:team-*", "client", ttl=3600, sub="alice")
    assert _subscribe(processes[1].url, pattern, phone.subscription()).status_code == 201
    assert _subscribe(processes[0].url, pattern, phone.subscription()).status_code == 201
    assert _subscribe(processes[1].url, token(sid, "client", sub="alice"), laptop.subscription()).status_code == 201

    response = _start(processes[0].url, sid)
    assert response.status_code == 202, response.text
    questionnaire = response.json()["questionnaireId"]
    key = httpx.get(f"{processes[0].url}/v1/push/key").json()["publicKey"]

    for device in ("phone", "laptop"):
        (push,) = service.wait_for(1, device=device)
        assert push.problem is None, push.problem
        assert push.status == 201
        assert push.vapid_key == key  # signed with the key the page subscribed with
        assert push.claims is not None and push.claims["aud"] == service.origin and push.claims["sub"] == SUBJECT
        assert set(push.payload) == PAYLOAD_KEYS, push.payload
        assert push.payload["session"] == sid
        assert push.payload["questionnaire"] == questionnaire
        assert push.payload["link"] == f"{PUBLIC_URL}/#session={sid}"
        assert push.payload["title"] == "release-bot has 1 question for you"
        assert "Deploy target" in push.payload["body"] and "Where should v2.3 go?" in push.payload["body"]
        assert push.headers["TTL"] == "3600" and push.headers["Urgency"] == "high"
        assert len(push.headers["Topic"]) <= 32
    time.sleep(1.5)  # (anything more would have come by now: the retry delay is 0.3 s)
    assert len(service.to("phone")) == 1 and len(service.to("laptop")) == 1


def test_a_device_whose_push_service_says_gone_is_dropped(
    redis_push: tuple[list[BrokerProcess], PushService, str],
) -> None:
    processes, service, redis_url = redis_push
    for status in (410, 404):
        sid = new_sid("push:gone")
        gone, kept_device = service.device(f"gone-{status}", status), service.device(f"kept-{status}")
        tok = token(sid, "client")
        for device in (gone, kept_device):
            assert _subscribe(processes[1].url, tok, device.subscription()).status_code == 201
        assert _start(processes[0].url, sid).status_code == 202
        assert service.wait_for(1, device=f"gone-{status}")[0].status == status
        assert service.wait_for(1, device=f"kept-{status}")[0].status == 201

        wait_until(
            lambda sid=sid, kept=kept_device.endpoint: _kept_endpoints(redis_url, sid) == {kept},
            timeout=10,
            what=f"the subscription answered {status} to be dropped",
        )
        assert len(service.to(f"gone-{status}")) == 1  # not retried


def test_a_push_service_that_fails_is_retried_for_that_device_only(
    redis_push: tuple[list[BrokerProcess], PushService, str],
) -> None:
    processes, service, _ = redis_push
    sid = new_sid("push:flaky")
    flaky, steady = service.device("flaky", 503, 503), service.device("steady")
    tok = token(sid, "client")
    for device in (flaky, steady):
        assert _subscribe(processes[0].url, tok, device.subscription()).status_code == 201
    assert _start(processes[0].url, sid).status_code == 202
    pushes = service.wait_for(3, device="flaky")
    assert [p.status for p in pushes] == [503, 503, 201]
    time.sleep(1.0)
    assert len(service.to("steady")) == 1  # the retries went to the device that failed only


def test_the_wait_is_the_broker_s_own_where_the_only_device_s_token_was_revoked(
    memory_push: tuple[BrokerProcess, PushService],
) -> None:
    process, service = memory_push
    sid = new_sid("push:revoked-wait")
    tok = token(sid, "client", 3600, sub=_holder("carol"))
    assert _subscribe(process.url, tok, service.device("revoked-waiter").subscription()).status_code == 201
    _revoke(process.url, {"jti": jwt.decode(tok, options={"verify_signature": False})["jti"]})
    _refused_on([process], tok)
    started = time.monotonic()
    response = _start(process.url, sid, wait=5)
    assert response.status_code == 200, response.text  # not 202: nobody can be brought
    assert response.json()["details"]["cancellationReason"] == "ui_unavailable"
    assert time.monotonic() - started < 4  # QBROKER_CLIENT_WAIT (1 s), not the 30 s of a route
    assert service.to("revoked-waiter") == []


def test_a_device_subscribed_with_a_token_revoked_by_jti_is_pushed_nothing_and_dropped(
    redis_push: tuple[list[BrokerProcess], PushService, str],
) -> None:
    processes, service, redis_url = redis_push
    sid = new_sid("push:revoked-jti")
    alice, bob = _holder("alice"), _holder("bob")
    revoked, alice_other, bob_token = (token(sid, "client", 3600, sub=holder) for holder in (alice, alice, bob))
    doomed, kept, bobs = service.device("jti-doomed"), service.device("jti-alice-other"), service.device("jti-bob")
    assert _subscribe(processes[1].url, revoked, doomed.subscription()).status_code == 201
    assert _subscribe(processes[0].url, alice_other, kept.subscription()).status_code == 201
    assert _subscribe(processes[1].url, bob_token, bobs.subscription()).status_code == 201

    _revoke(processes[0].url, {"jti": jwt.decode(revoked, options={"verify_signature": False})["jti"]})
    _refused_on(processes, revoked)
    assert _start(processes[1].url, sid).status_code == 202

    # The devices of the tokens still valid get the push: alice's other one (one token of
    # hers was revoked, not her), and bob's.
    for device in ("jti-alice-other", "jti-bob"):
        assert service.wait_for(1, device=device)[0].status == 201
    wait_until(
        lambda: _kept_endpoints(redis_url, sid) == {kept.endpoint, bobs.endpoint},
        timeout=10,
        what="the device of the revoked token to be dropped",
    )
    time.sleep(1.0)  # (a retry would have come by now: the retry delay is 0.3 s)
    assert service.to("jti-doomed") == []


def test_the_devices_of_a_holder_revoked_by_sub_are_pushed_nothing_and_dropped(
    redis_push: tuple[list[BrokerProcess], PushService, str],
) -> None:
    processes, service, redis_url = redis_push
    sid = new_sid("push:revoked-sub")
    alice, bob = _holder("alice"), _holder("bob")
    # Two devices of alice's: one for this session, one for every session of the pattern.
    phone_token, laptop_token = (
        token(sid, "client", 3600, sub=alice),
        token("push:revoked-*", "client", 3600, sub=alice),
    )
    phone, laptop, bobs = service.device("sub-phone"), service.device("sub-laptop"), service.device("sub-bob")
    assert _subscribe(processes[0].url, phone_token, phone.subscription()).status_code == 201
    assert _subscribe(processes[1].url, laptop_token, laptop.subscription()).status_code == 201
    assert _subscribe(processes[0].url, token(sid, "client", 3600, sub=bob), bobs.subscription()).status_code == 201

    _revoke(processes[1].url, {"sub": alice})
    _refused_on(processes, phone_token)
    # A token minted for her after the revocation is valid, and so is the device it subscribes.
    fresh = service.device("sub-fresh")
    assert _subscribe(processes[1].url, token(sid, "client", 3600, sub=alice), fresh.subscription()).status_code == 201
    assert _start(processes[0].url, sid).status_code == 202

    for device in ("sub-bob", "sub-fresh"):
        assert service.wait_for(1, device=device)[0].status == 201
    wait_until(
        lambda: _kept_endpoints(redis_url, sid) == {bobs.endpoint, fresh.endpoint},
        timeout=10,
        what="the revoked holder's devices to be dropped",
    )
    time.sleep(1.0)
    assert service.to("sub-phone") == [] and service.to("sub-laptop") == []
