"""Assistant and automation routes. Thin: parse, call a selector or service, render."""

from __future__ import annotations

import uuid
from typing import Any

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request
from rest_framework.response import Response

from automation import capture, selectors, services
from automation.authentication import DeliveryCredentialAuthentication, DeliveryGrant
from automation.errors import (
    CaptureConflict,
    CaptureFlagged,
    CaptureRetired,
    CredentialSuperseded,
    IdempotencyKeyRequired,
    IdempotencyKeyReused,
    MemoryOversized,
    WorkspaceAiDisabled,
)
from automation.models import (
    AdmissionStatus,
    Conversation,
    Message,
    MessageRole,
    RecallStatus,
    TurnState,
)
from memory.edits import parse_changes
from memory.errors import MemoryEditInvalid
from memory.models import MemoryPolicy
from memory_project.api.pagination import page_schema, paginated
from memory_project.api.schema import refuses
from memory_project.api.serializers import QuerySerializer, StrictSerializer
from memory_project.api.views import ApiView
from workspaces.api.access import MEMBER_REFUSALS, caller_membership
from workspaces.api.headers import field_value, whole_number
from workspaces.api.input import validated
from workspaces.authentication import request_credential
from workspaces.errors import (
    CredentialExpired,
    DocumentUnreadable,
    InvalidHeader,
    KeySessionStoreUnavailable,
    KeySessionUnavailable,
    NotFound,
    RateLimited,
    ValidationFailed,
)

IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key", str, OpenApiParameter.HEADER, required=True
)
# Declared as text: a header is text, and a generated client then sends it as given.
KEY_SESSION_HEADER = OpenApiParameter(
    "X-Key-Session", str, OpenApiParameter.HEADER, description="An open key session's id."
)

MEMORY_STATE_HEADER = OpenApiParameter(
    "X-Memory-State",
    str,
    OpenApiParameter.HEADER,
    description="`version=<acknowledged version>; saving=<0|1>; conflict=<0|1>`",
)


def _own_conversation(request: Request, conversation_id: uuid.UUID) -> Conversation:
    """The caller's own conversation (`conversation_get_for_owner`): NotFound otherwise."""
    credential = request_credential(request)
    return selectors.conversation_get_for_owner(
        user=credential.user, team=credential.team, conversation_id=conversation_id
    )


def _key_session_from(request: Request) -> uuid.UUID | None:
    raw = request.headers.get("X-Key-Session")
    if raw is None or not raw.strip():
        return None
    try:
        return uuid.UUID(raw.strip())
    except ValueError:
        raise InvalidHeader(
            "X-Key-Session must be a key session id.", header="X-Key-Session"
        ) from None


def _idempotency_key_from(request: Request) -> str:
    raw = (request.headers.get("Idempotency-Key") or "").strip()
    if not raw:
        raise IdempotencyKeyRequired()
    # A header sent twice reaches the app as its values joined by commas (as a repeated
    # X-Base-Version does, refused for not being a number): a key with a comma may be two
    # keys, and which one was meant is a guess.
    if len(raw) > 200 or not raw.isprintable() or "," in raw:
        raise InvalidHeader(
            "Idempotency-Key must be one key: at most 200 printable characters, no comma.",
            header="Idempotency-Key",
        )
    return raw


def _memory_state_from(request: Request) -> services.MemoryState | None:
    """X-Memory-State: `version=<acknowledged version>; saving=<0|1>; conflict=<0|1>`."""
    raw = request.headers.get("X-Memory-State")
    if raw is None:
        return None
    message = "X-Memory-State must look like `version=12; saving=0; conflict=0`."
    pairs = [field_value(part).partition("=")[::2] for part in raw.split(";") if field_value(part)]
    fields = dict(pairs)
    saving, conflict = fields.get("saving", "0"), fields.get("conflict", "0")
    if (
        set(fields) - {"version", "saving", "conflict"}
        # A field named twice: which value was meant is a guess.
        or len(fields) < len(pairs)
        or saving not in {"0", "1"}
        or conflict not in {"0", "1"}
    ):
        raise InvalidHeader(message, header="X-Memory-State")
    version = whole_number(fields.get("version", ""), header="X-Memory-State", message=message)
    return services.MemoryState(
        acknowledged_version=version,
        save_in_flight=saving == "1",
        has_unresolved_conflict=conflict == "1",
    )


