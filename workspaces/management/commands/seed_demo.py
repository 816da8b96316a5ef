import json
from dataclasses import asdict
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from workspaces.services import demo_tenant_seed


class Command(BaseCommand):
    help = (
        "Create (or find) a demo org, team, AI-enabled workspace and admin user, "
        "and print working credentials. Safe to run again."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", default="demo", help="Seed an independent tenant by name.")
        parser.add_argument("--json", action="store_true", help="Print one JSON object.")

    def handle(self, *args: Any, **options: Any) -> None:
        credentials = demo_tenant_seed(name=options["name"])
        if options["json"]:
            self.stdout.write(json.dumps(asdict(credentials)))
            return
        self.stdout.write(
            "\n".join(
                [
                    "Demo tenant ready:",
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
