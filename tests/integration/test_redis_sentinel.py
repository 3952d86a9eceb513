"""Redis with Sentinel, failing over under load: two brokers on a master that three sentinels
watch (one replica, QBROKER_REDIS_WAIT_REPLICAS=1), ``qbroker bots`` running the mixed load,
the master SIGKILLed. The sentinels promote the replica, the brokers follow it by themselves,
and nothing acknowledged is lost: the bots verify every result, every questionnaire ends,
and each one the agent saw completed is in the session's record on the new master.
"""

from __future__ import annotations

import os
import subprocess
import time
from contextlib import AbstractContextManager
from pathlib import Path

import httpx
import pytest

from tests.helpers.bots import assert_nothing_lost_or_altered, mixed_load_command, read_report
from tests.helpers.processes import REPO_ROOT, TEST_SECRET, BrokerProcess, broker, token
from tests.helpers.sentinel import MASTER_NAME, PASSWORD, SENTINEL_PASSWORD, SentinelGroup, sentinel_group
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.redis

LOAD_SESSIONS = 40
LOAD_SECONDS = 20
KILL_AFTER = 6.0  # seconds into the load
# What the failover may cost along the way: connections cut, and writes refused while no
# master (or no replica for WAIT 1) answers -- refused, so never acknowledged, and retried.
FAILOVER_TOLERATED = ("close_", "connect_error", "closed_by_broker", "frame_store_unavailable", "http_503_")


def _broker(group: SentinelGroup) -> AbstractContextManager[BrokerProcess]:
    """A broker on the group's master, found through its sentinels, acknowledging a write
    once the replica has it."""
    return broker(
        log_level="warning",
        redis_wait_replicas=1,
        redis_sentinels=group.setting,
        redis_sentinel_master=MASTER_NAME,
        redis_password=PASSWORD,
        redis_sentinel_password=SENTINEL_PASSWORD,
    )


def _recorded(urls: list[str], sessions: list[str], status: str) -> int:
    """Questionnaires with ``status`` in these sessions' records, as a broker reads them."""
    total = 0
    for sid in sessions:
        response = httpx.get(
            f"{urls[0]}/v1/sessions/{sid}/questionnaires?status={status}&limit=200",
            headers={"Authorization": f"Bearer {token(sid, 'agent')}"},
            timeout=10,
        )
        assert response.status_code == 200, response.text
        total += len(response.json()["items"])
    return total


@pytest.mark.heavy
def test_a_master_killed_under_load_fails_over_with_nothing_acknowledged_lost(tmp_path: Path) -> None:
    out, err = tmp_path / "bots.json", tmp_path / "bots.err"
    with (
        sentinel_group() as group,
        _broker(group) as one,
        _broker(group) as two,
    ):
        urls = [one.url, two.url]
        env = {k: v for k, v in os.environ.items() if not k.startswith("QBROKER_")}
        env.update(QBROKER_SECRET=TEST_SECRET)
        began = time.monotonic()
        with out.open("w") as stdout, err.open("w") as stderr:
            command = mixed_load_command(urls, seed=26379, sessions=LOAD_SESSIONS, seconds=LOAD_SECONDS)
            bots = subprocess.Popen(command, stdout=stdout, stderr=stderr, env=env, cwd=REPO_ROOT)
            try:
                wait_until(lambda: bots.poll() is not None or time.monotonic() - began > KILL_AFTER, timeout=60)
                assert bots.poll() is None, err.read_text()[-3000:]
                old_master = group.master_port()
                group.node(old_master).kill()
                new_master = group.wait_for_promotion(old_master)
                promoted_after = time.monotonic() - began - KILL_AFTER
                # Back, as a supervisor would bring it: the sentinels make it the new replica.
                group.node(old_master).start()
                group.wait_for_replica()
                for process in (one, two):  # both brokers follow: ready on the new master
                    wait_until(
                        lambda p=process: httpx.get(f"{p.url}/readyz", timeout=5).status_code == 200,
                        timeout=30,
                        what="the broker ready again",
                    )
                bots.wait(LOAD_SECONDS + 90)
            finally:
                if bots.poll() is None:
                    bots.kill()
                    bots.wait(10)
        report = read_report(out, err)
        done = report["questionnaires"]
        summary = (
            f"{done} in {report['elapsed_s']}s, master {old_master} -> {new_master} promoted after "
            f"{promoted_after:.1f}s, errors {report['errors']}, samples {report['error_samples'][:5]}, "
            f"mismatches {report['mismatch_samples'][:5]}"
        )
        print(summary)
        assert new_master != old_master
        assert_nothing_lost_or_altered(report, FAILOVER_TOLERATED, summary)
        # Every outcome acknowledged to the agent is in the record the new master keeps.
        with group.client() as master:
            sessions = sorted(
                {key.decode().split("{")[1].split("}")[0] for key in master.scan_iter(match="qb:{bots-*}:history")}
            )
        assert len(sessions) == LOAD_SESSIONS, summary
        assert _recorded(urls, sessions, "completed") == done["completed"], summary
        assert _recorded(urls, sessions, "cancelled") == done["cancelled"], summary
