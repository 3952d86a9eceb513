"""Stopping a part's background tasks: every part that starts some stops them the same way."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any


async def stop_tasks(tasks: Iterable[asyncio.Task[Any] | None]) -> None:
    """Cancel each task, then wait for each to end (None: a task not started). Whatever a
    task raises on its way out is not the stopper's to handle: the part is stopping."""
    running = [task for task in tasks if task is not None]
    for task in running:
        task.cancel()
    for task in running:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
