"""Orchestration: the one place where the pure core meets the store and the connections.

    broker.py   Broker: life cycle, the agent API's calls, client commands (what adapters call)
    waits.py    AgentWaits: an agent call's wait for an outcome; closing what nobody can answer
    loops.py    Background: the reconciliation tick and the clients' heartbeats
    inbox.py    InboxFeed: the inbox sockets of this process and the sessions they cover, kept
                in step with the store
    inbox_pages.py  read_page: a page of GET /v1/inbox, through the store's index of sessions
    fanout.py   Fanout: this process's session hubs, kept in step with the store (and so with
                the other processes)
    writes.py   Writer: load, transition, compare-and-set, re-run on a lost race
    hubs.py     SessionHub (a session's local clients and waiting agent calls), Wake, Encoded,
                the Connection protocol

Each module imports only modules listed below it; the rest of the broker imports from here.
"""

from broker.service.broker import Broker
from broker.service.hubs import EVERY_WRITE, OUTCOMES_ONLY, Connection, Encoded, SessionHub, Wake, _watch

__all__ = ["EVERY_WRITE", "OUTCOMES_ONLY", "Broker", "Connection", "Encoded", "SessionHub", "Wake", "_watch"]
