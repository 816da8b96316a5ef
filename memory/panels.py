"""Panels a higher app shows beside the Memory frame, so that memory never names them.

Imports point automation -> memory -> workspaces: the assistant registers its panel here
from its `AppConfig.ready()`, and the frame renders whatever is registered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class FramePanel:
    # Included in the frame with the page's context (workspace, membership, key session).
    template_name: str
    # The routes the page script calls for this panel, added to the frame's `urls`.
    api_urls: Callable[[], dict[str, str]]


_panels: list[FramePanel] = []


def frame_panel_register(panel: FramePanel) -> None:
    """Show `panel` in every Memory frame. Registering the same panel again changes nothing."""
    if panel not in _panels:
        _panels.append(panel)


def frame_panels() -> tuple[FramePanel, ...]:
    return tuple(_panels)
