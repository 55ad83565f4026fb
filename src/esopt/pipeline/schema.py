"""Config dataclasses -> strict parsing and the JSON schema (one source of truth).

A config section is a frozen dataclass whose fields carry their help text and bounds in
`field(metadata=...)` (made by `option`). From the same classes come
  * `parse(cls, mapping, key)`: the typed section, refusing unknown keys (naming the
    closest valid one), wrong types and out-of-range values with the dotted key;
  * `json_schema(cls)`: the schema the Snakefile validates against, with
    `additionalProperties: false` everywhere (`esopt config schema` writes it).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from typing import Any

_MISSING = dataclasses.MISSING


class ConfigError(ValueError):
    """A config value that cannot run; the message starts with the key."""


def option(default: Any = _MISSING, help: str = "", *, factory: Any = _MISSING,
           **bounds: Any) -> Any:
    """A dataclass field with help text and bounds: choices, minimum, maximum,
    exclusive_minimum, exclusive_maximum, item_choices, item_minimum, min_items,
    unique_items (the schema's and the parser's)."""
    meta = {"help": help, **bounds}
    if factory is not _MISSING:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _hints(cls) -> dict:
    return typing.get_type_hints(cls)


def _optional(tp) -> tuple[Any, bool]:
    """(inner type, whether None is allowed) of `X | None`."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0], len(args) < len(typing.get_args(tp))
    return tp, False


def _default(f: dataclasses.Field) -> Any:
    if f.default is not _MISSING:
        return f.default
    return f.default_factory()


