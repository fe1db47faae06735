"""Scripted model output -> OpenClaw-shaped messages.

The gateway simulates the model: a turn carries what the assistant "said" as a list of steps, and
this module turns them into the messages OpenClaw would record (assistant text and tool calls, tool
results, `sessions_yield` calls and results, compaction markers in the shape OpenClaw's chat history
gives them: `role: "system"`, text `Compaction`, `__openclaw: {kind: "compaction", ...}`).
"""

from __future__ import annotations

import json
import time
from typing import Any, Dict, List, Optional

# Reading messages is the continuity core's (one owner, shared with the plugin); re-exported.
from fleet.continuity import ids
from fleet.continuity.childresult import (  # noqa: F401
    TOOL_CALL_TYPES,
    is_compaction,
    message_text,
    tool_calls,
    tool_name,
)

STEP_KINDS = ("text", "tool", "toolCall", "toolResult", "yield", "compaction", "message")
ROLES = ("user", "assistant", "toolResult", "tool", "system")


class ScriptError(ValueError):
    """A turn script is malformed; the message names the step and the accepted shapes."""


def now_ms() -> int:
    return int(time.time() * 1000)


def text_block(text: str) -> Dict[str, Any]:
    return {"type": "text", "text": text}


def user_message(text: str) -> Dict[str, Any]:
    return {"role": "user", "content": [text_block(text)], "timestamp": now_ms()}


def system_message(text: str, kind: str) -> Dict[str, Any]:
    return {
        "role": "system",
        "content": [text_block(text)],
        "timestamp": now_ms(),
        "__openclaw": {"kind": kind},
    }


def compaction_marker(seq: int, tokens_before: Optional[int] = None) -> Dict[str, Any]:
    marker: Dict[str, Any] = {"kind": "compaction", "id": ids.uuid4_hex()[:8], "seq": seq}
    if tokens_before is not None:
        marker["tokensBefore"] = tokens_before
    return {
        "role": "system",
        "content": [text_block("Compaction")],
        "timestamp": now_ms(),
        "historyEntryId": marker["id"],
        "__openclaw": marker,
    }






def _tool_pair(name: str, args: Any, result: Any, text: str = "", details: Any = None,
               is_error: bool = False) -> List[Dict[str, Any]]:
    call_id = "call_" + ids.uuid4_hex()[:12]
    content: List[Dict[str, Any]] = [text_block(text)] if text else []
    content.append({"type": "toolCall", "id": call_id, "name": name, "arguments": args or {}})
    out = [{"role": "assistant", "content": content, "timestamp": now_ms()}]
    if result is not None:
        body = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
        res: Dict[str, Any] = {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": name,
            "content": [text_block(body)],
            "isError": bool(is_error),
            "timestamp": now_ms(),
        }
        if details is not None:
            res["details"] = details
        out.append(res)
    return out


def build_steps(steps: Any, compaction_seq: int = 0, where: str = "steps") -> List[Dict[str, Any]]:
    """Messages for a list of steps (or one string = one assistant text message)."""
    if steps is None:
        return []
    if isinstance(steps, (str, dict)):
        steps = [steps]
    if not isinstance(steps, list):
        raise ScriptError(f"{where}: expected a list of steps or a string")
    out: List[Dict[str, Any]] = []
    for i, step in enumerate(steps):
        here = f"{where}[{i}]"
        if isinstance(step, str):
            out.append({"role": "assistant", "content": [text_block(step)], "timestamp": now_ms()})
            continue
        if not isinstance(step, dict):
            raise ScriptError(f"{here}: a step is a string or an object with one of {STEP_KINDS}")
        kinds = [k for k in STEP_KINDS if k in step]
        if not kinds:
            raise ScriptError(f"{here}: unknown step {sorted(step)}; use one of {STEP_KINDS}")
        if "message" in step:
            out.append(normalize_message(step["message"], here + ".message"))
        elif "compaction" in step:
            compaction_seq += 1
            opts = step["compaction"] if isinstance(step["compaction"], dict) else {}
            out.append(compaction_marker(compaction_seq, opts.get("tokensBefore")))
        elif "yield" in step:
            opts = step["yield"] if isinstance(step["yield"], dict) else {}
            out.extend(_tool_pair(
                "sessions_yield",
                {"message": opts.get("message", "waiting for subagents")},
                {"status": "yielded"},
                text=step.get("text", ""),
                details={"status": "yielded"},
            ))
        elif "tool" in step or "toolCall" in step:
            call = step.get("toolCall") if isinstance(step.get("toolCall"), dict) else step
            name = call.get("tool") or call.get("name")
            if not isinstance(name, str) or not name:
                raise ScriptError(f"{here}: a tool step needs a tool name ('tool': 'exec')")
            out.extend(_tool_pair(
                name,
                call.get("args", call.get("arguments")),
                step.get("result") if "toolCall" not in step or "result" in step else None,
                text=step.get("text", ""),
                details=step.get("details"),
                is_error=bool(step.get("isError")),
            ))
        elif "toolResult" in step:
            res = step["toolResult"]
            if not isinstance(res, dict):
                raise ScriptError(f"{here}.toolResult: expected an object")
            body = res.get("text", res.get("content", ""))
            msg = {
                "role": "toolResult",
                "toolCallId": res.get("toolCallId", "call_" + ids.uuid4_hex()[:12]),
                "toolName": res.get("toolName", res.get("name", "")),
                "content": [text_block(body if isinstance(body, str) else json.dumps(body))],
                "isError": bool(res.get("isError")),
                "timestamp": now_ms(),
            }
            if "details" in res:
                msg["details"] = res["details"]
            out.append(msg)
        else:  # text
            if not isinstance(step["text"], str):
                raise ScriptError(f"{here}.text: expected a string")
            out.append({"role": "assistant", "content": [text_block(step["text"])],
                        "timestamp": now_ms()})
    return out


def normalize_message(msg: Any, where: str = "message") -> Dict[str, Any]:
    """A caller-supplied raw message, checked for a known role; string content becomes a block."""
    if not isinstance(msg, dict):
        raise ScriptError(f"{where}: expected an object with 'role' and 'content'")
    role = msg.get("role")
    if role not in ROLES:
        raise ScriptError(f"{where}.role: {role!r} is not one of {ROLES}")
    out = dict(msg)
    if isinstance(out.get("content"), str):
        out["content"] = [text_block(out["content"])]
    out.setdefault("timestamp", now_ms())
    return out
