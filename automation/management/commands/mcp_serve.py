import argparse
import logging
from typing import Any

import uvicorn
from django.core.management.base import BaseCommand, CommandParser

from automation.mcp_server import MCP_PATH, mcp_asgi_app
from memory_project.log_filters import RedactQueryStringArgs


class Command(BaseCommand):
    help = (
        "Serve the MCP server for external clients (streamable HTTP at /mcp). Every request "
        "needs Authorization: Bearer <personal access token or JWT>."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--host", default="127.0.0.1", help="The address to listen on (default 127.0.0.1)."
        )
        parser.add_argument(
            "--port", type=_port, default=8001, help="The TCP port to listen on (default 8001)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        host: str = options["host"]
        port: int = options["port"]
        self.stdout.write(f"MCP server on http://{host}:{port}{MCP_PATH}")
        # One process, whatever WEB_CONCURRENCY says: that variable sizes the web app's
        # gunicorn, and uvicorn would read it too and refuse to fork an app built here.
        # The server is stateless, so more capacity is more of these processes.
        # uvicorn's own logging set-up keeps a logger's filters.
        logging.getLogger("uvicorn.access").addFilter(RedactQueryStringArgs())
        uvicorn.run(mcp_asgi_app(host=host), host=host, port=port, lifespan="on", workers=1)


def _port(value: str) -> int:
    """A port checked with the command line, not at bind() after start-up, where uvicorn
    met an out-of-range one with a traceback. Not 0: the URL printed would name no port."""
    message = "a TCP port is a whole number from 1 to 65535"
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{message}, not {value!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{message}, not {value!r}")
    return port
