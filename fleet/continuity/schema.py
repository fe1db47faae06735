"""A tiny JSON-Schema subset validator for plugin configs (manifest `configSchema`).

OpenClaw checks plugin config against the manifest schema; we do the same with the standard
library so a typo in openclaw.json is a clear error naming the key, not a silent default.
Supported: type (object/array/string/number/integer/boolean), properties, additionalProperties
(false), required, items, enum, minimum, maximum, minLength, maxLength, default.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping, Optional

_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "null": lambda v: v is None,
}


def _fail(where: str, problem: str) -> ValueError:
    return ValueError(f"config key {where!r}: {problem}")


def _check(value: Any, schema: Mapping[str, Any], where: str) -> Any:
    expected = schema.get("type")
    if expected is not None:
        names = expected if isinstance(expected, list) else [expected]
        if not any(_TYPES.get(n, lambda v: True)(value) for n in names):
            raise _fail(where, f"expected {' or '.join(names)}, got {type(value).__name__} "
                        f"{value!r:.60}; set it to a {names[0]} or remove it to use the default")
    if "enum" in schema and value not in schema["enum"]:
        raise _fail(where, f"{value!r} is not one of {schema['enum']!r}")
    if _TYPES["number"](value):
        if "minimum" in schema and value < schema["minimum"]:
            raise _fail(where, f"{value!r} is below the minimum {schema['minimum']!r}")
        if "maximum" in schema and value > schema["maximum"]:
            raise _fail(where, f"{value!r} is above the maximum {schema['maximum']!r}")
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            raise _fail(where, f"longer than {schema['maxLength']} characters")
        if "minLength" in schema and len(value) < schema["minLength"]:
            raise _fail(where, f"shorter than {schema['minLength']} characters")
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [_check(v, schema["items"], f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict) and (
        "properties" in schema or schema.get("type") == "object"
    ):
        return _object(value, schema, where)
    return value


def _object(value: Mapping[str, Any], schema: Mapping[str, Any], where: str) -> dict:
    props = schema.get("properties") or {}
    prefix = f"{where}." if where else ""
    if schema.get("additionalProperties") is False:
        unknown = sorted(k for k in value if k not in props)
        if unknown:
            raise _fail(
                prefix + unknown[0],
                f"unknown key; allowed keys: {', '.join(sorted(props)) or '(none)'}",
            )
    for key in schema.get("required") or []:
        if key not in value:
            raise _fail(prefix + key, "is required")
    out = {}
    for key, val in value.items():
        sub = props.get(key)
        out[key] = _check(val, sub, prefix + key) if isinstance(sub, Mapping) else val
    for key, sub in props.items():
        if key not in out and isinstance(sub, Mapping) and "default" in sub:
            out[key] = copy.deepcopy(sub["default"])
    return out


def validate(config: Optional[Mapping[str, Any]], schema: Mapping[str, Any]) -> dict:
    """`config` checked against `schema`, with every missing key's default filled in (a copy).

    Raises ValueError naming the offending key and how to fix it. None counts as `{}`.
    """
    if config is None:
        config = {}
    if not isinstance(config, Mapping):
        raise ValueError(f"plugin config must be an object, got {type(config).__name__}")
    return _object(dict(config), schema, "")


def check_schema(schema: Any, where: str = "configSchema") -> None:
    """Refuse a schema this validator cannot enforce (not an object, unknown type names).

    Why: a plugin whose schema we cannot enforce would silently accept any config.
    """
    if not isinstance(schema, Mapping):
        raise ValueError(f"{where}: must be a JSON object")
    kinds = schema.get("type")
    for kind in kinds if isinstance(kinds, list) else [kinds]:
        if kind is not None and kind not in _TYPES:
            raise ValueError(f"{where}: unknown schema type {kind!r}; use one of "
                             f"{', '.join(sorted(_TYPES))}")
    for key, sub in (schema.get("properties") or {}).items():
        check_schema(sub, f"{where}.properties.{key}")
    if isinstance(schema.get("items"), Mapping):
        check_schema(schema["items"], f"{where}.items")
