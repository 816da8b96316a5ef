"""Django's PostgreSQL backend, whose connection health check sends nothing to the server
unless the server has spoken first.

With CONN_HEALTH_CHECKS, Django checks a persistent connection at each request's first
query with a `SELECT 1`: a round trip on every request that touches the database, which
was a fifth of an authenticated ping's time. A connection the server dropped while it was
idle (a restart, a failover, a terminated backend) has something to read: the server's
FATAL message, or the end of the stream. A live idle connection has nothing, since every
answer to this process's own statements has been read. So the socket is polled without
waiting, and only when something is there is Django's `SELECT 1` sent: it tells a dead
connection from an unasked notice or notification, as before.
"""

from __future__ import annotations

import select

from django.db.backends.postgresql import base


class DatabaseWrapper(base.DatabaseWrapper):
    def is_usable(self) -> bool:
        connection = self.connection
        if connection is None or connection.closed or connection.broken:
            return False
        poller = select.poll()
        poller.register(connection.fileno(), select.POLLIN)
        if not poller.poll(0):
            return True
        return bool(super().is_usable())