class ConversationListCreateApi(ApiView):
    class InputSerializer(StrictSerializer):
        workspaceId = serializers.IntegerField()

    class OutputSerializer(serializers.Serializer):
        id = serializers.UUIDField()
        workspaceId = serializers.IntegerField(source="workspace_id")
        createdAt = serializers.DateTimeField(source="created_at")

    @extend_schema(
        summary="Start a conversation with the assistant",
        examples=[OpenApiExample("A conversation", value={"workspaceId": 1}, request_only=True)],
    )
    @refuses(*MEMBER_REFUSALS)
    @extend_schema(request=InputSerializer, responses={201: OutputSerializer})
    def post(self, request: Request) -> Response:
        data = validated(self.InputSerializer(data=request.data))
        membership = caller_membership(request, data["workspaceId"])
        conversation = services.conversation_create(
            workspace=membership.workspace, owner=membership.user
        )
        return Response(self.OutputSerializer(conversation).data, status=status.HTTP_201_CREATED)

    class ListQuerySerializer(QuerySerializer):
        workspaceId = serializers.IntegerField(
            required=False,
            min_value=1,
            max_value=2**63 - 1,
            help_text="Only the conversations in this workspace.",
        )

    @extend_schema(summary="List your conversations", parameters=[ListQuerySerializer])
    @refuses(ValidationFailed)
    @page_schema(OutputSerializer, name="Conversation")
    def get(self, request: Request) -> Response:
        query = validated(self.ListQuerySerializer(data=request.query_params))
        credential = request_credential(request)
        conversations = selectors.conversation_list_for_user(
            user=credential.user, team=credential.team, workspace_id=query.get("workspaceId")
        )
        return paginated(
            request,
            conversations,
            ordering=("-created_at", "-id"),
            serializer=self.OutputSerializer,
        )


class TurnProgressSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="turn_id")
    state = serializers.ChoiceField(choices=TurnState.choices)
    answer = serializers.CharField(allow_null=True)
    failureCode = serializers.CharField(source="failure_code", allow_null=True)


class MessageSendApi(ApiView):
    class InputSerializer(StrictSerializer):
        text = serializers.CharField(max_length=20_000, trim_whitespace=False)

    class OutputSerializer(serializers.Serializer):
        admissionId = serializers.UUIDField()
        replayed = serializers.BooleanField()
        turn = TurnProgressSerializer()

    @extend_schema(
        summary="Send a message: admit one assistant turn",
        examples=[
            OpenApiExample(
                "A message", value={"text": "Remember that I prefer tabs."}, request_only=True
            )
        ],
    )
    @refuses(
        NotFound,
        IdempotencyKeyRequired,
        IdempotencyKeyReused,
        InvalidHeader,
        KeySessionUnavailable,
        KeySessionStoreUnavailable,
        WorkspaceAiDisabled,
        RateLimited,
    )
    @extend_schema(
        parameters=[
            IDEMPOTENCY_HEADER,
            KEY_SESSION_HEADER,
            MEMORY_STATE_HEADER,
        ],
        request=InputSerializer,
        responses={202: OutputSerializer},
    )
    def post(self, request: Request, conversation_id: uuid.UUID) -> Response:
        credential = request_credential(request)
        conversation = _own_conversation(request, conversation_id)
        idempotency_key = _idempotency_key_from(request)
        data = validated(self.InputSerializer(data=request.data))
        admitted = services.message_admit(
            conversation=conversation,
            sender=credential.user,
            text=data["text"],
            idempotency_key=idempotency_key,
            key_session_id=_key_session_from(request),
            memory_state=_memory_state_from(request),
        )
        body = {
            "admissionId": admitted.admission.pk,
            "replayed": not admitted.is_new,
            "turn": selectors.turn_progress_get(turn_id=admitted.turn.pk, owner=credential.user),
        }
        return Response(self.OutputSerializer(body).data, status=status.HTTP_202_ACCEPTED)

    class TranscriptSerializer(serializers.Serializer):
        turnId = serializers.UUIDField(source="turn_id")
        role = serializers.ChoiceField(choices=MessageRole.choices)
        content = serializers.CharField(source="body.content", default="")
        toolCalls = serializers.ListField(source="body.toolCalls", default=list)
        createdAt = serializers.DateTimeField(source="created_at")

    @extend_schema(summary="Read the conversation's transcript")
    @refuses(NotFound, ValidationFailed, DocumentUnreadable)
    @page_schema(TranscriptSerializer, name="TranscriptEntry")
    def get(self, request: Request, conversation_id: uuid.UUID) -> Response:
        conversation = _own_conversation(request, conversation_id)

        def render(page: list[Message]) -> Any:  # a list, which DRF's stubs type as a dict
            entries = selectors.transcript_entries_opened(conversation=conversation, messages=page)
            return self.TranscriptSerializer(entries, many=True).data

        messages = selectors.transcript_messages(conversation=conversation)
        return paginated(request, messages, ordering=("created_at", "sequence"), render=render)


