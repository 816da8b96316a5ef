from __future__ import annotations


def test_openapi_schema_lists_the_routes(db, client):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/json")

    assert response.status_code == 200
    paths = response.json()["paths"]
    assert "/api/v1/workspaces/{workspace_id}/ai" in paths
    assert set(paths["/api/v1/workspaces/{workspace_id}/ai"]) >= {"get", "put"}


def test_browsable_docs_render_without_external_assets(db, client):
    response = client.get("/api/docs/")

    assert response.status_code == 200
    assert b"swagger-ui" in response.content
    assert b"cdn." not in response.content


def test_schema_generates_without_warnings_and_validates(db, tmp_path):
    from django.core.management import call_command

    call_command(
        "spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yml")
    )

    assert "MemoryDocumentApiInput" in (tmp_path / "schema.yml").read_text()


def _served_schema(client) -> dict:
    return client.get("/api/schema/", {"format": "json"}).json()


def _component(schema: dict, reference: dict) -> dict:
    return schema["components"]["schemas"][reference["$ref"].rpartition("/")[2]]


def test_document_listings_are_declared_as_pages_and_reads_as_objects(db, client):
    schema = _served_schema(client)

    for route in (
        "/api/v1/workspaces/{workspace_id}/documents",
        "/api/v1/automation/workspaces/{workspace_id}/documents",
    ):
        ok = schema["paths"][route]["get"]["responses"]["200"]
        shapes = _component(schema, ok["content"]["application/json"]["schema"])["oneOf"]
        pages = [_component(schema, shape) for shape in shapes]
        listing = next(page for page in pages if "results" in page["properties"])
        assert set(listing["properties"]) == {"results", "next", "previous"}, route
        item = listing["properties"]["results"]["items"]
        assert "bytes" in _component(schema, item)["properties"]
        deleted = schema["paths"][route]["delete"]["responses"]
        assert set(
            _component(schema, deleted["200"]["content"]["application/json"]["schema"])[
                "properties"
            ]
        ) >= {"path", "version", "deleted"}


def test_every_operation_declares_the_error_shape(db, client):
    schema = _served_schema(client)

    for route, operations in schema["paths"].items():
        for method, operation in operations.items():
            default = operation["responses"]["default"]["content"]["application/json"]
            assert default["schema"] == {"$ref": "#/components/schemas/Error"}, (method, route)
    error = schema["components"]["schemas"]["Error"]["properties"]["error"]
    assert error["required"] == ["code", "message", "detail"]


def _operations(schema: dict):
    for route, operations in schema["paths"].items():
        for method, operation in operations.items():
            yield route, method, operation


def test_every_operation_has_a_summary_and_an_area_tag(db, client):
    schema = _served_schema(client)

    tags = {tag for _, _, operation in _operations(schema) for tag in operation["tags"]}
    for route, method, operation in _operations(schema):
        assert operation.get("summary"), (method, route)
        assert len(operation["tags"]) == 1, (method, route)
    assert tags >= {"memory", "documents", "assistant", "automation", "tokens", "workspaces"}


def test_every_refusal_status_is_the_error_component_with_documented_codes(db, client):
    from memory_project.tests.test_error_shape import _documented_codes

    documented = _documented_codes()
    schema = _served_schema(client)

    for route, method, operation in _operations(schema):
        refusals = {s: r for s, r in operation["responses"].items() if s[0] in "45"}
        assert "401" in refusals, (method, route)
        for status, response in refusals.items():
            content = response["content"]["application/json"]
            assert content["schema"] == {"$ref": "#/components/schemas/Error"}
            for code, example in content["examples"].items():
                assert documented[code] == int(status), (code, status, method, route)
                assert example["value"]["error"]["code"] == code


def _codes(operation: dict, status: str) -> set[str]:
    return set(operation["responses"][status]["content"]["application/json"]["examples"])


def test_the_memory_save_documents_the_refusals_its_view_declares(db, client):
    put = _served_schema(client)["paths"]["/api/v1/workspaces/{workspace_id}/memory"]["put"]

    assert _codes(put, "409") == {"VERSION_CONFLICT"}
    assert _codes(put, "412") == {"PRECONDITION_FAILED"}
    assert _codes(put, "428") == {"BASE_VERSION_REQUIRED"}
    assert {"DOCUMENT_TOO_LARGE", "TENANT_QUOTA_EXCEEDED"} <= _codes(put, "422")
    assert {"VALIDATION_FAILED", "INVALID_HEADER", "MALFORMED_REQUEST"} <= _codes(put, "400")
    assert {"NOT_FOUND"} == _codes(put, "404")
    assert {"AUTHENTICATION_REQUIRED", "TOKEN_INVALID", "TOKEN_EXPIRED", "TOKEN_REVOKED"} == _codes(
        put, "401"
    )


