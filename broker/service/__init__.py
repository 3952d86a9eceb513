"""Orchestration: the one place where the pure core meets the store and the connections.

The HTTP and websocket adapters call ``Broker``; ``Broker`` loads a state from the store,
runs the core's transition, writes the result back by compare-and-set (retrying on a lost
race, which re-runs the transition against the newer state), and lets every interested
connection know.
"""

from broker.service.broker import Broker
from broker.service.hubs import EVERY_WRITE, OUTCOMES_ONLY, Connection, Encoded, SessionHub, Wake, _watch

__all__ = ["EVERY_WRITE", "OUTCOMES_ONLY", "Broker", "Connection", "Encoded", "SessionHub", "Wake", "_watch"]
