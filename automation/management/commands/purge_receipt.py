from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from automation.receipts import ReceiptInvalid, ReceiptKey, deployment_public_key, receipt_verify

EXIT_CODES = "Exit codes: 0 the receipt is valid; 1 it is not; 2 usage."


class UsageError(CommandError):
    """Exit 2: the command line cannot be run as given."""

    def __init__(self, message: str) -> None:
        super().__init__(message, returncode=2)


class Command(BaseCommand):
    help = (
        "Org purge receipts: `verify FILE` checks a receipt's signature (and, with "
        "--public-key, that the key is the one you pinned) and prints what it counts; "
        "`public-key` prints this deployment's receipt-signing public key. " + EXIT_CODES
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.epilog = EXIT_CODES
        subcommands = parser.add_subparsers(dest="subcommand", required=True)
        verify = subcommands.add_parser(
            "verify",
            help="Check a receipt downloaded from the admin.",
            description="Check a receipt downloaded from the admin.",
            epilog=EXIT_CODES,
        )
        verify.add_argument("file", type=Path, help="The receipt file (.json).")
        verify.add_argument(
            "--public-key",
            metavar="BASE64",
            help=(
                "The signing key to require (as `purge_receipt public-key` prints it). "
                "Without it the receipt is checked against the key it carries, which "
                "proves it unaltered but not who signed it."
            ),
        )
        subcommands.add_parser(
            "public-key",
            help="Print this deployment's receipt-signing public key (base64).",
            description="Print this deployment's receipt-signing public key (base64).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["subcommand"] == "public-key":
            key = deployment_public_key()
            self.stdout.write(key.text)
            self.stderr.write(f"Ed25519, key id {key.key_id}")
            return
        receipt = self._verified(options["file"], options["public_key"])
        key_id = receipt["signingKey"]["keyId"]
        self.stdout.write(
            f"VALID: purge receipt of org {receipt['org']['id']}, signed by key {key_id}"
        )
        self.stdout.write(f"started  {receipt['startedAt']}")
        self.stdout.write(f"finished {receipt['finishedAt']}")
        self.stdout.write(
            f"data keys destroyed before revisions: {receipt['keysDestroyedBeforeRevisions']}"
        )
        for label, count in receipt["deletedRows"].items():
            self.stdout.write(f"{count:>10}  {label}")
        deleted_ids = receipt["deletedIds"]
        self.stdout.write(f"{deleted_ids['count']:>10}  rows in all")
        self.stdout.write(f"deleted ids SHA-256 {deleted_ids['sha256']}")
        self.stdout.write(f"{receipt['filesystemSpaceDocuments']:>10}  filesystem space documents")

    def _verified(self, path: Path, public_key: str | None) -> dict[str, Any]:
        try:
            pinned = None if public_key is None else ReceiptKey.from_text(public_key)
        except ReceiptInvalid as error:
            raise UsageError(f"--public-key: {error}") from None
        try:
            document = path.read_bytes()
        except OSError as error:
            raise UsageError(f"cannot read {path}: {error.strerror}") from None
        try:
            return receipt_verify(document, pinned=pinned)
        except ReceiptInvalid as error:
            raise CommandError(f"INVALID: {error}", returncode=1) from None
