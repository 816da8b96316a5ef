"""The bar for the OpenAPI schema: a client generated from it by a well-kept generator
(openapi-python-client, pinned in requirements-dev.txt) imports, and drives a Save, a
conflict and a turn against a live server."""

from __future__ import annotations

import importlib
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from django.core.management import call_command

from workspaces.models import File
from workspaces.services import api_token_create

GENERATOR = Path(sys.executable).with_name("openapi-python-client")
PACKAGE = "memory_client"


@pytest.fixture
def generated(tmp_path: Path) -> Iterator[ModuleType]:
    schema = tmp_path / "schema.json"
    call_command("spectacular", "--format", "openapi-json", "--file", str(schema))
    output = tmp_path / PACKAGE
    subprocess.run(
        [GENERATOR, "generate", "--path", schema, "--output-path", output, "--meta", "none"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [name for name in sys.modules if name.split(".")[0] == PACKAGE]:
            del sys.modules[name]


def _operation(name: str) -> ModuleType:
    return importlib.import_module(f"{PACKAGE}.api.{name}")


@pytest.mark.django_db(transaction=True)
def test_a_generated_client_saves_meets_a_conflict_and_sends_a_turn(
    generated, live_server, make_tenant
):
    tenant = make_tenant()
    _, raw = api_token_create(user=tenant.member, team=tenant.team, name="generated client")
    models = importlib.import_module(f"{PACKAGE}.models")
    client = generated.AuthenticatedClient(base_url=live_server.url, token=raw)
    workspace_id = tenant.workspace.pk
    memory = _operation("memory.memory_document_api_put")

    saved = memory.sync_detailed(
        workspace_id,
        client=client,
        body=models.MemoryDocumentApiInputRequest(content="- Prefers tabs over spaces\n"),
        x_base_version=0,
    )
    conflict = memory.sync_detailed(
        workspace_id,
        client=client,
        body=models.MemoryDocumentApiInputRequest(content="- a stale tab's text\n"),
        x_base_version=0,
    )
    session = _operation("key_sessions.key_session_list_create_api_post").sync(
        workspace_id, client=client
    )
    conversation = _operation("assistant.conversation_list_create_api_post").sync(
        client=client,
        body=models.ConversationListCreateApiInputRequest(workspace_id=workspace_id),
    )
    sent = _operation("assistant.message_send_api_post").sync(
        conversation.id,
        client=client,
        body=models.MessageSendApiInputRequest(text="What do I prefer?"),
        idempotency_key=str(uuid.uuid4()),
        x_key_session=str(session.id),
    )

    assert (saved.status_code, saved.parsed.version, saved.parsed.change_kind) == (
        200,
        1,
        models.ChangeKind.SAVE,
    )
    assert conflict.status_code == 409
    assert isinstance(conflict.parsed, models.Error)
    assert conflict.parsed.error.code == "VERSION_CONFLICT"
    assert conflict.parsed.error.detail.additional_properties == {"currentVersion": 1}
    assert File.objects.get(workspace=tenant.workspace).current_version == 1
    assert isinstance(sent, models.MessageSendApiOutput)
    assert isinstance(sent.turn.state, models.TurnState)
    assert sent.turn.id
