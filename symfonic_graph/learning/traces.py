"""Recorded conversations: ``Trace`` and a streaming ``load_traces``.

A trace is one conversation as the gate reads it: LangChain messages, their
dicts, or the OpenAI chat-completions shape. ``load_traces`` reads a JSON
file (a list of ``{"id", "messages", "outcome"}`` objects, or one bare list
of messages) or a JSONL file (one such object per line) one trace at a time,
so replaying or mining 100,000 traces holds one trace in memory, not the file.
A gzip-compressed file (known by its first bytes, whatever its name) is read
the same way, decompressed as it streams.

Example:
    >>> import json, tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "t.jsonl"
    >>> _ = path.write_text(json.dumps({"id": "t1", "messages": [], "outcome": "success"}) + "\\n")
    >>> [(t.id, t.outcome) for t in load_traces(path)]
    [('t1', 'success')]
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final, Literal

from symfonic_graph.errors import ValidationError

__all__ = ["MAX_ENTRY_CHARS", "Outcome", "Trace", "load_traces"]

Outcome = Literal["success", "failure"]
MAX_ENTRY_CHARS: Final = 64 * 1024 * 1024
"""Longest entry (a JSONL line, or one item of a JSON list), in characters."""
_CHUNK: Final = 1 << 20
_JSONL_SUFFIXES: Final = (".jsonl", ".ndjson")
_GZIP_MAGIC: Final = b"\x1f\x8b"


@dataclass(frozen=True, slots=True)
class Trace:
    """One recorded conversation.

    Attributes:
        id: names the conversation in reports (replay's ``trace_ids``, mining's ``examples``).
        messages: the conversation, in any shape the gate reads.
        outcome: ``"success"``, ``"failure"`` or None when unknown.

    Example:
        >>> Trace("t1", [], "success").outcome
        'success'
    """

    id: str
    messages: Sequence[Any]
    outcome: Outcome | None = None


def _entry(where: str, item: object, default_id: str) -> Trace:
    """One validated trace from a decoded entry (errors name ``where``)."""
    if not isinstance(item, Mapping):
        raise ValidationError(where, "must be an object with id, messages and outcome")
    unknown = set(item) - {"id", "messages", "outcome"}
    if unknown:
        raise ValidationError(f"{where}: {sorted(unknown)[0]}", "unknown field (expected id, messages, outcome)")
    trace_id = item.get("id", default_id)
    if isinstance(trace_id, int) and not isinstance(trace_id, bool):
        trace_id = str(trace_id)
    if not isinstance(trace_id, str) or not trace_id:
        raise ValidationError(f"{where}: id", "must be a non-empty string")
    messages = item.get("messages")
    if not isinstance(messages, list):
        raise ValidationError(f"{where}: messages", "must be a list")
    _check_messages(f"{where}: messages", messages)
    outcome = item.get("outcome")
    if outcome not in (None, "success", "failure"):
        raise ValidationError(f"{where}: outcome", 'must be "success", "failure" or null')
    return Trace(trace_id, messages, outcome)


def _check_messages(where: str, messages: list[Any]) -> None:
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ValidationError(f"{where}[{index}]", "must be an object (a message)")


def _decode(where: str, text: str) -> Any:
    """One entry's JSON; nesting too deep for the decoder is one typed error, never a RecursionError."""
    if len(text) > MAX_ENTRY_CHARS:
        raise ValidationError(where, f"longer than {MAX_ENTRY_CHARS} characters; split the conversation")
    try:
        return json.loads(text)
    except RecursionError:
        raise ValidationError(where, "nested too deeply for a conversation (arrays or objects inside each "
                                     "other hundreds of levels deep)") from None
    except ValueError as exc:
        raise ValidationError(where, f"not valid JSON ({exc})") from None


def _jsonl(name: str, handle: IO[str]) -> Iterator[Trace]:
    number = 0
    while True:
        line = handle.readline(MAX_ENTRY_CHARS + 1)
        if not line:
            return
        number += 1
        if len(line) > MAX_ENTRY_CHARS:
            raise ValidationError(f"{name}: line {number}",
                                  f"longer than {MAX_ENTRY_CHARS} characters; split the conversation")
        if line.strip():
            where = f"{name}: line {number}"
            yield _entry(where, _decode(where, line), str(number))