def test_the_import_refuses_its_query_parameters_with_the_one_validation_code(db, client):
    post = _served_schema(client)["paths"]["/api/v1/memory/import"]["post"]

    assert _codes(post, "400") == {
        "ARCHIVE_INVALID",
        "INVALID_TEXT",  # an entry whose bytes are not UTF-8, answered with its path
        "MALFORMED_REQUEST",
        "SPACE_INVALID",
        "VALIDATION_FAILED",
    }


def test_kinds_and_turns_are_typed(db, client):
    from workspaces.models import ChangeKind

    schema = _served_schema(client)

    written = schema["components"]["schemas"]["MemoryDocumentApiWritten"]["properties"]
    assert _component(schema, written["changeKind"])["enum"] == ChangeKind.values
    send = schema["paths"]["/api/v1/agents/assistant/{conversation_id}/messages"]["post"]
    accepted = send["responses"]["202"]["content"]["application/json"]["schema"]
    turn = _component(schema, _component(schema, accepted)["properties"]["turn"])
    assert set(turn["properties"]) == {"id", "state", "answer", "failureCode"}
    assert "completed" in _component(schema, turn["properties"]["state"])["enum"]


def test_every_list_route_is_a_cursor_page(db, client):
    schema = _served_schema(client)
    lists = [
        "/api/v1/workspaces",
        "/api/v1/tokens",
        "/api/v1/bots",
        "/api/v1/agents/assistant/conversations",
        "/api/v1/agents/assistant/{conversation_id}/messages",
        "/api/v1/agents/assistant/{conversation_id}/memory-receipts",
        "/api/v1/workspaces/{workspace_id}/memory/versions",
        "/api/v1/workspaces/{workspace_id}/memory/proposals",
        "/api/v1/workspaces/{workspace_id}/key-sessions",
    ]

    for route in lists:
        operation = schema["paths"][route]["get"]
        ok = operation["responses"]["200"]["content"]["application/json"]["schema"]
        assert set(_component(schema, ok)["properties"]) == {"results", "next", "previous"}
        assert {"cursor", "limit"} <= {p["name"] for p in operation["parameters"]}, route


def _request_serializers() -> dict[tuple[str, str], object]:
    from drf_spectacular.generators import SchemaGenerator

    generator = SchemaGenerator()
    generator._initialise_endpoints()
    return {
        (path, method.lower()): view.schema.get_request_serializer()
        for path, _, method, view in generator._get_paths_and_endpoints()
    }


def test_every_json_request_body_has_an_example_the_server_accepts(db, client):
    schema = _served_schema(client)
    serializers = _request_serializers()

    checked = 0
    for route, method, operation in _operations(schema):
        body = operation.get("requestBody", {}).get("content", {}).get("application/json")
        if body is None:
            continue
        assert body.get("examples"), (method, route)
        declared = serializers[(route, method)]
        serializer_class = declared if isinstance(declared, type) else type(declared)
        for name, example in body["examples"].items():
            serializer = serializer_class(data=example["value"], context={"is_clear": False})
            assert serializer.is_valid(), (method, route, name, serializer.errors)
            checked += 1
    assert checked >= 15


def test_every_operation_lists_what_it_answers_to_a_credential_it_refuses(make_world, settings):
    """A revoked token, a token of another scope, a bot's token and another scheme, sent to
    every operation: each answer's code is one the operation lists under that status."""
    from rest_framework.test import APIClient

    from workspaces.models import ApiToken
    from workspaces.services import api_token_create, api_token_revoke

    settings.BEARER_FAILURE_LIMIT = 10_000
    world = make_world()
    member, team = world.tenant.member, world.tenant.team
    revoked, raw_revoked = api_token_create(user=member, team=team, name="revoked")
    api_token_revoke(token=revoked, actor=member)
    _, raw_mcp = api_token_create(user=member, team=team, name="mcp", scope=ApiToken.Scope.MCP)
    credentials = {
        "revoked": f"Bearer {raw_revoked}",
        "mcp": f"Bearer {raw_mcp}",
        "other scheme": "Basic bWVtYmVyOnB3",
    }
    schema = _served_schema(world.clients[next(iter(world.clients))])
    answered = set()

    for route, method, operation in _operations(schema):
        url = route.format(**world.ids)
        for name, header in credentials.items():
            response = getattr(APIClient(), method)(url, HTTP_AUTHORIZATION=header)
            if response.status_code < 400:
                continue
            code, status = response.json()["error"]["code"], str(response.status_code)
            answered.add(code)
            listed = operation["responses"].get(status)
            assert listed is not None, (name, method, route, status, code)
            assert code in listed["content"]["application/json"]["examples"], (
                name,
                method,
                route,
                code,
            )

    assert {"TOKEN_REVOKED", "TOKEN_SCOPE_REFUSED", "CREDENTIAL_KIND_REFUSED"} <= answered
