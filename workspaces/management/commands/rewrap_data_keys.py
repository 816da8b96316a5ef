from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from workspaces.services import data_keys_rewrap


class Command(BaseCommand):
    help = (
        "Re-wrap every data key (workspaces' and memory spaces') under the current "
        "CRYPTOGRAPHY_KEY. Run after moving the old key to CRYPTOGRAPHY_PREVIOUS_KEYS; "
        "safe to interrupt and run again. "
        "What the keys sealed is not touched."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=int, default=100)

    def handle(self, *args: Any, **options: Any) -> None:
        rewrapped = data_keys_rewrap(batch_size=options["batch_size"])
        self.stdout.write(f"Re-wrapped {rewrapped} data key(s).")