class _ArrayReader:
    """The items of a top-level JSON array, decoded one at a time from chunks."""

    def __init__(self, name: str, handle: IO[str]) -> None:
        self.name, self.handle = name, handle
        self.buf, self.pos, self.line, self.eof = "", 0, 1, False
        self.decoder = json.JSONDecoder()

    def _more(self) -> bool:
        if self.eof:
            return False
        chunk = self.handle.read(_CHUNK)
        if not chunk:
            self.eof = True
            return False
        self.line += self.buf.count("\n", 0, self.pos)
        self.buf, self.pos = self.buf[self.pos:] + chunk, 0
        return True

    def _skip_space(self) -> str:
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in " \t\r\n":
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                return ""

    def where(self) -> str:
        return f"{self.name}: line {self.line + self.buf.count(chr(10), 0, self.pos)}"

    def items(self) -> Iterator[tuple[str, Any]]:
        """``(where, item)`` for each item; raises ValidationError on malformed JSON."""
        if self._skip_space() != "[":
            raise ValidationError(self.where(), "a JSON file must hold a list (of traces, or of messages)")
        self.pos += 1
        first = True
        while True:
            char = self._skip_space()
            if not char:
                raise ValidationError(self.where(), "the list is not closed (truncated file?)")
            if char == "]":
                self.pos += 1
                if self._skip_space():
                    raise ValidationError(self.where(), "unexpected text after the list")
                return
            if not first:
                if char != ",":
                    raise ValidationError(self.where(), "expected ',' or ']' between entries")
                self.pos += 1
                char = self._skip_space()
            if not char:
                raise ValidationError(self.where(), "the list is not closed (truncated file?)")
            first = False
            where = self.where()
            yield where, self._item(where)

    def _item(self, where: str) -> Any:
        while True:
            end = self._complete_end()
            if end is not None:
                text = self.buf[self.pos:end]
                self.pos = end
                return _decode(where, text)
            if len(self.buf) - self.pos > MAX_ENTRY_CHARS:
                raise ValidationError(where, f"longer than {MAX_ENTRY_CHARS} characters; split the conversation")
            self._more()  # at the end of the file, the next pass decodes what is left (and reports it)

    def _complete_end(self) -> int | None:
        """Where the item starting at ``pos`` ends, if the buffer holds all of it."""
        try:
            _, end = self.decoder.raw_decode(self.buf, self.pos)
        except RecursionError:
            return len(self.buf) if self.eof else None
        except json.JSONDecodeError as exc:
            truncated = exc.pos >= len(self.buf) - 8 or exc.msg.startswith("Unterminated string")
            if truncated and not self.eof:
                return None  # the entry goes on in the next chunk
            return len(self.buf)  # a real error: decoding the rest reports it at the same place
        if end == len(self.buf) and not self.eof:
            return None  # a number or literal may go on in the next chunk
        return end


def load_traces(path: str | os.PathLike[str]) -> Iterator[Trace]:
    """Yield the traces of a JSON or JSONL file, one at a time.

    JSON: a list of ``{"id", "messages", "outcome"}`` objects, streamed item
    by item, or one bare list of messages (one trace, named after the file).
    JSONL (``.jsonl``/``.ndjson``, or any file whose first character is
    ``{``): one such object per line. ``id`` defaults to the entry's number;
    ``outcome`` is ``"success"``, ``"failure"`` or absent. Either may be
    gzip-compressed (``traces.jsonl.gz``): known by the gzip magic bytes, so
    the name need not end in ``.gz``; a name ending in ``.gz`` must be gzip.

    Raises:
        ValidationError: a malformed entry, naming the file and the entry,
            e.g. ``traces.jsonl: line 7: messages: must be a list``; a file
            that cannot be read, or a broken gzip stream (``traces.jsonl.gz:
            not a valid gzip file (...)``).
    """
    name = os.fspath(path)
    compressed = _is_gzip(name)
    plain = Path(name[:-3] if compressed and name.lower().endswith(".gz") else name)
    try:
        handle = _open_text(name, compressed)
    except OSError as exc:
        raise ValidationError(name, f"cannot read: {exc.strerror}") from None
    try:
        head = handle.read(1)
        while head.isspace():
            head = handle.read(1)
        if not head:
            return
        handle.close()
        handle = _open_text(name, compressed)
        if plain.suffix.lower() in _JSONL_SUFFIXES or head == "{":
            yield from _jsonl(name, handle)
            return
        yield from _json_list(name, handle, plain.stem)
    except UnicodeDecodeError:
        raise ValidationError(name, "not UTF-8 text" + (" once decompressed" if compressed else "")) from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise ValidationError(name, f"not a valid gzip file ({_why(exc)}); "
                                    "recompress it or give the uncompressed file") from None
    finally:
        handle.close()


def _is_gzip(name: str) -> bool:
    """True when the file starts with the gzip magic bytes; a ``.gz`` name without them is refused."""
    try:
        with open(name, "rb") as raw:
            magic = raw.read(2)
    except OSError as exc:
        raise ValidationError(name, f"cannot read: {exc.strerror}") from None
    if magic == _GZIP_MAGIC:
        return True
    if name.lower().endswith(".gz"):
        raise ValidationError(name, "not a valid gzip file (it does not start with the gzip magic bytes); "
                                    "recompress it or give the uncompressed file")
    return False


def _open_text(name: str, compressed: bool) -> IO[str]:
    if compressed:
        return gzip.open(name, "rt", encoding="utf-8")
    return open(name, encoding="utf-8")  # closed in the finally of load_traces


def _why(exc: BaseException) -> str:
    if isinstance(exc, EOFError):
        return "the compressed stream ends early: truncated file?"
    return str(exc) or type(exc).__name__


def _is_trace_entry(item: object) -> bool:
    return isinstance(item, Mapping) and "messages" in item and "role" not in item and "type" not in item


def _json_list(name: str, handle: IO[str], stem: str) -> Iterator[Trace]:
    items = _ArrayReader(name, handle).items()
    first = next(items, None)
    if first is None:
        return
    if _is_trace_entry(first[1]) or not isinstance(first[1], Mapping):
        number = 1
        yield _entry(first[0], first[1], str(number))
        for where, item in items:
            number += 1
            yield _entry(where, item, str(number))
        return
    messages = [first[1]]  # one bare list of messages: one trace
    for where, item in items:
        if not isinstance(item, Mapping):
            raise ValidationError(where, "must be an object (a message)")
        messages.append(item)
    yield Trace(stem, messages, None)
