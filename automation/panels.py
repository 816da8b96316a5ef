"""The assistant's panels of the Memory frame, registered with memory's frame hook."""

from __future__ import annotations

import uuid

from django.urls import reverse

from memory.panels import FramePanel


def assistant_api_urls() -> dict[str, str]:
    # The page script appends "<conversation id>/messages" or "<conversation id>/memory-receipts"
    # to `assistant`, so it is the messages route with its tail cut off.
    placeholder = uuid.UUID(int=0)
    messages = reverse("message-send", kwargs={"conversation_id": placeholder})
    return {
        "conversations": reverse("conversation-list"),
        "assistant": messages.removesuffix(f"{placeholder}/messages"),
    }


ASSISTANT_PANEL = FramePanel(
    template_name="automation/_assistant_panel.html", api_urls=assistant_api_urls
)

# The preview's route is in the panel's own markup (it names the page's workspace).
MEMORY_PREVIEW_PANEL = FramePanel(
    template_name="automation/_memory_preview_panel.html", api_urls=dict
)
