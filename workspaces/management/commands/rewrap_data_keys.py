from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from workspaces.services import workspace_keys_rewrap


class Command(BaseCommand):
    help = (
        "Re-wrap every workspace data key under the current CRYPTOGRAPHY_KEY. Run after "
        "moving the old key to CRYPTOGRAPHY_PREVIOUS_KEYS; safe to interrupt and run again. "
        "Document revisions are not touched."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=int, default=100)

    def handle(self, *args: Any, **options: Any) -> None:
        rewrapped = workspace_keys_rewrap(batch_size=options["batch_size"])
        self.stdout.write(f"Re-wrapped {rewrapped} workspace data key(s).")
