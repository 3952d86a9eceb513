"""The websocket edges and their transport.

session.py      /v1/sessions/{sid}/ws: a client's hello, limits and command loop
inbox.py        /v1/inbox/ws: the live inbox of the sessions a client token covers
transport.py    the protocol class uvicorn runs for every upgrade (serves both paths)
frame_codec.py  a whole client data frame read, and server frames written, fast
"""
