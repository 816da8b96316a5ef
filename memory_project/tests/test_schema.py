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
