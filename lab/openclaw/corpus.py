"""The turn corpus: what real OpenClaw gateways hand plugins, one file per release and kind of
turn, kept in the repository (tests/corpus/openclaw/<release>/<kind>.json).

Each release wraps its turns in its own way (its ctx fields, its envelopes, the text of its
completion events), and fleet.continuity.origin must tell the user's turns from OpenClaw's on
every one of them. The compat matrix's scenario (lab.openclaw.scenario) runs known turns on a
real gateway of the release with a probe plugin beside fleet's; `collect` labels what the probe
recorded by what the scenario did, so each sample carries the answer the recogniser must give:

- `user`: the main session's runs the scenario started, with the words it sent;
- `completion`: the main session's runs OpenClaw started on its own (a child's announce, a
  settle wake), and those messages as later runs' transcripts carry them;
- `subagent-task`: the child's run, with the task the parent gave it (and, where the release
  keeps it there, the `## Your Role` part of the child's system prompt).

tests/continuity/test_origin_corpus.py runs the recogniser over every file: a release that
writes something new is a failing case there, not a polluted state file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Iterable, Mapping

ROOT = Path(__file__).resolve().parents[2] / "tests" / "corpus" / "openclaw"
USER, COMPLETION, SUBAGENT_TASK = "user", "completion", "subagent-task"
CTX_KEYS = ("runId", "sessionKey", "agentId", "trigger", "inputProvenance")
MAIN_SESSION = "agent:main:main"


def _ctx(record: Mapping[str, Any]) -> dict:
    ctx = record.get("ctx") or {}
    return {key: ctx[key] for key in CTX_KEYS if key in ctx}


def _users(messages: Any) -> list:
    return [m for m in messages if isinstance(m, dict) and m.get("role") == "user"] \
        if isinstance(messages, list) else []


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(str(p.get("text", "")) for p in content or [] if isinstance(p, dict))


def _role_section(system_prompt: Any) -> str:
    """The `## Your Role` part of a system prompt ("" when it has none): all the corpus
    needs of a prompt of many kilobytes."""
    if not isinstance(system_prompt, str) or "## Your Role" not in system_prompt:
        return ""
    role = system_prompt.split("## Your Role", 1)[1]
    cut = role.find("\n## ")
    return "## Your Role" + (role if cut == -1 else role[:cut])


def collect(records: Iterable[Mapping[str, Any]], turns: Mapping[str, str],
            task: str) -> dict:
    """{kind: [sample, ...]} from the probe's `records`; `turns` maps the run ids the scenario
    started to the message it sent, `task` is the child's task as the parent gave it."""
    out: dict = {USER: [], COMPLETION: [], SUBAGENT_TASK: []}
    sent = list(turns.values())
    seen: set = set()

    def add(kind: str, sample: dict) -> None:
        key = json.dumps(sample, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out[kind].append(sample)

    for record in records:
        hook = record.get("hook")
        event = record.get("event") or {}
        ctx = _ctx(record)
        session, run = ctx.get("sessionKey", ""), ctx.get("runId", "")
        if ":subagent:" in session:
            expect = {"origin": "subagent_task", "task": task}
            if hook == "before_prompt_build":
                add(SUBAGENT_TASK, {"hook": hook, "ctx": ctx, "prompt": event.get("prompt", ""),
                                    "expect": expect})
            elif hook == "agent_end" and _users(event.get("messages")):
                add(SUBAGENT_TASK, {"hook": hook, "ctx": ctx,
                                    "message": _users(event.get("messages"))[-1],
                                    "expect": expect})
            elif hook == "llm_input" and _role_section(event.get("systemPrompt")):
                add(SUBAGENT_TASK, {"hook": hook, "ctx": ctx,
                                    "systemPrompt": _role_section(event.get("systemPrompt")),
                                    "expect": expect})
            continue
        if session != MAIN_SESSION or hook not in ("before_prompt_build", "agent_end"):
            continue
        ours = run in turns
        kind = USER if ours else COMPLETION
        expect = {"origin": "user", "words": turns[run]} if ours else {"origin": "completion"}
        if hook == "before_prompt_build":
            add(kind, {"hook": hook, "ctx": ctx, "prompt": event.get("prompt", ""),
                       "expect": expect})
            continue
        users = _users(event.get("messages"))
        if users:
            add(kind, {"hook": hook, "ctx": ctx, "message": users[-1], "expect": expect})
        for message in users[:-1]:  # earlier turns, as a later run's transcript holds them
            mine = [m for m in sent if _text(message).rstrip().endswith(m)]
            add(USER if mine else COMPLETION, {
                "hook": "history", "message": message,
                "expect": {"origin": "user", "words": mine[0]} if mine
                else {"origin": "completion"}})
    return out


def write(release: str, collected: Mapping[str, list], root: Path = ROOT) -> list[Path]:
    """Replace `release`'s corpus files with `collected` (a kind without samples gets no
    file); the files written."""
    folder = root / release
    if folder.exists():
        shutil.rmtree(folder)
    written = []
    for kind, samples in sorted(collected.items()):
        if not samples:
            continue
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{kind}.json"
        path.write_text(json.dumps({"release": release, "kind": kind, "samples": samples},
                                   indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(path)
    return written


TRAITS = ("run provenance", "announce run id", "announce prompt", "announce as kept",
          "child's task", "user stamp")


def _form(text: str) -> str:
    """Which form an announce's text takes."""
    if not text:
        return "empty"
    head = "header, " if "[Inter-session message]" in text else ""
    if "A background task completed" in text:
        return head + "plain event"
    if "[Internal task completion event]" in text:
        return head + "runtime context"
    return head + "other"


def traits(release: str, root: Path = ROOT) -> dict:
    """What the release hands plugins, read off its corpus: a few words per `TRAITS` entry
    ({} when it has no corpus). For docs/compat.md's second table."""
    kinds = {}
    for kind in (USER, COMPLETION, SUBAGENT_TASK):
        path = root / release / f"{kind}.json"
        if not path.exists():
            return {}
        kinds[kind] = json.loads(path.read_text(encoding="utf-8"))["samples"]
    done = kinds[COMPLETION]
    prompts = [s for s in done if s["hook"] == "before_prompt_build"]
    ends = [s for s in done if s["hook"] == "agent_end"]
    in_ctx = any("inputProvenance" in (s.get("ctx") or {}) for s in done)
    kept = any("provenance" in (s.get("message") or {}) for s in done if s["hook"] == "history")
    task_prompts = [s["prompt"] for s in kinds[SUBAGENT_TASK] if s["hook"] == "before_prompt_build"]
    user_prompts = [s["prompt"] for s in kinds[USER] if s["hook"] == "before_prompt_build"]
    return {
        "run provenance": "hook ctx" if in_ctx else ("transcript only" if kept else "not seen"),
        "announce run id": "yes" if any(str((s.get("ctx") or {}).get("runId", "")).startswith(
            "announce:") for s in done) else "no",
        "announce prompt": _form(prompts[0]["prompt"]) if prompts else "",
        "announce as kept": _form(_text(ends[0]["message"])) if ends else "",
        "child's task": ("in its message" if any("[Subagent Task]" in p for p in task_prompts)
                         else "system prompt only") if task_prompts else "",
        "user stamp": "yes" if any(p.startswith("[") for p in user_prompts) else "no",
    }
