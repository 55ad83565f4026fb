"""The sandbox's narrow pipe protocol: length-prefixed frames, and a strict value codec.

Trusted -> jail frames are pickles (the jail may unpickle what the trusted side wrote).
Jail -> trusted frames are never unpickled: a JSON header and raw array buffers, read by
`decode_frame`, which accepts only plain data (None, bool, int, float, str, lists and a
few tagged forms: tuples, sets, dicts, numpy scalars and numeric arrays) within a size
cap. Whatever the untrusted code writes to the pipe is at most such plain data.

Frame: 4-byte big-endian length, then the body. A jail body: 4-byte header length, the
header (UTF-8 JSON: {"t": kind, ..., "blobs": [sizes]}), then the blobs back to back.
"""

from __future__ import annotations

import json
import os
import pickle
import select
import struct
import time
from typing import Any

import numpy as np

MAX_DEPTH = 64
_NUMERIC_KINDS = "biuf"  # bool, signed, unsigned, float: no objects, strings or records


class ProtocolError(Exception):
    """A frame that is not what the protocol allows (a corrupted or forged channel)."""


class Unencodable(TypeError):
    """A value the codec does not carry (objects, functions, complex numbers, ...)."""


class ChannelTimeout(Exception):
    """The deadline passed while waiting on the other side."""


class ChannelClosed(Exception):
    """The other side closed the pipe (it exited or died)."""


# --- the value codec ---------------------------------------------------------------------


def encode_value(value: Any) -> tuple[Any, list[bytes]]:
    """Plain data -> (JSON-able tree, blobs). Raises Unencodable for anything else."""
    blobs: list[bytes] = []

    def enc(v, depth):
        if depth > MAX_DEPTH:
            raise Unencodable("nested too deeply")
        if v is None or v is True or v is False:
            return v
        if isinstance(v, np.ndarray):
            if v.dtype.kind not in _NUMERIC_KINDS:
                raise Unencodable(f"array of dtype {v.dtype}")
            blobs.append(np.ascontiguousarray(v).tobytes())
            return {"$nd": [v.dtype.str, list(v.shape), len(blobs) - 1]}
        if isinstance(v, np.generic):
            if v.dtype.kind not in _NUMERIC_KINDS:
                raise Unencodable(f"numpy scalar of dtype {v.dtype}")
            return {"$np": [v.dtype.str, v.item()]}
        if isinstance(v, bool):
            return bool(v)
        if isinstance(v, int):
            return int(v)
        if isinstance(v, float):
            return float(v)
        if isinstance(v, str):
            return str(v)
        if isinstance(v, list):
            return [enc(x, depth + 1) for x in v]
        if isinstance(v, tuple):
            return {"$tuple": [enc(x, depth + 1) for x in v]}
        if isinstance(v, (set, frozenset)):
            return {"$set": [enc(x, depth + 1) for x in v]}
        if isinstance(v, dict):
            return {"$dict": [[enc(k, depth + 1), enc(x, depth + 1)] for k, x in v.items()]}
        raise Unencodable(type(v).__name__)

    return enc(value, 0), blobs


def _dtype(text) -> np.dtype:
    if not isinstance(text, str) or len(text) > 8:
        raise ProtocolError(f"bad dtype {text!r}")
    try:
        dt = np.dtype(text)
    except TypeError as e:
        raise ProtocolError(f"bad dtype {text!r}") from e
    if dt.kind not in _NUMERIC_KINDS or dt.fields is not None or dt.subdtype is not None:
        raise ProtocolError(f"dtype {dt} is not numeric")
    return dt


def decode_value(tree: Any, blobs: list[bytes]) -> Any:
    """The inverse of encode_value, strict: anything else is a ProtocolError."""
    used: set[int] = set()

    def dec(v, depth):
        if depth > MAX_DEPTH:
            raise ProtocolError("nested too deeply")
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, list):
            return [dec(x, depth + 1) for x in v]
        if not isinstance(v, dict) or len(v) != 1:
            raise ProtocolError(f"unexpected {type(v).__name__} in a value")
        (tag, body), = v.items()
        if tag == "$tuple" and isinstance(body, list):
            return tuple(dec(x, depth + 1) for x in body)
        if tag == "$set" and isinstance(body, list):
            try:
                return {dec(x, depth + 1) for x in body}
            except TypeError as e:
                raise ProtocolError(f"unhashable set member: {e}") from None
        if tag == "$dict" and isinstance(body, list):
            out = {}
            for pair in body:
                if not isinstance(pair, list) or len(pair) != 2:
                    raise ProtocolError("bad dict entry")
                try:
                    out[dec(pair[0], depth + 1)] = dec(pair[1], depth + 1)
                except TypeError as e:
                    raise ProtocolError(f"unhashable dict key: {e}") from None
            return out
        if tag == "$np" and isinstance(body, list) and len(body) == 2:
            dt = _dtype(body[0])
            if not isinstance(body[1], (bool, int, float)):
                raise ProtocolError("bad numpy scalar")
            try:
                return dt.type(body[1])
            except (OverflowError, ValueError, TypeError) as e:
                raise ProtocolError(f"bad numpy scalar: {e}") from None
        if tag == "$nd" and isinstance(body, list) and len(body) == 3:
            dt, shape, index = _dtype(body[0]), body[1], body[2]
            if (not isinstance(shape, list) or len(shape) > 32
                    or not all(type(s) is int and s >= 0 for s in shape)):
                raise ProtocolError("bad array shape")
            if type(index) is not int or not 0 <= index < len(blobs) or index in used:
                raise ProtocolError("bad array buffer")
            used.add(index)
            count = int(np.prod(shape, dtype=np.int64)) if shape else 1
            if count * dt.itemsize != len(blobs[index]):
                raise ProtocolError("array buffer size does not match its shape")
            return np.frombuffer(bytearray(blobs[index]), dtype=dt).reshape(shape)
        raise ProtocolError(f"unknown tag {tag!r}")

    return dec(tree, 0)


