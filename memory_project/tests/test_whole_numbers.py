"""A whole number in a header or a query has one spelling: ASCII digits, no sign, no leading
zero (`0` itself aside). `01`, `+1`, `1.0` or a full-width one would otherwise name the same
number as `1` to this server and perhaps another to whatever judged the request before it (a
proxy, a cache keyed on the query, a client's own log)."""

from __future__ import annotations

import pytest

from conftest import assert_error
from workspaces.models import File

# Each is refused wherever a whole number is read. Spaces and tabs around a header's value
# are not part of it (RFC 9110, 5.5: gunicorn strips them before the app sees the header);
# any other character around it is, a no-break space or NEL included.
NOT_CANONICAL = ["01", "00", "+1", "-0", "1.0", "1e0", "\uff11", "1_0", "0x1", "1\xa0", "\x851"]


def _memory_url(workspace_id: int) -> str:
    return f"/api/v1/workspaces/{workspace_id}/memory"


@pytest.mark.parametrize("value", NOT_CANONICAL)
def test_an_x_base_version_not_spelled_canonically_is_invalid_header(memory_api, tenant, value):
    memory_api.put({"content": "one"}, 0)

    response = memory_api.put({"content": "two"}, value)

    assert assert_error(response, 400, "INVALID_HEADER")["detail"] == {"header": "X-Base-Version"}
    assert File.objects.get(workspace=tenant.workspace).current_version == 1


@pytest.mark.parametrize("value", ["1", " 1", "1 ", "\t1\t"])
def test_spaces_and_tabs_around_a_header_are_not_part_of_it(memory_api, value):
    memory_api.put({"content": "one"}, 0)

    response = memory_api.put({"content": "two"}, value)

    assert response.status_code == 200, response.content


@pytest.mark.parametrize("value", ['"01"', '"+1"', '"\uff11"'])
def test_an_if_match_tag_not_spelled_canonically_is_invalid_header(memory_api, value):
    memory_api.put({"content": "one"}, 0)

    response = memory_api.put({"content": "two"}, None, HTTP_IF_MATCH=value)

    assert assert_error(response, 400, "INVALID_HEADER")["detail"] == {"header": "If-Match"}


@pytest.mark.parametrize("value", ["01", "+1", "1\xa0"])
def test_an_x_memory_state_version_not_spelled_canonically_is_invalid_header(tenant, value):
    client = tenant.client_for(tenant.member)

    response = client.get(
        f"{_memory_url(tenant.workspace.pk)}/preview",
        HTTP_X_MEMORY_STATE=f"version={value}; saving=0; conflict=0",
    )

    assert assert_error(response, 400, "INVALID_HEADER")["detail"] == {"header": "X-Memory-State"}


@pytest.mark.parametrize("value", ["1\xa0", "\x851", "01"])
def test_an_x_memory_clear_flag_other_than_0_or_1_is_invalid_header(memory_api, tenant, value):
    memory_api.put({"content": "one"}, 0)

    response = memory_api.put({"content": ""}, 1, HTTP_X_MEMORY_CLEAR=value)

    assert assert_error(response, 400, "INVALID_HEADER")["detail"] == {"header": "X-Memory-Clear"}
    assert File.objects.get(workspace=tenant.workspace).current_version == 1


@pytest.mark.parametrize("value", ["05", "+5", "\uff15"])
def test_a_query_number_not_spelled_canonically_is_validation_failed(tenant, value):
    client = tenant.client_for(tenant.member)

    response = client.get(f"{_memory_url(tenant.workspace.pk)}/versions?limit={value}")

    assert list(assert_error(response, 400, "VALIDATION_FAILED")["detail"]["fields"]) == ["limit"]


@pytest.mark.parametrize("spelling", ["0{}", "00{}", "+{}"])
def test_an_id_in_the_path_not_spelled_canonically_names_no_route(tenant, spelling):
    client = tenant.client_for(tenant.member)
    workspace_id = spelling.format(tenant.workspace.pk)

    response = client.get(f"/api/v1/workspaces/{workspace_id}/memory")

    assert_error(response, 404, "NOT_FOUND")
