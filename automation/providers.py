"""Model providers behind one interface: a deterministic scripted one (the default, so the
product runs and is tested offline) and any OpenAI-compatible chat-completions endpoint."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.conf import settings

from automation.prompts import MEMORY_CLOSE


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ChatMessage:
    role: str  # "user", "assistant" or "tool"
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelReply:
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()


class ProviderUnavailable(Exception):
    """The model could not be reached or answered with something unusable."""


class ModelProvider(Protocol):
    def complete(
        self, *, system: str, messages: list[ChatMessage], tools: list[ToolSpec]
    ) -> ModelReply: ...


_BLOCK = re.compile(
    r"<workspace-memory version=\"\d+\">\n.*?\n\n(?P<text>.*)\n" + re.escape(MEMORY_CLOSE), re.S
)
_WITHHELD = re.compile(r"<workspace-memory-status>(?P<note>.*?)</workspace-memory-status>", re.S)
_WORD = re.compile(r"\w+")
# Words any question has; a memory line is not about the question for sharing one of them.
_QUESTION_WORDS = frozenset(
    "a about an and any anything are can did do does else for how i in is it know me my "  # noqa: SIM905
    "now of on remember tell that the there this to was what when where which who why you "
    "your".split()
)


class ScriptedProvider:
    """Deterministic stand-in for a model.

    "remember <text>" adds the line "- <text>"; "forget <text>" removes the one memory
    line containing <text>. Anything else is answered as a model would: with the memory
    lines that share a word with the message, or the reason memory was withheld, never
    the block itself. Its framing (markers, preamble) and the lines the message is not
    about stay out of the answer, and so out of the transcript that is replayed to every
    later model call of the conversation, after a Clear too.
    """

    def complete(
        self, *, system: str, messages: list[ChatMessage], tools: list[ToolSpec]
    ) -> ModelReply:
        last = messages[-1]
        if last.role == "tool":
            return ModelReply(text=_describe_tool_result(last.content))
        text = last.content.strip()
        block = _BLOCK.search(system)
        lines = block.group("text").splitlines() if block else []
        if text.lower().startswith("remember "):
            line = "- " + text[len("remember ") :].strip()
            return _call("remember_in_memory", {"changes": [{"op": "add", "line": line}]})
        if text.lower().startswith("forget "):
            wanted = text[len("forget ") :].strip()
            matches = [line for line in lines if wanted and wanted in line]
            if len(matches) != 1:
                return ModelReply(text=f"I found {len(matches)} memory lines with that text.")
            return _call(
                "remember_in_memory", {"changes": [{"op": "remove", "target": matches[0]}]}
            )
        if block:
            asked = _words(text) - _QUESTION_WORDS
            relevant = [line for line in lines if asked & _words(line)]
            if not relevant:
                return ModelReply(text="Nothing in my memory is about that.")
            return ModelReply(text="From memory:\n" + "\n".join(relevant))
        withheld = _WITHHELD.search(system)
        if withheld:
            return ModelReply(text=f"No memory was given to me: {withheld.group('note')}")
        return ModelReply(text="No memory was given to me.")


def _words(text: str) -> set[str]:
    return {word.casefold() for word in _WORD.findall(text)}


def _call(name: str, arguments: dict[str, Any]) -> ModelReply:
    return ModelReply(tool_calls=(ToolCall(id="call-1", name=name, arguments=arguments),))


def _describe_tool_result(content: str) -> str:
    result = json.loads(content)
    status = result.get("status")
    if status == "remembered":
        return f"Remembered (memory version {result['version']})."
    if status == "proposed" and result.get("rules"):
        return (
            "I suggested that change; it reads as an instruction to me, so it is waiting for "
            f"you to review ({', '.join(result['rules'])})."
        )
    if status == "proposed":
        return "I suggested that change; it is waiting for you to apply or dismiss it."
    if status == "unchanged":
        return "That is already in memory."
    if status == "off":
        return "Memory is off, so I did not keep that."
    return f"I could not change memory: {result.get('code', status)}."


class OpenAICompatibleProvider:
    """POST {OPENAI_BASE_URL}/chat/completions with the system message, the transcript and
    the tools in the function-calling format."""

    def __init__(self, *, base_url: str, api_key: str, model: str, timeout: float = 60.0):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key = api_key
        self.model = model
        self.timeout = timeout

    def complete(
        self, *, system: str, messages: list[ChatMessage], tools: list[ToolSpec]
    ) -> ModelReply:
        payload = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}]
            + [_to_openai(message) for message in messages],
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                }
                for tool in tools
            ],
        }
        request = urllib.request.Request(
            self.url,
            data=json.dumps(payload).encode(),
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {self.api_key}",
            },
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                body = json.loads(response.read())
            message = body["choices"][0]["message"]
            calls = tuple(
                ToolCall(
                    id=call["id"],
                    name=call["function"]["name"],
                    arguments=json.loads(call["function"].get("arguments") or "{}"),
                )
                for call in message.get("tool_calls") or []
            )
        except (urllib.error.URLError, TimeoutError, KeyError, IndexError, ValueError) as error:
            raise ProviderUnavailable(type(error).__name__) from None
        return ModelReply(text=message.get("content") or "", tool_calls=calls)


def _to_openai(message: ChatMessage) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    entry: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        entry["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in message.tool_calls
        ]
    return entry


def provider_from_settings() -> ModelProvider:
    if settings.MODEL_PROVIDER == "openai":
        return OpenAICompatibleProvider(
            base_url=settings.OPENAI_BASE_URL,
            api_key=settings.OPENAI_API_KEY,
            model=settings.OPENAI_MODEL,
        )
    return ScriptedProvider()
