"""Speed-ups that reach into other libraries' private internals, gathered in one place.

Each one replaces or bypasses a piece of uvicorn, websockets or redis-py on the answer
path. They are kept because ``bench/`` measured what they buy; they are kept here so that
a maintainer can see at once what depends on upstream internals, and
``tests/unit/test_upstream_internals.py`` fails with a clear message when an upstream
release moves one.

- ``eager``: runs a client frame's work at once instead of in a new task (Python 3.11 has
  no eager task factory); on Redis, a reply resumes the waiting coroutine in the reply's
  callback. About a tenth of the broker's own time per answer (bench/answer_path.py).
- ``http_protocol``: uvicorn's httptools protocol, writing a response's head and body in
  one write instead of two (one system call and one TCP segment fewer per agent call).
- ``redis_wire``: packs Redis commands and reads replies for the store's hot commands
  without redis-py's generic packer and response parser (the write scripts' calls packed
  in one format, not by hiredis argument by argument), and hands a notice to its handler
  as it is read rather than waking the notice link's reader task for it.

The websocket transport reaches into uvicorn's and websockets' internals too; it lives with
the sockets it serves, in ``broker/ws/`` (``transport``: the protocol class extending
uvicorn's sans-I/O websocket protocol, serving the client paths without ASGI;
``frame_codec``: a whole client data frame that arrives alone read, and server frames
written, without websockets' parser and writer generators).

Checked against the versions pyproject.toml allows (CI runs the suite on the lowest of
them and on the newest). To measure one, turn it off where it is used and run
``python bench/run.py`` before and after.
"""
