"""The JSON Schema subset that plugin config schemas use, with defaults applied.

OpenClaw validates `plugins.entries.<id>.config` against the manifest's inline `configSchema`;
a plugin must never see a config its schema forbids, so errors name the key and what to write.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, List

_TYPES = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
    "null": (type(None),),
}


class SchemaError(ValueError):
    """A value does not match its schema; `path` names the offending key."""


def check_schema(schema: Any, where: str) -> None:
    """Refuse a schema this validator cannot enforce (unknown type names)."""
    if not isinstance(schema, dict):
        raise SchemaError(f"{where}: configSchema must be a JSON object")
    kinds = schema.get("type")
    for kind in kinds if isinstance(kinds, list) else [kinds]:
        if kind is not None and kind not in _TYPES:
            raise SchemaError(f"{where}: unknown schema type {kind!r}")
    for key, sub in (schema.get("properties") or {}).items():
        check_schema(sub, f"{where}.properties.{key}")
    if isinstance(schema.get("items"), dict):
        check_schema(schema["items"], f"{where}.items")


def apply_schema(schema: Dict[str, Any], value: Any, path: str = "config") -> Any:
    """Validate `value` against `schema`; return a copy with defaults filled in."""
    if value is None and "default" in schema:
        value = copy.deepcopy(schema["default"])
    _check_type(schema, value, path)
    if "enum" in schema and value not in schema["enum"]:
        raise SchemaError(f"{path}: {value!r} is not one of {schema['enum']!r}")
    if isinstance(value, dict):
        return _apply_object(schema, value, path)
    if isinstance(value, list):
        return _apply_array(schema, value, path)
    if isinstance(value, str):
        _check_length(schema, value, path)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        _check_range(schema, value, path)
    return value


def _check_type(schema: Dict[str, Any], value: Any, path: str) -> None:
    kinds = schema.get("type")
    if kinds is None:
        return
    names: List[str] = kinds if isinstance(kinds, list) else [kinds]
    for name in names:
        ok = isinstance(value, _TYPES[name])
        if ok and name in ("integer", "number") and isinstance(value, bool):
            ok = False
        if ok:
            return
    got = f"{type(value).__name__} {value!r}"
    raise SchemaError(f"{path}: expected {' or '.join(names)}, got {got}")


def _apply_object(schema: Dict[str, Any], value: Dict[str, Any], path: str) -> Dict[str, Any]:
    props = schema.get("properties") or {}
    out: Dict[str, Any] = {}
    for key in schema.get("required") or []:
        if key not in value and "default" not in props.get(key, {}):
            raise SchemaError(f"{path}.{key}: required key is missing")
    for key, item in value.items():
        if key in props:
            out[key] = apply_schema(props[key], item, f"{path}.{key}")
        elif schema.get("additionalProperties") is False:
            allowed = ", ".join(sorted(props)) or "none"
            raise SchemaError(f"{path}.{key}: unknown key (allowed: {allowed})")
        elif isinstance(schema.get("additionalProperties"), dict):
            out[key] = apply_schema(schema["additionalProperties"], item, f"{path}.{key}")
        else:
            out[key] = item
    for key, sub in props.items():
        if key not in out and isinstance(sub, dict) and "default" in sub:
            out[key] = copy.deepcopy(sub["default"])
    return out


def _apply_array(schema: Dict[str, Any], value: List[Any], path: str) -> List[Any]:
    items = schema.get("items")
    if not isinstance(items, dict):
        return list(value)
    return [apply_schema(items, item, f"{path}[{i}]") for i, item in enumerate(value)]


def _check_length(schema: Dict[str, Any], value: str, path: str) -> None:
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        raise SchemaError(f"{path}: longer than {schema['maxLength']} characters")
    if "minLength" in schema and len(value) < schema["minLength"]:
        raise SchemaError(f"{path}: shorter than {schema['minLength']} characters")


def _check_range(schema: Dict[str, Any], value: float, path: str) -> None:
    if "minimum" in schema and value < schema["minimum"]:
        raise SchemaError(f"{path}: {value} is below the minimum {schema['minimum']}")
    if "maximum" in schema and value > schema["maximum"]:
        raise SchemaError(f"{path}: {value} is above the maximum {schema['maximum']}")
