"""The broker's signing secret as a command on the broker's own machine finds it, to mint
tokens itself: ``QBROKER_SECRET``, else the secret a broker started without one generated in
its data dir (read, never created: ``qbroker token`` is the command that may create it)."""

from __future__ import annotations

import os
from pathlib import Path


def generated_secret_file(data_dir: str | None = None) -> Path:
    """Where a broker with this data dir (``data_dir``, else ``QBROKER_DATA_DIR``, else its
    default) keeps the secret it generated."""
    from broker.runtime.config import Config

    # Only the data dir is read from the environment: the broker's other settings are not ours.
    only_dir = {"QBROKER_DATA_DIR": os.environ.get("QBROKER_DATA_DIR", "")}
    return Config.from_env(only_dir, data_dir=data_dir).secret_file


def generated_secret(data_dir: str | None = None) -> str | None:
    """The secret in the data dir's secret file, None when there is none."""
    try:
        secret = generated_secret_file(data_dir).read_text().strip()
    except OSError:
        return None
    return secret or None


def local_secret(data_dir: str | None = None) -> str | None:
    """``QBROKER_SECRET``, else the data dir's generated secret, else None."""
    return os.environ.get("QBROKER_SECRET") or generated_secret(data_dir)