# --- frames ------------------------------------------------------------------------------


def jail_frame(kind: str, fields: dict | None = None, value: Any = None,
               with_value: bool = False) -> bytes:
    """A jail -> trusted frame (the jail side's writer)."""
    header = {"t": kind, **(fields or {})}
    blobs: list[bytes] = []
    if with_value:
        header["v"], blobs = encode_value(value)
    header["blobs"] = [len(b) for b in blobs]
    text = json.dumps(header, allow_nan=True).encode("utf-8")
    body = b"".join([struct.pack(">I", len(text)), text, *blobs])
    return struct.pack(">I", len(body)) + body


def decode_frame(body: bytes) -> dict:
    """A jail frame's body -> its header dict, with "v" decoded when present."""
    if len(body) < 4:
        raise ProtocolError("short frame")
    (size,) = struct.unpack(">I", body[:4])
    if size > len(body) - 4:
        raise ProtocolError("header larger than the frame")
    try:
        header = json.loads(body[4:4 + size].decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise ProtocolError(f"unreadable header: {type(e).__name__}") from None
    if not isinstance(header, dict) or not isinstance(header.get("t"), str):
        raise ProtocolError("a frame without a kind")
    sizes = header.get("blobs", [])
    if not isinstance(sizes, list) or not all(type(s) is int and s >= 0 for s in sizes):
        raise ProtocolError("bad blob sizes")
    if 4 + size + sum(sizes) != len(body):
        raise ProtocolError("blob sizes do not add up to the frame")
    blobs, at = [], 4 + size
    for s in sizes:
        blobs.append(body[at:at + s])
        at += s
    if "v" in header:
        try:
            header["v"] = decode_value(header["v"], blobs)
        except RecursionError:
            raise ProtocolError("nested too deeply") from None
    return header


def trusted_frame(message: Any, shared: dict | None = None) -> bytes:
    """A trusted -> jail frame. With `shared` (id -> array, kept by the caller), read-only
    numpy arrays go once: later frames name them, and the jail side hands out copies."""
    import io

    buf = io.BytesIO()
    fresh: dict[int, Any] = {}
    pickler = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
    if shared is not None:
        def persistent_id(obj):
            if type(obj) is np.ndarray and not obj.flags.writeable:
                key = id(obj)
                if key not in shared:
                    shared[key] = fresh[key] = obj  # kept alive: the id stays its own
                return key
            return None
        pickler.persistent_id = persistent_id
    pickler.dump(message)
    body = pickle.dumps((fresh, buf.getvalue()), protocol=pickle.HIGHEST_PROTOCOL)
    return struct.pack(">I", len(body)) + body


class Reader:
    """Reads frames from a non-blocking pipe against a deadline, refusing oversized ones."""

    def __init__(self, fd: int, cap: int):
        self.fd, self.cap, self.buf = fd, cap, bytearray()
        os.set_blocking(fd, False)

    def _fill(self, deadline: float) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 1 << 20)
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ChannelTimeout() from None
                select.select([self.fd], [], [], left)
                continue
            if not chunk:
                raise ChannelClosed()
            self.buf += chunk
            return

    def frame(self, deadline: float) -> bytes:
        while len(self.buf) < 4:
            self._fill(deadline)
        (size,) = struct.unpack(">I", self.buf[:4])
        if size > self.cap:
            raise ProtocolError(f"a frame of {size} bytes, larger than the cap of {self.cap}")
        while len(self.buf) < 4 + size:
            self._fill(deadline)
        body = bytes(self.buf[4:4 + size])
        del self.buf[:4 + size]
        return body


def write_all(fd: int, data: bytes, deadline: float) -> None:
    """Write to a non-blocking pipe against a deadline."""
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelTimeout() from None
            select.select([], [fd], [], left)
            continue
        except BrokenPipeError:
            raise ChannelClosed() from None
        view = view[n:]


def write_blocking(fd: int, data: bytes) -> None:
    """Jail side: write a whole frame to a blocking pipe."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def read_trusted_frame(fd: int, shared: dict | None = None) -> Any:
    """Jail side: the next trusted frame (blocking), or None at end of input. Arrays sent
    once are kept in `shared`; each mention of one is a fresh writable copy."""
    import io

    head = _read_exactly(fd, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">I", head)
    body = _read_exactly(fd, size)
    if body is None:
        return None
    fresh, inner = pickle.loads(body)
    shared = {} if shared is None else shared
    shared.update(fresh)
    unpickler = pickle.Unpickler(io.BytesIO(inner))
    unpickler.persistent_load = lambda key: shared[key].copy()
    return unpickler.load()


def _read_exactly(fd: int, n: int) -> bytes | None:
    parts, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            return None
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)
