"""The automation document routes' shapes: the document routes' own
(`memory.api.document_common`) under the automation routes' schema component names, and
search, which only these routes offer; and the routes' operation schemas (`SCHEMAS`). Used
as `shapes.<Name>` by the routes and the MCP server. The component names are those the
schema has always published (the serializers were nested in their views then), so
generated clients keep their types."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers
from rest_framework.serializers import Serializer

from memory.api import document_common as common
from memory.errors import MemoryNamespaceReserved
from workspaces.errors import KeySessionUnavailable, NotFound
from workspaces.models import AuthorKind


def _published_as(component_name: str, shape: type[Serializer]) -> type[Serializer]:
    """`shape`, under its own component name in the schema."""
    return extend_schema_serializer(component_name=component_name)(
        type(component_name, (shape,), {"__module__": __name__})
    )


Save = _published_as(
    "AutomationDocumentApiAutomationDocumentSave", common.DocumentContentSerializer
)
Document = _published_as("AutomationDocumentApiAutomationDocument", common.DocumentSerializer)
State = _published_as("AutomationDocumentState", common.DocumentStateSerializer)
ListItem = _published_as(
    "AutomationDocumentApiAutomationDocumentListItem", common.DocumentListItemSerializer
)
Move = _published_as(
    "AutomationDocumentMoveApiAutomationDocumentMove", common.DocumentMoveSerializer
)
Restore = _published_as(
    "AutomationDocumentRestoreApiAutomationDocumentRestore", common.DocumentRestoreSerializer
)


@extend_schema_serializer(component_name="AutomationDocumentApiAutomationDocumentWritten")
class Written(common.RevisionSerializer):
    authorKind = serializers.ChoiceField(source="author_kind", choices=AuthorKind.choices)


SearchQuery = common.SearchQuerySerializer


@extend_schema_serializer(component_name="AutomationDocumentSearchHit")
class SearchHit(common.SearchHitSerializer):
    pass


@extend_schema_serializer(
    component_name="AutomationDocumentSearchApiAutomationDocumentSearchResults"
)
class SearchResults(common.SearchResultsSerializer):
    results = SearchHit(source="hits", many=True)


SCHEMAS = common.DocumentSchemas(
    noun="note",
    refusals=(NotFound, MemoryNamespaceReserved, KeySessionUnavailable),
    read_or_list=common.ReadOrList(
        component_name="AutomationDocumentReadOrList",
        document=Document,
        item=ListItem,
        description=(
            "With `path`: read that document (one object). Without: list documents by path "
            "(`prefix`, `includeDeleted`) a cursor page at a time, never any under the memory "
            "namespace."
        ),
    ),
    save_request=Save,
    move_request=Move,
    restore_request=Restore,
    written=Written,
    state=State,
)
