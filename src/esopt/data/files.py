"""Data files (JSON Lines, JSON) read so that every error names the file and the line.

`json.loads` of one line reports "line 1" whichever line of the file it was; a line that
is not UTF-8, or JSON nested too deeply for the parser, raises UnicodeDecodeError or
RecursionError with no file at all. Here each becomes a `DataFileError` (a ValueError)
whose message starts with `{path}, line {n}:`; loaders raise the same for the records
they refuse (`DataFileError.at`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


class DataFileError(ValueError):
    """A bad data file; the message starts with the file and the line."""

    @classmethod
    def at(cls, path: str | os.PathLike, line: int, reason: object) -> DataFileError:
        """The error `{path}, line {line}: {reason}`."""
        return cls(f"{path}, line {line}: {reason}")


def _reason(e: BaseException) -> str:
    """Why a line could not be read, without json's own position within the line's text."""
    if isinstance(e, UnicodeDecodeError):
        return f"not UTF-8 text (byte 0x{e.object[e.start]:02x} at column {e.start + 1})"
    if isinstance(e, RecursionError):
        return "JSON nested too deeply to read"
    if isinstance(e, json.JSONDecodeError):
        return f"not JSON: {e.msg} at column {e.colno}"
    return str(e)


def read_jsonl(path: str | os.PathLike) -> list[tuple[int, Any]]:
    """(line number, value) of each non-blank line of a UTF-8 JSON Lines file, lines counted
    from 1 with blank ones included; a line that is not UTF-8 or not JSON raises
    DataFileError naming the file and the line."""
    out = []
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                # A byte-order mark may open the file (editors on Windows write one).
                text = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
                if text.strip():
                    out.append((lineno, json.loads(text)))
            except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
                raise DataFileError.at(path, lineno, _reason(e)) from None
    return out


def read_json(path: str | os.PathLike) -> Any:
    """The JSON document of a UTF-8 file; a bad one raises DataFileError naming the file
    and the line."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return json.loads(data.decode("utf-8-sig"))
    except json.JSONDecodeError as e:
        raise DataFileError.at(path, e.lineno, f"{_reason(e)}") from None
    except UnicodeDecodeError as e:
        line = e.object[:e.start].count(b"\n") + 1
        raise DataFileError.at(path, line, f"not UTF-8 text (byte 0x{e.object[e.start]:02x})"
                               ) from None
    except RecursionError:
        raise DataFileError(f"{path}: JSON nested too deeply to read") from None


def read_json_records(path: str | os.PathLike) -> list[tuple[int, Any]]:
    """(line, record) of a JSON file holding one record or a list of them, each with the
    line where it starts, so that a loader refusing a record can name its line; a file
    that is not JSON raises DataFileError naming the file and the line."""
    document = read_json(path)
    if not isinstance(document, list):
        return [(1, document)]
    # The document is valid JSON: scan its list again for where each element starts.
    text = Path(path).read_bytes().decode("utf-8-sig")
    decoder, out = json.JSONDecoder(), []
    pos, line, counted = text.index("[") + 1, 1, 0
    for _ in document:
        pos = _skip_space(text, pos)
        line, counted = line + text.count("\n", counted, pos), pos
        value, pos = decoder.raw_decode(text, pos)
        out.append((line, value))
        pos = _skip_space(text, pos) + 1  # past the ',' (or the closing ']')
    return out


def _skip_space(text: str, pos: int) -> int:
    while text[pos] in " \t\r\n":
        pos += 1
    return pos
