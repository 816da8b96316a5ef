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
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8001)

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