class MemoryReceiptsApi(ApiView):
    """Which memory revision each turn's model calls were given, or why none: no text."""

    class OutputSerializer(serializers.Serializer):
        admissionId = serializers.UUIDField(source="id")
        turnId = serializers.UUIDField(source="turn.id")
        turnState = serializers.ChoiceField(source="turn.state", choices=TurnState.choices)
        admittedAt = serializers.DateTimeField(source="admitted_at")
        mode = serializers.ChoiceField(choices=MemoryPolicy.Mode.choices)
        recallStatus = serializers.ChoiceField(
            source="recall_status", choices=RecallStatus.choices, allow_blank=True
        )
        recallVersion = serializers.IntegerField(source="recall_version", allow_null=True)
        recalledAt = serializers.DateTimeField(source="recalled_at", allow_null=True)
        recallCount = serializers.IntegerField(source="recall_count")
        captureStatus = serializers.ChoiceField(source="status", choices=AdmissionStatus.choices)
        # Why the turn's latest capture was refused (an error code), blank if none was.
        captureRefusalCode = serializers.CharField(source="capture_refusal_code")
        capturedVersion = serializers.IntegerField(
            source="committed_revision.version", allow_null=True, default=None
        )

    @extend_schema(summary="List the conversation's memory receipts (no text)")
    @refuses(NotFound, ValidationFailed)
    @page_schema(OutputSerializer, name="MemoryReceipt")
    def get(self, request: Request, conversation_id: uuid.UUID) -> Response:
        conversation = _own_conversation(request, conversation_id)
        return paginated(
            request,
            selectors.memory_receipts_for_conversation(conversation=conversation),
            ordering=("-admitted_at", "-id"),
            serializer=self.OutputSerializer,
        )


class MemoryPreviewApi(ApiView):
    """What the assistant will be given: the memory block (or the withheld note) of the next
    model call, for a turn the caller would send now with these headers."""

    class OutputSerializer(serializers.Serializer):
        status = serializers.ChoiceField(choices=RecallStatus.choices)
        version = serializers.IntegerField(allow_null=True)
        # Exactly the text appended to the model call's system message; empty for off/empty.
        block = serializers.CharField(allow_blank=True)

    @extend_schema(
        summary="Preview the memory block the assistant's next model call will be given",
        examples=[
            OpenApiExample(
                "Provided",
                value={
                    "status": "provided",
                    "version": 3,
                    "block": '<workspace-memory version="3">\n(preamble)\n\n- Prefers tabs\n'
                    "</workspace-memory>",
                },
                response_only=True,
            ),
            OpenApiExample(
                "Withheld",
                value={
                    "status": "unavailable",
                    "version": None,
                    "block": "<workspace-memory-status>Saved memory is not provided because "
                    "(reason).</workspace-memory-status>",
                },
                response_only=True,
            ),
        ],
    )
    @refuses(*MEMBER_REFUSALS, InvalidHeader)
    @extend_schema(parameters=[KEY_SESSION_HEADER, MEMORY_STATE_HEADER], responses=OutputSerializer)
    def get(self, request: Request, workspace_id: int) -> Response:
        membership = caller_membership(request, workspace_id)
        preview = services.memory_preview(
            membership=membership,
            key_session_id=_key_session_from(request),
            memory_state=_memory_state_from(request),
        )
        return Response(self.OutputSerializer(preview).data)