def plain(value: Any) -> Any:
    """A default as plain JSON data (dataclasses -> dicts, tuples -> lists)."""
    if dataclasses.is_dataclass(value):
        return {k: plain(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


# ---------------------------------------------------------------------------- parsing

def _type_name(tp) -> str:
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false",
            dict: "a mapping", list: "a list"}.get(tp, getattr(tp, "__name__", str(tp)))


def _scalar(tp, value, key: str):
    # bool is an int in Python; a config `true` is never a count.
    if tp is bool and isinstance(value, bool):
        return value
    if tp is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if tp is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if tp is str and isinstance(value, str):
        return value
    if tp is float and isinstance(value, str):
        # YAML 1.1 (PyYAML) reads 1e-3 as a string; 1.0e-3 is a number.
        raise ConfigError(f"{key}: expected a number, got the string {value!r} "
                          "(write floats with a dot: 1.0e-3, not 1e-3)")
    raise ConfigError(f"{key}: expected {_type_name(tp)}, got {value!r}")


def _value(tp, value, key: str, meta: dict):
    tp, nullable = _optional(tp)
    if value is None:
        if nullable:
            return None
        raise ConfigError(f"{key}: expected {_type_name(tp)}, got null")
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return parse(tp, value, key)
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        (item,) = typing.get_args(tp)[:1]
        items = [_value(item, v, f"{key}[{i}]", {}) for i, v in enumerate(value)]
        for v in items:
            _bounds(v, key, {"choices": meta.get("item_choices"),
                             "minimum": meta.get("item_minimum")})
        _list_bounds(items, key, meta)
        return items
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {value!r}")
        args = typing.get_args(tp)
        if not args:
            return dict(value)  # free-form (environment options, submitit parameters)
        ktp, vtp = args
        out = {}
        for k, v in value.items():
            kk = _dict_key(ktp, k, key)
            out[kk] = _value(vtp, v, f"{key}.{k}", {})
        return out
    v = _scalar(tp, value, key)
    _bounds(v, key, meta)
    return v


def _dict_key(tp, k, key: str):
    if tp is int:
        try:
            return int(k)
        except (TypeError, ValueError):
            raise ConfigError(f"{key}: key {k!r} must be an integer") from None
    return _scalar(tp, k, f"{key} (key)")


def _bounds(v, key: str, meta: dict) -> None:
    choices = meta.get("choices")
    if choices is not None and v not in choices:
        close = difflib.get_close_matches(str(v), [str(c) for c in choices], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"{key}: unknown value {v!r}{hint} (choose from {list(choices)})")
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if not math.isfinite(v):
            raise ConfigError(f"{key}: must be finite, got {v}")
        lo = meta.get("minimum")
        if lo is not None and v < lo:
            raise ConfigError(f"{key}: must be >= {lo}, got {v}")
        hi = meta.get("maximum")
        if hi is not None and v > hi:
            raise ConfigError(f"{key}: must be <= {hi}, got {v}")
        lo = meta.get("exclusive_minimum")
        if lo is not None and v <= lo:
            raise ConfigError(f"{key}: must be > {lo}, got {v}")
        hi = meta.get("exclusive_maximum")
        if hi is not None and v >= hi:
            raise ConfigError(f"{key}: must be < {hi}, got {v}")


def _list_bounds(items: list, key: str, meta: dict) -> None:
    least = meta.get("min_items")
    if least is not None and len(items) < least:
        need = "one entry is" if least == 1 else f"{least} entries are"
        raise ConfigError(f"{key}: at least {need} needed, got {items!r}")
    if meta.get("unique_items"):
        seen = set()
        for i, v in enumerate(items):
            if v in seen:
                raise ConfigError(f"{key}[{i}]: {v!r} is listed twice; each must be distinct "
                                  f"(got {items!r})")
            seen.add(v)


def unknown_key_error(key: str, name: Any, valid: list[str]) -> ConfigError:
    """`key.name: unknown key; did you mean 'x'?` with the closest valid name."""
    close = difflib.get_close_matches(str(name), valid, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    where = f"{key}.{name}" if key else str(name)
    return ConfigError(f"{where}: unknown key{hint} (valid: {', '.join(valid)})")


def parse(cls, data: Any, key: str = ""):
    """The section `cls` from a config mapping; every error names the dotted key."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{key or 'config'}: expected a mapping, got {data!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name in data:
        if name not in fields:
            raise unknown_key_error(key, name, list(fields))
    hints = _hints(cls)
    kwargs = {}
    for name, value in data.items():
        sub = f"{key}.{name}" if key else name
        kwargs[name] = _value(hints[name], value, sub, dict(fields[name].metadata))
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        if isinstance(e, ConfigError):
            raise
        raise ConfigError(f"{key or 'config'}: {e}") from None


# ---------------------------------------------------------------------------- schema

_JSON_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean"}


def _type_schema(tp, meta: dict) -> dict:
    tp, nullable = _optional(tp)
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        s = json_schema(tp)
    elif origin in (list, tuple):
        (item,) = typing.get_args(tp)[:1]
        items = _type_schema(item, {"choices": meta.get("item_choices"),
                                    "minimum": meta.get("item_minimum")})
        s = {"type": "array", "items": items}
        if meta.get("min_items") is not None:
            s["minItems"] = meta["min_items"]
        if meta.get("unique_items"):
            s["uniqueItems"] = True
    elif origin is dict or tp is dict:
        s = {"type": "object"}
        args = typing.get_args(tp)
        if args:
            ktp, vtp = args
            if ktp is int:
                s["propertyNames"] = {"pattern": "^[0-9]+$"}
            s["additionalProperties"] = _type_schema(vtp, {})
    else:
        s = {"type": _JSON_TYPES[tp]}
        if meta.get("choices") is not None:
            s["enum"] = list(meta["choices"])
        for ours, theirs in (("minimum", "minimum"), ("maximum", "maximum"),
                             ("exclusive_minimum", "exclusiveMinimum"),
                             ("exclusive_maximum", "exclusiveMaximum")):
            if meta.get(ours) is not None:
                s[theirs] = meta[ours]
    if nullable:
        s["type"] = [s["type"], "null"]
        if "enum" in s:
            s["enum"] = [*s["enum"], None]
    return s


def json_schema(cls) -> dict:
    """The strict JSON schema of a section: its fields, help texts, bounds and defaults."""
    hints = _hints(cls)
    props = {}
    for f in dataclasses.fields(cls):
        s = _type_schema(hints[f.name], dict(f.metadata))
        s["description"] = f.metadata.get("help", "")
        default = _default(f)
        tp = _optional(hints[f.name])[0]
        # A nested section whose default is its class's own defaults is written `{}`:
        # the validator fills the nested defaults in (as the parser does).
        if dataclasses.is_dataclass(tp) and default == tp():
            s["default"] = {}
        else:
            s["default"] = plain(default)
        props[f.name] = s
    doc = (cls.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
    out = {"type": "object", "description": doc, "additionalProperties": False,
           "properties": props}
    required = [f.name for f in dataclasses.fields(cls)
                if f.default is _MISSING and f.default_factory is _MISSING]
    if required:
        out["required"] = required
    return out
