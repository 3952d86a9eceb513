"""broker/runtime/rate_limits.py: the token bucket (the websocket's frames) and one bucket per key
(POST /v1/push/subscriptions per token), on a clock the test moves."""

from __future__ import annotations

from broker.runtime.rate_limits import KeyedBuckets, TokenBucket


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_allows_its_burst_then_its_rate() -> None:
    clock = Clock()
    bucket = TokenBucket(rate=2.0, burst=3.0, clock=clock)
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]
    assert bucket.wait() == 0.5
    clock.now += 0.5
    assert bucket.wait() == 0.0
    assert bucket.take() and not bucket.take()
    clock.now += 100  # never more than the burst, however long it rested
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]


def test_each_key_has_its_own_bucket_and_a_refusal_says_whole_seconds_to_wait() -> None:
    clock = Clock()
    limits = KeyedBuckets(rate=10 / 60, burst=2, clock=clock)
    assert [limits.take("alice") for _ in range(3)] == [0, 0, 6]
    assert limits.take("bob") == 0  # not alice's bucket
    clock.now += 5.5
    assert limits.take("alice") == 1  # 0.5 s more: said as 1, never 0
    clock.now += 0.5
    assert limits.take("alice") == 0


def test_at_most_size_keys_are_kept_the_least_recently_used_going() -> None:
    clock = Clock()
    limits = KeyedBuckets(rate=1 / 60, burst=1, size=2, clock=clock)
    assert limits.take("a") == 0 and limits.take("b") == 0
    assert limits.take("a") > 0  # a is now the most recent
    assert limits.take("c") == 0  # b goes
    assert len(limits) == 2
    assert limits.take("a") > 0  # a was kept, still empty
    assert limits.take("b") == 0  # b was forgotten: a full bucket again