class AutomationMemoryApi(ApiView):
    """The only automatic writer of memory, for agent runtimes holding a delivery credential."""

    authentication_classes = [DeliveryCredentialAuthentication]

    def get_authenticators(self) -> list[BaseAuthentication]:
        # A recall (GET, before every model call) reads its admission and the live facts it
        # decides on in one statement. Without a request (a test asking which credential the
        # route takes), or on another method, the route's own class.
        request = getattr(self, "request", None)
        if request is not None and request.method == "GET":
            return [DeliveryCredentialAuthentication(with_recall_facts=True)]
        return super().get_authenticators()

    class InputSerializer(StrictSerializer):
        expectedVersion = serializers.IntegerField(min_value=0)
        changes = serializers.JSONField()

    class ReceiptSerializer(serializers.Serializer):
        admissionId = serializers.UUIDField(source="admission_id")
        version = serializers.IntegerField()
        bytes = serializers.IntegerField()
        committedAt = serializers.DateTimeField(source="committed_at")
        replayed = serializers.BooleanField(source="is_replay")
        unchanged = serializers.BooleanField(source="is_unchanged")

    class RecallQuerySerializer(QuerySerializer):
        purpose = serializers.ChoiceField(choices=["recall"])

    # The answer's schema: `services.Recall`'s fields, which `get` renders as they are.
    class RecallSerializer(serializers.Serializer):
        status = serializers.CharField()
        version = serializers.IntegerField(allow_null=True)
        text = serializers.CharField(allow_null=True)

    @extend_schema(summary="Recall the memory for the turn")
    @refuses(
        NotFound,
        ValidationFailed,
        CredentialExpired,
        KeySessionUnavailable,
        KeySessionStoreUnavailable,
    )
    @extend_schema(parameters=[RecallQuerySerializer], responses=RecallSerializer)
    def get(self, request: Request, workspace_id: int) -> Response:
        grant = _grant(request, workspace_id)
        # Runs before every model call: the one valid query is recognised without building
        # a serializer, and anything else gets the serializer's own VALIDATION_FAILED answer.
        if request.query_params.get("purpose") != "recall":
            validated(self.RecallQuerySerializer(data=request.query_params))
        recall = services.memory_recall(admission=grant.admission, live=grant.recall_facts)
        # Its fields are the answer's, already JSON types (RecallSerializer documents them):
        # rendered as they stand, without a serializer's per-request copy of its fields or
        # the deep copy `dataclasses.asdict` makes of each value (about 10 microseconds).
        return Response(vars(recall))

    @extend_schema(
        summary="Capture memory changes for the turn",
        examples=[
            OpenApiExample(
                "Add a line",
                value={
                    "expectedVersion": 1,
                    "changes": [{"op": "add", "line": "- Likes green tea"}],
                },
                request_only=True,
            )
        ],
    )
    @refuses(
        NotFound,
        IdempotencyKeyRequired,
        InvalidHeader,
        CredentialExpired,
        KeySessionUnavailable,
        KeySessionStoreUnavailable,
        CaptureConflict,
        CaptureFlagged,
        CaptureRetired,
        CredentialSuperseded,
        MemoryOversized,
        MemoryEditInvalid,
    )
    @extend_schema(
        parameters=[IDEMPOTENCY_HEADER, KEY_SESSION_HEADER],
        request=InputSerializer,
        responses=ReceiptSerializer,
    )
    def put(self, request: Request, workspace_id: int) -> Response:
        admission = _grant(request, workspace_id).admission
        if _idempotency_key_from(request) != f"memory:{admission.pk}":
            raise InvalidHeader(
                "Idempotency-Key must be memory:<admissionId> of this credential's turn.",
                header="Idempotency-Key",
            )
        key_session_id = _key_session_from(request)
        if key_session_id is None:
            raise KeySessionUnavailable(reason="missing")
        data = validated(self.InputSerializer(data=request.data))
        capture_receipt = capture.capture_commit(
            admission=admission,
            owner=admission.owner,
            workspace=admission.workspace,
            key_session_id=key_session_id,
            expected_version=data["expectedVersion"],
            changes=parse_changes(data["changes"]),
        )
        return Response(self.ReceiptSerializer(capture_receipt).data)


def _grant(request: Request, workspace_id: int) -> DeliveryGrant:
    """What a delivery credential grants, if its admission is for this workspace (else 404)."""
    grant = request.auth
    if not isinstance(grant, DeliveryGrant) or grant.admission.workspace_id != workspace_id:
        raise NotFound("No such workspace.")
    return grant
