"""Web push in Chromium (Debian's, headless, through Playwright): the page's "Notify me on this
device", its service worker, and a push delivered to the worker.

What is real and what is stood in for:

- real: the page's module code, the permission request from the click (granted to the test's
  origin up front), the service worker's registration (sw.js from the broker, scope "/"),
  the POST of the subscription to the broker, the broker's encrypted push to the fake push
  service (tests/helpers/push_service.py checks the VAPID JWT and decrypts it), the worker's
  ``push`` handler showing a notification (seen through ``registration.getNotifications()``),
  the push delivered through the DevTools protocol (``ServiceWorker.deliverPushMessage``);
- stood in for: ``PushManager.prototype.subscribe``/``getSubscription``. Headless Chromium
  subscribes through Google's push service, which a test offline cannot reach, so the page
  gets a subscription whose endpoint is the fake push service and whose keys the test made.
- not exercised here: a click on the notification (the DevTools protocol cannot click one);
  the click's rules (which tab is focused or navigated, never a page outside the worker's
  scope) are sw-logic.js's, tested under node (tests/web/push.test.mjs).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.helpers.browser import new_context
from tests.helpers.processes import BrokerProcess, broker, token
from tests.helpers.push_service import Device, PushService, push_service
from tests.helpers.samples import new_sid, single, start_body
from tests.helpers.waiting import wait_until

# The page's PushManager, stood in for (see above): subscribe() hands out the device the test
# made (window.__pushDevice), getSubscription() what was subscribed on this page so far.
PUSH_MANAGER_STUB = """
(() => {
  const made = (device) => ({
    endpoint: device.endpoint,
    expirationTime: null,
    options: {},
    toJSON() { return { endpoint: device.endpoint, expirationTime: null, keys: device.keys }; },
    unsubscribe() { current = null; window.localStorage.removeItem("__pushSubscribed"); return Promise.resolve(true); },
  });
  // (kept across the pages of the context, as a browser keeps its subscription)
  let current = window.localStorage.getItem("__pushSubscribed") ? made(window.__pushDevice) : null;
  window.__pushCalls = [];
  PushManager.prototype.subscribe = function (options) {
    const key = options && options.applicationServerKey;
    window.__pushCalls.push({ userVisibleOnly: options.userVisibleOnly, keyLength: key ? key.byteLength : 0,
                              keyFirst: key ? new Uint8Array(key)[0] : null });
    current = made(window.__pushDevice);
    window.localStorage.setItem("__pushSubscribed", "1");
    return Promise.resolve(current);
  };
  PushManager.prototype.getSubscription = function () { return Promise.resolve(current); };
})();
"""


@pytest.fixture(scope="module")
def push_broker() -> Iterator[tuple[BrokerProcess, PushService]]:
    with push_service() as service, tempfile.TemporaryDirectory(prefix="qbroker-push-") as directory:
        routes = os.path.join(directory, "notify.toml")
        with open(routes, "w") as handle:
            handle.write('[[route]]\nsessions = "*"\nkind = "webpush"\n')
        settings: dict[str, Any] = {
            "notify_config": routes,
            "push_services": service.origin,
            "vapid_subject": "mailto:ops@example.test",
            "client_wait": 120,
        }
        with broker(None, **settings) as process:
            yield process, service


def _device_for_page(device: Device) -> dict[str, Any]:
    subscription = device.subscription()
    return {"endpoint": subscription["endpoint"], "keys": subscription["keys"]}


def test_notify_me_subscribes_and_a_push_shows_a_notification(
    chromium: Browser, push_broker: tuple[BrokerProcess, PushService]
) -> None:
    process, service = push_broker
    sid = new_sid("pushed")
    device = service.device("chromium")
    context = new_context(chromium)
    context.grant_permissions(["notifications"], origin=process.url)
    context.add_init_script(f"window.__pushDevice = {json.dumps(_device_for_page(device))};")
    context.add_init_script(PUSH_MANAGER_STUB)
    errors: list[str] = []
    page: Page = context.new_page()
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        cdp = context.new_cdp_session(page)
        registrations: list[dict[str, Any]] = []
        cdp.on("ServiceWorker.workerRegistrationUpdated", lambda event: registrations.extend(event["registrations"]))
        cdp.send("ServiceWorker.enable")

        page.goto(f"{process.url}/#session={sid}&token={token(sid, 'client', ttl=3600, sub='alice')}")
        button = page.locator("#push-toggle")
        expect(button).to_be_visible()
        expect(button).to_have_text("Notify me on this device")
        button.click()
        expect(button).to_have_text("Stop notifications on this device")
        calls = page.evaluate("window.__pushCalls")
        assert calls == [{"userVisibleOnly": True, "keyLength": 65, "keyFirst": 4}]  # the broker's VAPID key

        # The worker registered, from the page's root, controlling it.
        scope = page.evaluate("navigator.serviceWorker.ready.then((r) => r.scope)")
        assert scope == f"{process.url}/"
        worker = httpx.get(f"{process.url}/sw.js")
        assert worker.headers["content-type"].startswith(("text/javascript", "application/javascript"))

        # The broker keeps the subscription: a questionnaire in the session is pushed to it.
        question = single("target", label="Deploy target", prompt="Where should v2.3 go?")
        page.close()  # nobody connected now: the start below is notified
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        response = httpx.post(
            f"{process.url}/v1/sessions/{sid}/questionnaire",
            params={"wait": 0},
            json=start_body(question),
            headers={"Authorization": f"Bearer {token(sid, 'agent', sub='release-bot')}"},
        )
        assert response.status_code == 202, response.text
        (push,) = service.wait_for(1, device="chromium")
        assert push.problem is None and push.payload["session"] == sid

        # That push, handed to the worker through the DevTools protocol, shows a notification.
        page.goto(f"{process.url}/#token={token(sid + '*', 'client')}")  # the page (not the session)
        wait_until(lambda: any(r.get("scopeURL") == scope for r in registrations), what="the worker's registration")
        registration_id = next(r["registrationId"] for r in registrations if r.get("scopeURL") == scope)
        cdp = context.new_cdp_session(page)
        cdp.send("ServiceWorker.enable")
        cdp.send(
            "ServiceWorker.deliverPushMessage",
            {"origin": process.url + "/", "registrationId": registration_id, "data": json.dumps(push.payload)},
        )
        shown = wait_until(
            lambda: page.evaluate(
                """navigator.serviceWorker.ready.then((r) => r.getNotifications()).then((list) =>
                     list.map((n) => ({ title: n.title, body: n.body, tag: n.tag, data: n.data })))"""
            ),
            what="the worker's notification",
        )
        assert shown[0]["title"] == "release-bot has 1 question for you"
        assert "Where should v2.3 go?" in shown[0]["body"]
        assert shown[0]["tag"] == f"qbroker-session-{sid}"
        assert shown[0]["data"]["url"] == f"{process.url}/#session={sid}"  # where its click goes
    finally:
        context.close()
    assert errors == [], f"uncaught errors in the page: {errors}"


def test_a_link_with_another_holder_s_token_does_not_move_the_device_s_subscription(
    chromium: Browser, push_broker: tuple[BrokerProcess, PushService]
) -> None:
    """Alice subscribes this device; a crafted link with Mallory's token (her own session)
    must not post the subscription again under Mallory's token: the page offers the button
    instead. A later link of Alice's own (a new token for her and her session) posts it again."""
    process, service = push_broker
    alice, mallory = new_sid("alice"), new_sid("mallory")
    device = service.device("moved")
    context = new_context(chromium)
    context.grant_permissions(["notifications"], origin=process.url)
    context.add_init_script(f"window.__pushDevice = {json.dumps(_device_for_page(device))};")
    context.add_init_script(PUSH_MANAGER_STUB)
    posted: list[str] = []

    def record(request: Any) -> None:
        if request.method == "POST" and request.url.endswith("/v1/push/subscriptions"):
            posted.append(request.headers.get("authorization", ""))

    context.on("request", record)
    try:
        page = context.new_page()
        page.goto(f"{process.url}/#session={alice}&token={token(alice, 'client', ttl=3600, sub='alice')}")
        button = page.locator("#push-toggle")
        button.click()
        expect(button).to_have_text("Stop notifications on this device")
        assert len(posted) == 1

        crafted = token(mallory, "client", ttl=3600, sub="mallory")
        page.goto(f"{process.url}/#session={mallory}&token={crafted}")
        page.reload()  # (a fresh load of the crafted link)
        expect(page.locator("#push-toggle")).to_have_text("Notify me on this device")
        assert not any(crafted in header for header in posted), "the subscription was moved to the link's token"

        later = token(alice, "client", ttl=3600, sub="alice")
        page.goto(f"{process.url}/#session={alice}&token={later}")
        page.reload()
        expect(page.locator("#push-toggle")).to_have_text("Stop notifications on this device")
        assert posted[-1] == f"Bearer {later}"
    finally:
        context.close()
