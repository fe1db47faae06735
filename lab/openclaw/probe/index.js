// Lab only, never shipped: records what OpenClaw hands plugins at each hook, one JSON line per
// call in the file named by the plugin's config `logFile`. The compat matrix
// (lab/openclaw/compat.py) reads it to write the corpus of turns each release produces.
// Registered at the lowest priority so it sees the event as fleet's own plugins saw it.
// Node built-ins only; never throws into the gateway.
import { appendFileSync } from "node:fs";

const HOOKS = ["before_prompt_build", "agent_end", "llm_input", "subagent_spawned",
  "subagent_ended"];
// Left out of the record: the transcript llm_input repeats on every model call.
const UNRECORDED = { llm_input: ["historyMessages"] };
const MAX_LINE = 4 * 1024 * 1024;

function record(file, hook, event, ctx) {
  try {
    if (UNRECORDED[hook] && event && typeof event === "object") {
      event = { ...event };
      for (const key of UNRECORDED[hook]) delete event[key];
    }
    let line = JSON.stringify({ t: Date.now() / 1000, hook, event, ctx });
    if (line.length > MAX_LINE) {
      line = JSON.stringify({ t: Date.now() / 1000, hook, truncated: line.length, ctx });
    }
    appendFileSync(file, `${line}\n`);
  } catch { /* a probe must never break a run */ }
}

export default {
  id: "fleet-probe",
  name: "fleet probe",
  description: "Lab only: records what OpenClaw hands plugins at each hook.",
  register(api) {
    const file = api.pluginConfig && api.pluginConfig.logFile;
    if (typeof file !== "string" || !file) return;
    let version = null;
    try { version = api.runtime && api.runtime.version ? String(api.runtime.version) : null; }
    catch { /* older releases: no runtime.version */ }
    record(file, "register", { runtimeVersion: version }, {});
    for (const hook of HOOKS) {
      api.on(hook, (event, ctx) => { record(file, hook, event, ctx); }, { priority: -100 });
    }
  },
};
