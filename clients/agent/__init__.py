"""The agent's side of qbroker: the Python SDK and ``qbroker ask`` / ``qbroker resume``.

``from clients.agent import QBrokerClient`` is the SDK's documented import: this package
re-exports the SDK's public names (``sdk.__all__``); ``cli`` holds the two commands.
"""

from clients.agent.sdk import *  # noqa: F403 - the SDK's public surface, named once in sdk.__all__
from clients.agent.sdk import __all__ as __all__
