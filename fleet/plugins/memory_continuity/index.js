// OpenClaw entry of memory-continuity: a thin bridge to the Python plugin (plugin.py) run by one
// long-lived worker. The hook list mirrors plugin.py HOOKS, and the third element of a hook
// plugin.py UNREAD_EVENT_FIELDS (a unit test keeps them equal).
import { definePlugin } from "./bridge.mjs";

export default definePlugin({
  id: "memory-continuity",
  name: "Memory Continuity",
  description: "Keeps each agent's working state in memory/CURRENT_STATE.md across sessions and "
    + "across parent/child (subagent) boundaries.",
  entryUrl: import.meta.url,
  hooks: [
    ["before_prompt_build", 10, ["messages"]],
    ["before_compaction", 10],
    ["before_reset", 10],
    ["subagent_spawned", 50],
    ["llm_input", 50, ["historyMessages"]],
    ["subagent_ended", 50],
    ["agent_end", 90],
    ["session_end", 90],
  ],
});
