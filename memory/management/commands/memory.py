"""`manage.py memory <subcommand>`: operations on the memory spaces of the configured store.

One command with argparse subcommands, so that later ones (du, export, import) join it.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memory.spaces.quotas import store_get


class Command(BaseCommand):
    help = "Operations on memory spaces, in the store MEMORY_STORE names."

    def add_arguments(self, parser: CommandParser) -> None:
        subcommands = parser.add_subparsers(dest="subcommand", required=True)
        subcommands.add_parser(
            "reconcile",
            help=(
                "Recompute every space and tenant byte counter from the documents, fix the "
                "ones that drifted, and print the drift found for each."
            ),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["subcommand"] == "reconcile":
            self.reconcile()

    def reconcile(self) -> None:
        drifts = store_get().reconcile()
        for drift in drifts:
            self.stdout.write(
                f"{drift.scope}\tdrift {drift.drift}\trecorded {drift.recorded}\t"
                f"actual {drift.actual}"
            )
        drifted = sum(1 for drift in drifts if drift.drift != 0)
        self.stdout.write(f"{len(drifts)} counter(s) checked, {drifted} fixed.")
