// OpenClaw entry of the /mc command plugin: a thin bridge to the Python plugin (plugin.py) run by
// one long-lived worker. The command list mirrors plugin.py (a unit test keeps them equal).
import { definePlugin } from "./bridge.mjs";

export default definePlugin({
  id: "mc",
  name: "Memory Continuity commands",
  description: "/mc: read and manage memory-continuity state, history, sessions and summaries.",
  entryUrl: import.meta.url,
  commands: [
    { name: "mc", description: "Memory Continuity commands \u2014 state, history, search, settings, etc." },
  ],
});
