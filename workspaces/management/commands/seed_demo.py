import hashlib
import json
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import connection

from memory_project.env import private_file_write
from workspaces.services import DemoCredentials, demo_tenant_seed


class Command(BaseCommand):
    help = (
        "Create (or find) a demo org, team, AI-enabled workspace and admin user, and print "
        "working credentials. The password and tokens are created once and kept in DATA_DIR "
        "(mode 0600); a later run prints the same ones while they still work. Safe to run again."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", default="demo", help="Seed an independent tenant by name.")
        parser.add_argument("--json", action="store_true", help="Print one JSON object.")

    def handle(self, *args: Any, **options: Any) -> None:
        path = credentials_path(options["name"])
        kept = _credentials_read(path)
        credentials = demo_tenant_seed(name=options["name"], kept=kept)
        if credentials != kept:
            private_file_write(path, json.dumps(asdict(credentials)))
        if options["json"]:
            self.stdout.write(json.dumps(asdict(credentials)))
            return
        state = "kept from an earlier start" if credentials == kept else "created"
        self.stdout.write(
            "\n".join(
                [
                    f"Demo tenant ready (credentials {state}; stored in {path}):",
                    f"  username:     {credentials.username}",
                    f"  password:     {credentials.password}",
                    f"  token (PAT):  {credentials.token}",
                    f"  MCP token:    {credentials.mcp_token}",
                    f"  org id:       {credentials.org_id}",
                    f"  team id:      {credentials.team_id}",
                    f"  workspace id: {credentials.workspace_id}",
                ]
            )
        )


def credentials_path(name: str) -> Path:
    """Where the demo credentials of tenant `name` in the current database are kept: one
    file per database, so an SQLite run and a PostgreSQL run sharing DATA_DIR never hand
    each other credentials that mean nothing there."""
    database = connection.settings_dict
    identity = "|".join(str(database.get(key) or "") for key in ("ENGINE", "HOST", "PORT", "NAME"))
    digest = hashlib.sha256(f"{identity}|{name}".encode()).hexdigest()[:16]
    return Path(settings.DATA_DIR) / f"demo-credentials.{digest}.json"


def _credentials_read(path: Path) -> DemoCredentials | None:
    """The credentials an earlier run stored, or None if there are none (or unreadable ones,
    which the run then replaces)."""
    try:
        stored = json.loads(path.read_text())
        return DemoCredentials(
            **{field.name: stored[field.name] for field in fields(DemoCredentials)}
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
