"""Tokens: what a token says, how a running broker checks it, and the ``token`` command.

claims.py   the claims (scope, role, holder, expiry) and minting; all a client may import
checks.py   ``Tokens``: every check of a running broker, revocations kept fresh
jwks.py     an identity provider's signing keys, fetched and cached
command.py  ``qbroker token``: mint a token, or revoke tokens on a running broker
"""
