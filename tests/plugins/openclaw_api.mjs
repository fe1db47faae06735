// Plays OpenClaw 2026.9.6's side of a plugin for the bridge tests: imports a plugin entry,
// calls register(api) with an api shaped like OpenClaw's (on, registerCommand, logger,
// pluginConfig, config, version, id, source, rootDir, registrationMode, runtime.version), then
// runs a scenario.
//
// stdin: JSON {entry, rootDir? (api.rootDir: the plugin's root, default the entry's dir; an
// installed npm package's root holds its entry deeper), capture?, throwingLogger?, pluginConfig?,
// config?, openclawVersion? (runtime.version, default 2026.9.6), steps: [...]}. capture:
// import the entry from a copy of its plugin directory in a temp dir, as OpenClaw 2026.9.6 does
// ("plugin captures", and its restore after a failed reload), while api.rootDir/api.source still
// name the original directory. Steps:
//   {"hook": name, "event": {}, "ctx": {}}        -> {"result"}  (as OpenClaw awaits a handler)
//     "padMessages": n puts a user message of n bytes first in event.messages (oversized events)
//   {"command": name, "args": "..."}               -> {"result"}  (the handler's {text})
//   {"method": name, "params": {}}                 -> {"ok", "payload", "error"}  (a gateway RPC
//                                                     registered with api.registerGatewayMethod)
//   {"signal": "SIGKILL"|"SIGSTOP"|"SIGCONT"}      -> {"pids"}    (sent to the live workers)
//   {"workers": true}                              -> {"pids"}    (this process's worker children)
//   {"sleep": ms}
//   {"pluginConfig": {...}}                        (replaces api.pluginConfig)
// stdout: {"registered": {...}} once, then one {"step": i, ...} line per step, then {"logs"}.

import { cpSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { pathToFileURL } from "node:url";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const spec = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const logs = [];
const hooks = new Map();
const commands = new Map();
const methods = new Map();
const print = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

function workers() {
  const out = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const cmd = readFileSync(`/proc/${name}/cmdline`, "utf8");
      if (ppid === process.pid && cmd.includes("fleet.gateway.worker")) out.push(Number(name));
    } catch { /* gone meanwhile */ }
  }
  return out.sort((a, b) => a - b);
}

let imported = spec.entry;
let cap = null;
if (spec.capture) {
  cap = mkdtempSync(join(tmpdir(), "plugin-capture-"));
  const real = realpathSync(dirname(spec.entry));
  const pkg = join(cap, "pkgs", basename(real));
  // The plugin directory alone, its files as files (a release's are; the source tree's bridge.mjs
  // is a link): what OpenClaw copies. An import from outside it would fail here.
  cpSync(real, pkg, { recursive: true, dereference: true });
  imported = join(pkg, basename(spec.entry));
}
const mod = await import(pathToFileURL(imported).href);
const plugin = mod.default;
const api = {
  id: plugin.id,
  name: plugin.name,
  version: "2026.9.6",
  source: spec.entry,
  rootDir: spec.rootDir ?? dirname(spec.entry),
  registrationMode: "full",
  config: spec.config ?? {},
  pluginConfig: spec.pluginConfig ?? {},
  runtime: { version: spec.openclawVersion ?? "2026.9.6" }, // the OpenClaw release it plays
  logger: Object.fromEntries(["info", "warn", "error", "debug"].map(
    (level) => [level, (msg) => {
      logs.push([level, String(msg)]);
      if (spec.throwingLogger) throw new Error("logger broke");
    }])),
  on(name, handler, opts) { hooks.set(name, { handler, priority: opts?.priority ?? 0 }); },
  registerCommand(cmd) { commands.set(cmd.name, cmd); },
  registerGatewayMethod(name, handler, opts) { methods.set(name, { handler, opts }); },
};
plugin.register(api);
await new Promise((r) => setTimeout(r, 200)); // anything register() started would show by now
print({ registered: {
  id: plugin.id,
  hooks: Object.fromEntries([...hooks].map(([n, h]) => [n, h.priority])),
  commands: [...commands.keys()],
  methods: Object.fromEntries([...methods].map(([n, m]) => [n, m.opts?.scope ?? null])),
  workers: workers(),
} });

for (const [i, step] of (spec.steps ?? []).entries()) {
  const t0 = Date.now();
  const out = { step: i };
  if (step.hook) {
    const h = hooks.get(step.hook);
    if (step.padMessages) { // an old, huge message before the step's own messages
      step.event.messages = [{ role: "user", content: "x".repeat(step.padMessages) },
        ...(step.event.messages ?? [])];
    }
    out.result = h ? (await h.handler(step.event ?? {}, step.ctx ?? {})) ?? null : "NO-HANDLER";
  } else if (step.command) {
    const c = commands.get(step.command);
    out.result = await c.handler({ args: step.args ?? "", commandBody: `/${step.command}`,
      senderId: "cli", channel: "webchat", isAuthorizedSender: true, ...(step.ctx ?? {}) });
  } else if (step.method) {
    const m = methods.get(step.method);
    const answered = await new Promise((res) => {
      Promise.resolve(m.handler({ req: { method: step.method }, params: step.params ?? {},
        respond: (ok, payload, error) => res({ ok, payload: payload ?? null,
          error: error ?? null }) })).catch((err) => res({ threw: String(err) }));
    });
    Object.assign(out, answered);
  } else if (step.signal) {
    out.pids = workers();
    for (const pid of out.pids) process.kill(pid, step.signal);
    if (step.signal === "SIGKILL") {
      while (workers().some((p) => out.pids.includes(p))) await new Promise((r) => setTimeout(r, 20));
    }
  } else if (step.workers) {
    out.pids = workers();
  } else if (step.sleep) {
    await new Promise((r) => setTimeout(r, step.sleep));
  } else if (step.pluginConfig) {
    api.pluginConfig = step.pluginConfig;
  }
  out.ms = Date.now() - t0;
  print(out);
}
print({ logs, workers: workers() });
if (cap) rmSync(cap, { recursive: true, force: true });
