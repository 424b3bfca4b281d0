"""load_traces reads gzip-compressed traces, known by their magic bytes; a broken gzip is one typed error."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from symfonic_graph import Trace, load_traces
from symfonic_graph.errors import ValidationError

BUY = [{"role": "assistant", "content": "", "tool_calls": [{"id": "1", "name": "buy", "args": {}}]}]
LINES = "".join(json.dumps({"id": f"t{i}", "messages": BUY, "outcome": "success"}) + "\n" for i in range(3))


def test_a_gzipped_jsonl_file_streams_like_the_plain_one(tmp_path: Path) -> None:
    plain = tmp_path / "t.jsonl"
    plain.write_text(LINES)
    packed = tmp_path / "t.jsonl.gz"
    packed.write_bytes(gzip.compress(LINES.encode()))
    assert list(load_traces(packed)) == list(load_traces(plain)) == [Trace(f"t{i}", BUY, "success") for i in range(3)]


def test_gzip_is_known_by_its_magic_bytes_not_its_name(tmp_path: Path) -> None:
    unnamed = tmp_path / "export.dat"
    unnamed.write_bytes(gzip.compress(json.dumps([{"id": "a", "messages": BUY}]).encode()))
    assert list(load_traces(unnamed)) == [Trace("a", BUY, None)]
    bare = tmp_path / "conversation.json.gz"  # one bare list of messages: named after the file, not ".json"
    bare.write_bytes(gzip.compress(json.dumps(BUY).encode()))
    assert list(load_traces(bare)) == [Trace("conversation", BUY, None)]


def test_a_malformed_entry_in_a_gzipped_file_names_file_and_line(tmp_path: Path) -> None:
    packed = tmp_path / "t.jsonl.gz"
    packed.write_bytes(gzip.compress((LINES + '{"id": "x", "messages": {}}\n').encode()))
    with pytest.raises(ValidationError, match=r"t\.jsonl\.gz: line 4: messages: must be a list"):
        list(load_traces(packed))


@pytest.mark.parametrize("damage", ["truncated", "corrupt", "not_gzip"])
def test_a_bad_gzip_is_a_typed_error_naming_the_file(tmp_path: Path, damage: str) -> None:
    data = gzip.compress((LINES * 50).encode())
    path = tmp_path / "broken.jsonl.gz"
    if damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "corrupt":
        path.write_bytes(data[:-8] + bytes(b ^ 0xFF for b in data[-8:]))
    else:
        path.write_text(LINES)
    with pytest.raises(ValidationError, match=r"broken\.jsonl\.gz: not a valid gzip file"):
        list(load_traces(path))
