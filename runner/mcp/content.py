"""What an MCP server says, as runner reads it: its tools as ``Listed``, a call's result as an observation.

A result's structured content is the observation as JSON; otherwise its content blocks are, one a line:
text as it is, and a placeholder naming the MIME type for what a model cannot read here (an image, audio,
a binary resource). An error result is an ``ERROR:`` observation with the server's own words.
A result longer than the server's cap is cut (``capped``), with a marker the model reads.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from mcp import types

from .. import _jsontext


class Listed(NamedTuple):
    """One tool a server lists: its name, description, input schema and annotations (None: not given)."""

    name: str
    description: str
    parameters: dict[str, Any]
    read_only: bool | None
    destructive: bool | None
    idempotent: bool | None


def listed(tool: types.Tool) -> Listed:
    """The tool as the registry takes it."""
    hints = tool.annotations
    description = tool.description or tool.title or (hints.title if hints is not None else None) or ""
    return Listed(tool.name, description, dict(tool.input_schema),
                  hints.read_only_hint if hints is not None else None,
                  hints.destructive_hint if hints is not None else None,
                  hints.idempotent_hint if hints is not None else None)


def observation(name: str, result: types.CallToolResult) -> str:
    """The observation a call's result becomes (``ERROR: NAME failed: ...`` for an error result)."""
    text = "\n".join(block_text(block) for block in result.content)
    if result.is_error:
        return f"ERROR: {name} failed: {text or 'the server reported an error and gave no message'}"
    if result.structured_content is not None:
        try:
            return _jsontext.strict(result.structured_content)
        except ValueError:  # NaN and the like: the text blocks say it instead
            pass
    return text


def capped(text: str, max_chars: int | None) -> str:
    """``text`` cut to ``max_chars`` (None: whole), saying how many characters were left out."""
    if max_chars is None or len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}... [cut: {len(text) - max_chars} more characters of the MCP result]"


def block_text(block: types.ContentBlock) -> str:
    """One content block as text: text itself, a placeholder for what is not text."""
    match block:
        case types.TextContent(text=text):
            return text
        case types.ImageContent(mime_type=mime):
            return f"[image: {mime}]"
        case types.AudioContent(mime_type=mime):
            return f"[audio: {mime}]"
        case types.ResourceLink(uri=uri, mime_type=mime):
            return f"[resource link: {uri}" + (f" ({mime})]" if mime else "]")
        case types.EmbeddedResource(resource=types.TextResourceContents(text=text)):
            return text
        case types.EmbeddedResource(resource=resource):
            return f"[resource: {resource.uri}" + (f" ({resource.mime_type})]" if resource.mime_type else "]")
    return f"[{getattr(block, 'type', 'unknown')} content]"
