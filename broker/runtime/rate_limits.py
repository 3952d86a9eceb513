"""Rate limits: a token bucket, and one bucket per key for limits on HTTP requests.

The client websocket gives each connection its own ``TokenBucket`` (``QBROKER_RATE_LIMIT``
frames per second, bursts of ``QBROKER_RATE_BURST``). An HTTP endpoint has no connection to
hang a bucket on, so ``KeyedBuckets`` keeps one per key (e.g. per token), in memory, per
process: a refusal costs no store round trip. At most ``size`` keys are kept, the least
recently used going first (a key forgotten starts again with a full bucket, as one unseen
for ``burst / rate`` seconds would have).
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

KEYS_KEPT: Final = 10_000


class TokenBucket:
    """``rate`` per second on average, bursts up to ``burst``."""

    __slots__ = ("rate", "burst", "tokens", "stamp", "clock")

    def __init__(self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst = rate, burst
        self.tokens = burst
        self.clock = clock
        self.stamp = clock()

    def take(self) -> bool:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True

    def wait(self) -> float:
        """Seconds until ``take`` would succeed (0: now)."""
        tokens = min(self.burst, self.tokens + (self.clock() - self.stamp) * self.rate)
        return 0.0 if tokens >= 1 else (1 - tokens) / self.rate


class KeyedBuckets:
    """A ``TokenBucket(rate, burst)`` per key, for at most ``size`` keys."""

    def __init__(
        self, rate: float, burst: float, *, size: int = KEYS_KEPT, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate, self.burst, self.size = rate, burst, size
        self._clock = clock
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()

    def take(self, key: str) -> int:
        """0 when ``key`` may go on now (one taken from its bucket); else the whole seconds
        to wait, as a ``Retry-After`` says them (at least 1)."""
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = TokenBucket(self.rate, self.burst, self._clock)
            if len(self._buckets) > self.size:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
        if bucket.take():
            return 0
        return max(1, math.ceil(bucket.wait()))

    def __len__(self) -> int:
        return len(self._buckets)
