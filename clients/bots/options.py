"""What one load process is asked to do (``Options``) and how many questionnaires it may
still start (``Budget``): plain data the run, its sessions and ``qbroker bots`` share."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from clients.bots.plan import Rates, Shape


@dataclass
class Options:
    """Everything one load process needs (plain data: it crosses process boundaries)."""

    urls: list[str]
    secret: str
    session_ids: list[str]
    bots: int = 1
    codec: Literal["json", "msgpack", "mixed"] = "json"
    shape: Shape = field(default_factory=Shape)
    rates: Rates = field(default_factory=Rates)
    think_ms: tuple[float, float] = (20.0, 60.0)
    count: int = 20
    duration: float = 30.0
    timeout: float = 60.0
    wait: float = 30.0
    seed: int = 0
    deflate: bool = False
    connect_timeout: float = 30.0
    session_offset: int = 0  # global index of this process's first session (spreads URLs)
    session_stride: int = 1  # global index step between this process's sessions


class Budget:
    """How many questionnaires may still start, and until when."""

    def __init__(self, count: int, deadline: float) -> None:
        self.left = count
        self.deadline = deadline

    def take(self) -> bool:
        if self.left <= 0 or time.monotonic() >= self.deadline:
            return False
        self.left -= 1
        return True
