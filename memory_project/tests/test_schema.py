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
