"""The browser page: static files the broker serves at ``/`` (see ``qbroker.cli``)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent
