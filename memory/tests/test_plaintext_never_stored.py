"""The memory text exists only as ciphertext: no table holds it, and tampering fails whole."""

from __future__ import annotations

from memory.models import MEMORY_PATH
from workspaces.models import FileVersion
from workspaces.tests.leaks import tables_holding

MARKER = "ZEBRA-7f3a-memory-marker"


def test_a_saved_marker_appears_in_no_table_except_as_ciphertext(memory_api, tenant):
    memory_api.save(f"- remember {MARKER}\n", base=0)
    memory_api.save(f"- remember {MARKER}\n- and more\n", base=1)
    memory_api.clear(base=2)
    memory_api.undo(restore_version=2, base=3)
    assert MARKER in memory_api.get().json()["content"]

    assert tables_holding(MARKER) == []
    assert FileVersion.objects.filter(file__path=MEMORY_PATH).count() == 4


def test_a_flipped_ciphertext_bit_fails_cleanly(memory_api, tenant):
    memory_api.save(f"- {MARKER}\n", base=0)
    revision = FileVersion.objects.get(file__workspace=tenant.workspace)
    tampered = bytearray(revision.ciphertext)
    tampered[20] ^= 0x01
    FileVersion.objects.filter(pk=revision.pk).update(ciphertext=bytes(tampered))

    current = memory_api.get()
    opened = memory_api.client.get(f"{memory_api.url}/versions/1")

    for response in (current, opened):
        assert response.status_code == 422
        assert response.json()["error"]["code"] == "DOCUMENT_UNREADABLE"
        assert MARKER not in response.content.decode()


def test_ciphertext_moved_to_another_workspaces_row_fails_cleanly(make_tenant):
    victim, thief = make_tenant(), make_tenant()
    client_victim = victim.client_for(victim.member)
    client_thief = thief.client_for(thief.member)
    url = "/api/v1/workspaces/{}/memory"
    client_victim.put(
        url.format(victim.workspace.pk), {"content": MARKER}, format="json", HTTP_X_BASE_VERSION="0"
    )
    client_thief.put(
        url.format(thief.workspace.pk), {"content": "mine"}, format="json", HTTP_X_BASE_VERSION="0"
    )
    stolen = FileVersion.objects.get(file__workspace=victim.workspace).ciphertext
    FileVersion.objects.filter(file__workspace=thief.workspace).update(ciphertext=stolen)

    response = client_thief.get(url.format(thief.workspace.pk))

    assert response.status_code == 422
    assert response.json()["error"]["code"] == "DOCUMENT_UNREADABLE"
    assert MARKER not in response.content.decode()


def test_ciphertext_moved_to_another_version_of_the_same_document_fails(memory_api, tenant):
    memory_api.save("version one", base=0)
    memory_api.save("version two", base=1)
    first = FileVersion.objects.get(file__workspace=tenant.workspace, version=1)
    FileVersion.objects.filter(file__workspace=tenant.workspace, version=2).update(
        ciphertext=first.ciphertext
    )

    response = memory_api.get()

    assert response.status_code == 422
    assert "version one" not in response.content.decode()
