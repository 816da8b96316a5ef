"""The one pagination of every list route: a cursor page `{results, next, previous}`.

`next` and `previous` are whole URLs (null at either end) that a client follows as they are;
`limit` picks the page size. A cursor names a position in the list's fixed ordering, not an
offset, so rows added while a client walks the list neither repeat nor go missing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.core import signing
from django.db.models import Model, QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory_project.api.serializers import is_whole_number
from workspaces.errors import ValidationFailed

PAGE_SIZE = 50
MAX_PAGE_SIZE = 100

PAGE_PARAMETERS = [
    OpenApiParameter(
        "cursor",
        str,
        OpenApiParameter.QUERY,
        description="Where to continue: the cursor in a page's `next` or `previous` URL.",
    ),
    OpenApiParameter(
        "limit",
        int,
        OpenApiParameter.QUERY,
        description=f"Rows per page, 1 to {MAX_PAGE_SIZE} ({PAGE_SIZE} if absent).",
    ),
]


class CursorPage(CursorPagination):
    page_size = PAGE_SIZE
    max_page_size = MAX_PAGE_SIZE
    page_size_query_param = "limit"

    def __init__(self, ordering: Sequence[str]) -> None:
        # The first field is the cursor's position; the rest only break its ties.
        self.ordering = tuple(ordering)

    def get_page_size(self, request: Request) -> int:
        # DRF falls back to the default for a limit it cannot read; a client that asked for
        # `limit=abc` is told instead, the parameter named.
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        if not (is_whole_number(raw) and 1 <= int(raw) <= self.max_page_size):
            raise ValidationFailed(
                fields={"limit": [f"Must be a whole number from 1 to {self.max_page_size}."]}
            )
        return int(raw)

    def paginate_queryset(
        self,
        queryset: QuerySet[Any, Any] | Sequence[Any],
        request: Request,
        view: APIView | None = None,
    ) -> list[Any] | None:
        # A position goes into the list's query as a value of its ordering field, so only
        # one this list gave out is taken back: a forged one (no date, a number past the
        # column, a NUL) would be a database error, and another list's would be no position.
        self.signer = signing.Signer(salt=f"{__name__}:{request.path}:{','.join(self.ordering)}")
        return super().paginate_queryset(queryset, request, view)

    # DRF keeps a cursor's position as text (its stubs say int), hence the `Any`s.
    def encode_cursor(self, cursor: Cursor) -> str:
        position: Any = cursor.position
        if position is not None:
            signed: Any = self.signer.sign(position)
            cursor = cursor._replace(position=signed)
        return super().encode_cursor(cursor)

    def decode_cursor(self, request: Request) -> Cursor | None:
        try:
            cursor = super().decode_cursor(request)
            if cursor is not None and cursor.position is not None:
                signed: Any = cursor.position
                position: Any = self.signer.unsign(signed)
                cursor = cursor._replace(position=position)
        except (NotFound, signing.BadSignature):
            raise ValidationFailed(
                fields={"cursor": ["Not a cursor this list gave out."]}
            ) from None
        return cursor


def paginated(
    request: Request,
    rows: QuerySet[Any],
    *,
    ordering: Sequence[str],
    serializer: type[serializers.BaseSerializer[Any]] | None = None,
    render: Callable[[list[Any]], Any] | None = None,
) -> Response:
    """One page of `rows` in `ordering`: each row through `serializer`, or, where a row's
    answer needs more than the row (its ciphertext opened, its key's liveness), the whole
    page through `render`. Exactly one of the two is given."""
    paginator = CursorPage(ordering)
    page: list[Model] = paginator.paginate_queryset(rows, request) or []
    if serializer is not None and render is None:
        return paginator.get_paginated_response(serializer(page, many=True).data)
    if render is not None and serializer is None:
        return paginator.get_paginated_response(render(page))
    raise TypeError("paginated takes exactly one of `serializer` and `render`")


def page_schema(item: type[serializers.Serializer], *, name: str) -> Callable[..., Any]:
    """The schema of a list route: the cursor parameters and a page of `item` rows."""
    page = inline_serializer(
        name=f"{name}Page",
        fields={
            "results": item(many=True),
            "next": serializers.URLField(allow_null=True, help_text="The next page, or null."),
            "previous": serializers.URLField(
                allow_null=True, help_text="The previous page, or null."
            ),
        },
    )
    return extend_schema(parameters=PAGE_PARAMETERS, responses=page)
