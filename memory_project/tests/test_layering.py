"""Imports point automation -> memory -> workspaces: a lower app never names a higher one.

Where a lower app must show or react to something above it, it offers a hook (a setting, a
registered callback, an admin class to extend) that the higher app fills.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.apps import apps
from django.conf import settings

LAYERS = ("workspaces", "memory", "automation")
LOWER = [(app, LAYERS[index + 1 :]) for index, app in enumerate(LAYERS[:-1])]
TEMPLATE_REFERENCE = re.compile(r"""{%\s*(?:include|extends)\s+["'](\w+)/""")


def _modules(app: str) -> list[Path]:
    root = Path(settings.BASE_DIR) / app
    return [
        path
        for path in sorted(root.rglob("*.py"))
        if not {"tests", "migrations"} & set(path.relative_to(root).parts)
    ]


def _string_constants(tree: ast.AST) -> list[str]:
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


@pytest.mark.parametrize(("app", "higher"), LOWER)
def test_a_lower_app_imports_no_higher_app(app, higher):
    found = []
    for path in _modules(app):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            found += [(path.name, name) for name in names if name.split(".")[0] in higher]

    assert found == []


@pytest.mark.parametrize(("app", "higher"), LOWER)
def test_a_lower_app_names_no_model_of_a_higher_app(app, higher):
    labels = {
        model._meta.label_lower
        for name in higher
        for model in apps.get_app_config(name).get_models()
    }

    found = [
        (path.name, text)
        for path in _modules(app)
        for text in _string_constants(ast.parse(path.read_text()))
        if text.lower() in labels
    ]

    assert found == []


@pytest.mark.parametrize(("app", "higher"), LOWER)
def test_a_lower_apps_templates_include_no_higher_apps_template(app, higher):
    root = Path(settings.BASE_DIR) / "templates" / app

    found = [
        (path.name, folder)
        for path in sorted(root.rglob("*.html"))
        for folder in TEMPLATE_REFERENCE.findall(path.read_text())
        if folder in higher
    ]

    assert found == []


@pytest.mark.parametrize("module", ["memory/api/documents.py", "automation/api/documents.py"])
def test_each_document_route_module_is_a_thin_caller_of_the_one_document_service(module):
    """Both actors' document routes parse, call `memory.documents` and render: no state
    change of their own, and short enough to read at once."""
    source = (Path(settings.BASE_DIR) / module).read_text()
    imported = {
        node.module
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and node.module
    }

    assert len(source.splitlines()) < 100
    assert "memory" in imported or "memory.documents" in imported
    assert not {name for name in imported if name.endswith(".services")}
