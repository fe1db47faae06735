// The OpenClaw side of a fleet plugin: a thin bridge to one long-lived Python worker.
//
// OpenClaw (Node) loads each plugin's index.js, which calls definePlugin() below. The continuity
// logic stays in Python, written once: on the first hook (never in register(), which OpenClaw
// also runs inside CLI processes) the bridge starts one python3 worker
// (fleet/gateway/worker.py) from the release the plugin directory belongs to (see locate()), and
// forwards every hook and command as one JSON line on the worker's stdin; the answer is one JSON
// line on its stdout.
//
// Every call has a deadline and fails open: no injection, an error through api.logger, the agent
// never blocked. A dead worker is restarted (at once the first time, then with backoff that only
// a worker which stayed up STABLE_MS resets); a hung one is killed after a missed ping. A missing
// or too old python3 is a logged diagnostic, never a throw into the gateway. Lines are bounded
// both ways. Node built-ins only.
//
// Each plugin also answers the gateway RPC `<plugin id>.ready` (api.registerGatewayMethod, in
// OpenClaw 2026.4.24 and 2026.9.6): the bridge starts the worker if needed and sends it a probe,
// a no-op hook through the same path as every hook, and answers with the worker's plugin id and
// version. A deploy is ready only when that answer names the new version, so a release whose
// Python cannot load is caught before any agent turn needs it.
//
// Two more RPCs serve a deploy and `invoke status`. `<plugin id>.selftest` (a deploy's gate after
// readiness) sends the worker `selftest`: the plugin's own scenario through the worker's hook bus
// and command registry, on a scratch workspace the host picks (fleet/gateway/selftest.py), and
// answers with its result {ok, plugin, version, checks: [{name, ok, detail}], duration_ms}.
// `<plugin id>.stats` answers the plugin's hook statistics since this OpenClaw process loaded
// it: {plugin, calls, errors, timeouts, restarts, since, worker}. `calls` are the hooks OpenClaw
// handed the plugin; `errors` the handlers that raised (the worker's count) plus the calls that
// got no answer (worker unavailable or failed); `timeouts` the handlers past the worker's time
// limit plus the calls whose answer missed the bridge's deadline; `restarts` the workers that
// died (each is started again on the next call). A dead worker's counts are kept: every hook
// answer carries the worker's running totals. Self-tests and readiness probes are not counted.
//
// This file is the one source of the bridge. Each plugin directory holds it as `bridge.mjs`
// (a link to this file in the source tree, a copy in a release), because OpenClaw copies a plugin
// directory on its own (capture, restore after a failed reload) and an import from outside that
// directory would not be copied with it.

import { spawn } from "node:child_process";
import { existsSync, realpathSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const MAX_REQUEST_BYTES = 8 * 1024 * 1024; // one JSON line to the worker
export const MAX_REPLY_BYTES = 4 * 1024 * 1024; // one JSON line from the worker
const PING_TIMEOUT_MS = 2000;
const START_TIMEOUT_MS = 30000; // spawn to the worker's ready line
const STDERR_TAIL = 4000;
const LOG_MSG_MAX = 4000;
const MIN_PYTHON = [3, 9];
// A worker that stayed up this long counts as healthy again: its death restarts at once. One
// that dies sooner keeps the backoff growing, however many calls it answered before it died.
export const STABLE_MS = 60000;
// Default per-call deadlines, below OpenClaw's own per-handler budgets (15 s prompt, 30 s observe).
const DEFAULT_TIMEOUTS_MS = { before_prompt_build: 10000, command: 20000, other: 25000 };
const STATS_TIMEOUT_MS = 2000; // a live worker's counts, for `<id>.stats`
const REGISTRY = Symbol.for("fleet.openclaw.bridge.workers");
const STATS = Symbol.for("fleet.openclaw.bridge.stats");

// Python side of the handshake: written for any python (even 2.x) so that a too old interpreter
// answers with a readable diagnostic instead of a SyntaxError from the worker's own modules.
const BOOT = [
  "import sys, json",
  `if sys.version_info[:2] < (${MIN_PYTHON[0]}, ${MIN_PYTHON[1]}):`,
  "    sys.stdout.write(json.dumps({'fatal': 'python ' + sys.version.split()[0] + ' at ' + "
    + `sys.executable + ' is too old: the fleet worker needs Python >= ${MIN_PYTHON.join(".")}'}) + '\\n')`,
  "    sys.stdout.flush()",
  "    sys.exit(3)",
  "import os",
  "if not os.path.isfile(os.path.join(sys.argv[1], 'fleet', 'gateway', 'worker.py')):",
  "    sys.stdout.write(json.dumps({'fatal': 'no fleet release at ' + sys.argv[1] + "
    + "' (fleet/gateway/worker.py is missing beside the plugin)'}) + '\\n')",
  "    sys.stdout.flush()",
  "    sys.exit(3)",
  "sys.path.insert(0, sys.argv[1])",
  "from fleet.gateway.worker import main",
  "sys.exit(main(sys.argv[2:]))",
].join("\n");


function registry() {
  if (!globalThis[REGISTRY]) globalThis[REGISTRY] = new Map();
  return globalThis[REGISTRY];
}

/**
 * One plugin's hook statistics in this Node process, kept across `plugins.reload` (a new Bridge
 * for the same plugin id) and across its workers: `own` is what only the bridge sees, `retired`
 * the last totals of workers that died, `live` the current worker's latest totals.
 */
class HookStats {
  constructor() {
    this.since = new Date().toISOString().replace(/\.\d{3}Z$/, "Z");
    this.calls = 0;
    this.errors = 0; // calls that got no answer (not a timeout)
    this.timeouts = 0; // calls whose answer missed the deadline
    this.restarts = 0;
    this.retired = { calls: 0, errors: 0, timeouts: 0 };
    this.live = null; // {worker, calls, errors, timeouts}
  }

  /** A worker's running totals (from a hook answer or a `stats` answer): never backwards. */
  seen(worker, totals) {
    if (!totals || typeof totals !== "object") return;
    if (this.live?.worker !== worker) this.live = { worker, calls: 0, errors: 0, timeouts: 0 };
    for (const k of ["calls", "errors", "timeouts"]) {
      const n = Number(totals[k]);
      if (Number.isSafeInteger(n) && n > this.live[k]) this.live[k] = n;
    }
  }

  /** A worker died: its totals stay counted. */
  retire(worker) {
    if (this.live?.worker === worker) {
      for (const k of ["calls", "errors", "timeouts"]) this.retired[k] += this.live[k];
      this.live = null;
    }
  }

  merged(pluginId) {
    const live = this.live ?? { calls: 0, errors: 0, timeouts: 0 };
    const worker = this.live ? { pid: this.live.worker.child?.pid ?? null, calls: live.calls,
      errors: live.errors, timeouts: live.timeouts } : null;
    return { plugin: pluginId, calls: this.calls,
      errors: this.errors + this.retired.errors + live.errors,
      timeouts: this.timeouts + this.retired.timeouts + live.timeouts,
      restarts: this.restarts, since: this.since, worker };
  }
}

function statsOf(pluginId) {
  if (!globalThis[STATS]) globalThis[STATS] = new Map();
  const all = globalThis[STATS];
  if (!all.has(pluginId)) all.set(pluginId, new HookStats());
  return all.get(pluginId);
}

function clip(text, max) {
  const s = String(text);
  return s.length > max ? `${s.slice(0, max)}...[+${s.length - max} chars]` : s;
}

// JSON.stringify that never throws: functions, bigints and cycles become markers.
function safeJson(value) {
  // V8's fast path (no replacer) first: a hook call is on the agent's critical path, and a
  // replacer runs for every key of the transcript. Only bigints and cycles throw: then markers.
  try { return JSON.stringify(value); } catch { return markedJson(value); }
}

function markedJson(value) {
  const seen = new WeakSet();
  return JSON.stringify(value, (_key, v) => {
    if (typeof v === "function") return undefined;
    if (typeof v === "bigint") return String(v);
    if (v && typeof v === "object") {
      if (seen.has(v)) return "[cycle]";
      seen.add(v);
    }
    return v;
  });
}

// The host's logger, made unable to throw into a stream handler or a hook.
function safeLogger(logger) {
  const base = logger && typeof logger === "object" ? logger : console;
  const out = {};
  for (const level of ["info", "warn", "error", "debug"]) {
    out[level] = (msg) => {
      try {
        (typeof base[level] === "function" ? base[level] : base.info).call(base, msg);
      } catch { /* a broken logger must not break the bridge */ }
    };
  }
  return out;
}

// The newest messages of an event that fit in `budget` bytes (OpenClaw hands whole transcripts).
function trimMessages(event, budget) {
  const msgs = event.messages;
  let used = 0;
  let keep = 0;
  for (let i = msgs.length - 1; i >= 0; i -= 1) {
    const size = Buffer.byteLength(safeJson(msgs[i]) ?? "null", "utf8") + 1;
    if (used + size > budget) break;
    used += size;
    keep += 1;
  }
  return { ...event, messages: keep ? msgs.slice(msgs.length - keep) : [] };
}

function stableMs() { // FLEET_BRIDGE_STABLE_MS: for tests that cannot wait a minute
  const n = Number(process.env.FLEET_BRIDGE_STABLE_MS);
  return Number.isFinite(n) && n > 0 ? n : STABLE_MS;
}

function envTimeout() {
  const n = Number(process.env.FLEET_BRIDGE_TIMEOUT_MS);
  return Number.isFinite(n) && n > 0 ? n : undefined;
}

/** One worker process: spawn, handshake, JSON-line calls, death. */
class Worker {
  constructor({ python, pluginId, pluginDir, releaseRoot, openclawVersion, logger, onExit }) {
    this.pluginId = pluginId;
    this.logger = logger;
    this.pending = new Map();
    this.seq = 0;
    this.buf = "";
    this.stderr = "";
    this.dead = false;
    this.info = null;
    this.startedAt = Date.now();
    this.onExit = onExit;
    let settle;
    this.ready = new Promise((res, rej) => { settle = { res, rej }; });
    this.ready.catch(() => {}); // observed by callers; never an unhandled rejection
    this.settle = settle;
    const args = ["-s", "-E", "-c", BOOT, releaseRoot, "--plugin-dir", pluginDir,
      "--plugin-id", pluginId];
    // The worker says once, in this gateway's log, when the release was not proven on it.
    if (openclawVersion) args.push("--openclaw-version", openclawVersion);
    this.python = python;
    try {
      this.child = spawn(python, args, { stdio: ["pipe", "pipe", "pipe"], env: process.env });
    } catch (err) {
      this.fail(`cannot start ${python}: ${err.message}`);
      return;
    }
    const child = this.child;
    child.on("error", (err) => {
      this.fatal = err.code === "ENOENT"; // no such python: starting again cannot help
      const why = err.code === "ENOENT"
        ? `${python} not found (${err.message}); install Python >= ${MIN_PYTHON.join(".")} or set `
          + `plugins.entries.${pluginId}.config.python (or FLEET_PYTHON) to its path`
        : `cannot start ${python}: ${err.message}`;
      this.fail(why);
    });
    // "close", not "exit": it comes after stdout is drained, so a fatal line is read first.
    child.on("close", (code, signal) => {
      const tail = this.stderr.trim() ? `; stderr: ${clip(this.stderr.trim(), 1000)}` : "";
      this.fail(`worker (pid ${child.pid}) exited (${signal || `code ${code}`})${tail}`);
    });
    child.stdin.on("error", () => {}); // EPIPE when it died: reported by "close"
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk) => this.onData(chunk));
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (chunk) => {
      this.stderr = (this.stderr + chunk).slice(-STDERR_TAIL);
    });
    // A CLI process that ran one hook must still be free to exit: the pipes and the child do not
    // hold Node's event loop; a pending call's own timer does, until it is answered or expires.
    child.unref();
    for (const s of [child.stdin, child.stdout, child.stderr]) s?.unref?.();
    this.startTimer = setTimeout(() => this.fail(`worker (pid ${child.pid}) did not start within `
      + `${START_TIMEOUT_MS} ms${this.stderr.trim() ? `; stderr: ${clip(this.stderr.trim(), 1000)}` : ""}`),
    START_TIMEOUT_MS);
    this.startTimer.unref?.();
  }

  fail(why) {
    if (this.dead) return;
    this.dead = true;
    this.why = why;
    clearTimeout(this.startTimer);
    this.settle.rej(new Error(why));
    for (const [, p] of this.pending) {
      clearTimeout(p.timer);
      // Not acknowledged: the worker never read it, so another worker may safely run it.
      p.resolve({ ok: false, error: why, unread: !p.acked });
    }
    this.pending.clear();
    try { this.child?.kill("SIGKILL"); } catch { /* already gone */ }
    this.onExit?.(this, why);
  }

  onData(chunk) {
    this.buf += chunk;
    let nl;
    while ((nl = this.buf.indexOf("\n")) >= 0) {
      const line = this.buf.slice(0, nl);
      this.buf = this.buf.slice(nl + 1);
      if (line.trim()) this.onLine(line);
      if (this.dead) return;
    }
    if (this.buf.length > MAX_REPLY_BYTES) {
      this.fail(`worker sent a line longer than ${MAX_REPLY_BYTES} bytes; restarting it`);
    }
  }

  onLine(line) {
    let msg;
    try { msg = JSON.parse(line); } catch {
      this.logger.warn(`[bridge] worker wrote a non-JSON line: ${clip(line, 300)}`);
      return;
    }
    if (!msg || typeof msg !== "object") return;
    if (msg.fatal) { this.fatal = true; this.fail(String(msg.fatal)); return; }
    if (msg.ready) {
      clearTimeout(this.startTimer);
      this.info = msg;
      this.logger.info(`[bridge] worker started (pid ${msg.pid}, python ${msg.python}, `
        + `${msg.plugin} ${msg.version})`);
      this.settle.res(msg);
      return;
    }
    if (msg.ack !== undefined) {
      const p = this.pending.get(msg.ack);
      if (p) p.acked = true;
      return;
    }
    if (msg.log) {
      const level = ["info", "warn", "error", "debug"].includes(msg.log) ? msg.log : "info";
      this.logger[level](clip(msg.msg ?? "", LOG_MSG_MAX));
      return;
    }
    const p = this.pending.get(msg.id);
    if (!p) return; // answered after its deadline: already failed open
    this.pending.delete(msg.id);
    clearTimeout(p.timer);
    p.resolve(msg);
  }

  /** Send one request; resolves {ok, result|error} (never rejects) by `deadline` (ms epoch). */
  request(body, deadline) {
    return new Promise((resolveCall) => {
      if (this.dead) { resolveCall({ ok: false, error: this.why }); return; }
      const id = ++this.seq;
      let line;
      try {
        line = safeJson({ ...body, id });
      } catch (err) {
        resolveCall({ ok: false, error: `request cannot be serialised: ${err.message}` });
        return;
      }
      // Cheap bound first (a UTF-16 unit is at most 3 UTF-8 bytes): most lines skip the count.
      if (line.length * 3 > MAX_REQUEST_BYTES && Buffer.byteLength(line, "utf8") > MAX_REQUEST_BYTES) {
        resolveCall({ ok: false, error: `request larger than ${MAX_REQUEST_BYTES} bytes; not sent`,
          tooLarge: true, bytes: Buffer.byteLength(line, "utf8") });
        return;
      }
      const timer = setTimeout(() => {
        this.pending.delete(id);
        resolveCall({ ok: false, error: "timeout", timedOut: true });
      }, Math.max(1, deadline - Date.now()));
      const p = { resolve: resolveCall, timer, acked: false };
      this.pending.set(id, p);
      try {
        this.child.stdin.write(line + "\n");
      } catch { /* a closed pipe: "close" fails the call as unread */ }
    });
  }

  stop() {
    if (this.dead) return;
    this.fail("stopped");
  }
}

/** Per plugin: which worker, when to restart it, and the calls' fail-open policy. */
class Bridge {
  constructor({ pluginId, pluginDir, releaseRoot, api }) {
    this.pluginId = pluginId;
    this.pluginDir = pluginDir;
    this.releaseRoot = releaseRoot;
    this.api = api;
    this.logger = safeLogger(api.logger);
    this.failures = 0;
    this.notBefore = 0;
    this.lastDiag = "";
    this.failedKey = null;
    this.lastFailure = null; // {why, final}: why the last worker died; final: it cannot start
    this.unread = new Map(); // hook name -> event fields its Python body never reads
    this.stats = statsOf(pluginId);
  }

  config() {
    const cfg = this.api.pluginConfig;
    return cfg && typeof cfg === "object" ? cfg : {};
  }

  python() {
    const p = this.config().python || process.env.FLEET_PYTHON || "python3";
    return String(p);
  }

  openclawVersion() { // the OpenClaw this runs in (api.runtime.version, 2026.4.24 and later)
    try {
      const v = this.api.runtime?.version;
      return typeof v === "string" && v ? v : undefined;
    } catch { return undefined; } // a runtime that cannot say: no check
  }

  timeoutMs(kind) {
    const cfg = Number(this.config().bridgeTimeoutMs);
    if (Number.isFinite(cfg) && cfg > 0) return cfg;
    return envTimeout() ?? DEFAULT_TIMEOUTS_MS[kind] ?? DEFAULT_TIMEOUTS_MS.other;
  }

  diag(message) {
    // Same failure over and over (python missing, backoff): say it once per distinct reason.
    if (message === this.lastDiag) return;
    this.lastDiag = message;
    this.logger.error(`[bridge] ${message}`);
  }

  key() {
    return `${this.pluginId}\0${this.pluginDir}\0${this.python()}`;
  }

  /** The live worker, or a new one (replacing another bridge's for this plugin id). */
  acquire() {
    const reg = registry();
    const current = reg.get(this.pluginId);
    if (current && !current.worker.dead) {
      if (current.key === this.key()) return current.worker;
      current.worker.stop(); // an older release (or python) of this plugin: one worker per id
    }
    if (this.failedKey !== this.key()) {
      // Another python or release than the one that kept failing: try it at once.
      this.failures = 0;
      this.notBefore = 0;
    }
    if (Date.now() < this.notBefore) return null;
    const worker = new Worker({
      python: this.python(),
      pluginId: this.pluginId,
      pluginDir: this.pluginDir,
      releaseRoot: this.releaseRoot,
      openclawVersion: this.openclawVersion(),
      logger: this.logger,
      onExit: (w, why) => {
        if (reg.get(this.pluginId)?.worker === w) reg.delete(this.pluginId);
        this.stats.retire(w);
        if (why === "stopped") return;
        if (w.info) this.stats.restarts += 1; // it had started: the next call starts another
        if (Date.now() - w.startedAt >= stableMs()) this.failures = 0; // it had been healthy
        this.failedKey = this.key();
        this.lastFailure = { why, final: w.fatal };
        this.failures += 1;
        const delay = this.failures <= 1 ? 0 : Math.min(500 * 2 ** (this.failures - 2), 30000);
        this.notBefore = Date.now() + delay;
        this.diag(`continuity worker unavailable: ${why}`
          + (delay ? ` (next start in ${Math.round(delay / 100) / 10}s)` : ""));
      },
    });
    reg.set(this.pluginId, { key: this.key(), worker });
    return worker;
  }

  /** One call with a deadline: {ok: true, result} or {ok: false, error}; never throws. */
  async call(body, kind) {
    const deadline = Date.now() + this.timeoutMs(kind);
    let answer = await this.attempt(body, deadline);
    if (!answer.ok && answer.unread && Date.now() < deadline) {
      // The worker died before it read the request (killed between two hooks): a fresh one
      // runs it, still within the same deadline.
      answer = await this.attempt(body, deadline);
    }
    return answer;
  }

  async attempt(body, deadline) {
    const worker = this.acquire();
    if (!worker) {
      const wait = Math.max(0, this.notBefore - Date.now());
      const last = this.lastFailure;
      return { ok: false, final: Boolean(last?.final),
        error: `worker unavailable, next start in ${Math.ceil(wait / 100) / 10}s`
          + (last ? `; the last one: ${last.why}` : "") };
    }
    let timer;
    try {
      if (!worker.info) { // not ready yet: wait for its ready line, within the deadline
        const expired = new Promise((res) => {
          timer = setTimeout(() => res({ ok: false, error: "timeout", timedOut: true }),
            Math.max(1, deadline - Date.now()));
        });
        const ready = await Promise.race([
          worker.ready.then(() => ({ ok: true }),
            (err) => ({ ok: false, error: err.message, final: Boolean(worker.fatal) })),
          expired,
        ]);
        if (!ready.ok) return ready;
      }
      const answer = await worker.request(body, deadline);
      if (answer.stats) this.stats.seen(worker, answer.stats);
      if (answer.ok) {
        this.lastDiag = "";
      } else if (answer.timedOut) {
        this.checkAlive(worker);
      }
      return answer;
    } finally {
      clearTimeout(timer);
    }
  }

  /** After a timed-out call: a worker that cannot even answer a ping is hung; kill it. */
  checkAlive(worker) {
    if (worker.dead || worker.pinging) return;
    worker.pinging = true;
    worker.request({ op: "ping" }, Date.now() + PING_TIMEOUT_MS).then((answer) => {
      worker.pinging = false;
      if (!answer.ok && !worker.dead) {
        worker.fail(`worker (pid ${worker.child?.pid}) did not answer a ping within `
          + `${PING_TIMEOUT_MS} ms: killed`);
      }
    });
  }

  /**
   * The gateway RPC `<plugin id>.ready`: the worker (started now if need be) answers a probe, a
   * no-op hook through the path every hook takes. Answers {id, plugin, version, pid, python,
   * hooks, commands, pluginDir}, or an error whose `details.final` says waiting cannot help (the
   * plugin cannot load in this release, python is missing) rather than "not yet".
   */
  async ready(respond) {
    let answer;
    try {
      answer = await this.call({ op: "probe", ...this.context() }, "other");
    } catch (err) {
      answer = { ok: false, error: String(err?.message || err) };
    }
    try {
      if (answer.ok) {
        respond(true, { id: this.pluginId, ...answer.result, pluginDir: this.pluginDir });
      } else {
        const why = answer.timedOut ? `no answer within ${this.timeoutMs("other")} ms`
          : answer.error;
        // Not `retryable`: the deploy's readiness asks again on its own schedule; `final` says
        // whether that can help.
        respond(false, undefined, { code: "UNAVAILABLE", message: `${this.pluginId}: ${why}`,
          details: { final: Boolean(answer.final) } });
      }
    } catch (err) {
      this.logger.error(`[bridge] ${this.pluginId}.ready: ${err?.stack || err}`);
    }
  }

  /**
   * The gateway RPC `<plugin id>.selftest`: the plugin's self-test in its worker (started now if
   * need be). Answers the self-test's result, passed or not ({ok, plugin, version, checks,
   * duration_ms}); an error only when the worker could not run it (`details.final` as for
   * `.ready`).
   */
  async selftest(respond) {
    let answer;
    try {
      answer = await this.call({ op: "selftest", ...this.context() }, "other");
    } catch (err) {
      answer = { ok: false, error: String(err?.message || err) };
    }
    try {
      if (answer.ok && answer.result && typeof answer.result === "object") {
        respond(true, { id: this.pluginId, ...answer.result });
      } else {
        const why = answer.timedOut ? `no answer within ${this.timeoutMs("other")} ms`
          : answer.error ?? "the worker answered no self-test";
        respond(false, undefined, { code: "UNAVAILABLE", message: `${this.pluginId}: ${why}`,
          details: { final: Boolean(answer.final) } });
      }
    } catch (err) {
      this.logger.error(`[bridge] ${this.pluginId}.selftest: ${err?.stack || err}`);
    }
  }

  /**
   * The gateway RPC `<plugin id>.stats`: the merged hook statistics (HookStats). A live worker
   * is asked for its latest totals (within STATS_TIMEOUT_MS); none is started for it.
   */
  async statsRpc(respond) {
    try {
      const current = registry().get(this.pluginId);
      const worker = current && !current.worker.dead && current.worker.info
        ? current.worker : null;
      if (worker) {
        const answer = await worker.request({ op: "stats" }, Date.now() + STATS_TIMEOUT_MS);
        if (answer.ok) this.stats.seen(worker, answer.result);
      }
      respond(true, this.stats.merged(this.pluginId));
    } catch (err) {
      this.logger.error(`[bridge] ${this.pluginId}.stats: ${err?.stack || err}`);
      try {
        respond(false, undefined, { code: "UNAVAILABLE", message: `${this.pluginId}: ${err}` });
      } catch { /* the connection is gone */ }
    }
  }

  context() {
    // What the worker needs beyond event/ctx: this plugin's config and the agents/plugins
    // sections of OpenClaw's config (workspaces, other plugins' entries), parsed by OpenClaw.
    const full = this.api.config && typeof this.api.config === "object" ? this.api.config : null;
    const out = { pluginConfig: this.config() };
    if (full) out.config = { agents: full.agents, plugins: { entries: full.plugins?.entries } };
    return out;
  }

  async hook(name, event, ctx) {
    try {
      return await this.forward(name, event, ctx);
    } catch (err) { // nothing may escape into OpenClaw's hook runner
      this.logger.error(`[bridge] ${name}: ${err?.stack || err}; continuing without it`);
      return undefined;
    }
  }

  async forward(name, event, ctx) {
    let ev = event && typeof event === "object" ? event : {};
    const unread = this.unread.get(name);
    if (unread && unread.some((k) => k in ev)) {
      // Fields the Python hook never reads (before_prompt_build: the whole transcript) are not
      // serialised, piped and parsed on every prompt.
      ev = { ...ev };
      for (const k of unread) delete ev[k];
    }
    const base = { op: "hook", hook: name, ctx, ...this.context() };
    const kind = name === "before_prompt_build" ? name : "other";
    let answer = await this.call({ ...base, event: ev }, kind);
    if (answer.tooLarge && Array.isArray(ev.messages)) {
      // Serialised once on the common path; only an oversized event is measured and trimmed.
      const rest = answer.bytes - Buffer.byteLength(safeJson(ev.messages), "utf8");
      const trimmed = trimMessages(ev, MAX_REQUEST_BYTES - rest - 1024);
      this.logger.warn(`[bridge] ${name}: event larger than ${MAX_REQUEST_BYTES} bytes; `
        + `sending the newest ${trimmed.messages.length} of ${ev.messages.length} messages`);
      answer = await this.call({ ...base, event: trimmed }, kind);
    }
    this.stats.calls += 1;
    if (!answer.ok) {
      if (answer.timedOut) this.stats.timeouts += 1;
      else this.stats.errors += 1;
      this.logger.error(`[bridge] ${name}: ${answer.timedOut ? `no answer within `
        + `${this.timeoutMs(name)} ms` : answer.error}; continuing without it`);
      return undefined;
    }
    for (const err of answer.errors ?? []) this.logger.error(`[bridge] ${name}: ${err}`);
    const result = answer.result;
    return result && typeof result === "object" && Object.keys(result).length ? result : undefined;
  }

  async command(name, ctx) {
    try {
      return await this.runCommand(name, ctx);
    } catch (err) {
      this.logger.error(`[bridge] /${name}: ${err?.stack || err}`);
      return { text: `MC error: ${clip(err?.message || err, 500)}` };
    }
  }

  async runCommand(name, ctx) {
    const c = ctx && typeof ctx === "object" ? ctx : {};
    const answer = await this.call({
      op: "command",
      command: name,
      ctx: { args: typeof c.args === "string" ? c.args : "", sessionKey: c.sessionKey },
      ...this.context(),
    }, "command");
    if (!answer.ok) {
      const why = answer.timedOut ? `no answer within ${this.timeoutMs("command")} ms` : answer.error;
      this.logger.error(`[bridge] /${name}: ${why}`);
      return { text: `MC error: the continuity worker is unavailable (${clip(why, 500)})` };
    }
    const text = answer.result?.text;
    return { text: typeof text === "string" ? text : "MC error: the worker returned no text" };
  }
}

/**
 * Where the plugin really lives: `<release>/fleet/plugins/<pkg>`, and its release root.
 *
 * OpenClaw does not run the entry where it lies: it copies the plugin's module graph into a
 * capture directory under `<state>/tmp` and imports it there, so `import.meta.url` says nothing
 * about the release. `api.rootDir` (else `api.source`) is the directory OpenClaw found the plugin
 * in (`<state>/extensions/<id>` or a `plugins.load.paths` entry); its realpath is the release's.
 */
export function locate(api, entryUrl) {
  const candidates = [];
  if (typeof api?.rootDir === "string" && api.rootDir) candidates.push(api.rootDir);
  if (typeof api?.source === "string" && api.source) candidates.push(dirname(api.source));
  candidates.push(dirname(fileURLToPath(entryUrl)));
  for (const dir of candidates) {
    try {
      const real = realpathSync(dir);
      const root = resolve(real, "..", "..", "..");
      if (existsSync(join(root, "fleet", "gateway", "worker.py"))) {
        return { pluginDir: real, releaseRoot: root };
      }
    } catch { /* not there: try the next */ }
  }
  const real = candidates[0];
  return { pluginDir: real, releaseRoot: resolve(real, "..", "..", "..") }; // the worker says why
}

/**
 * The OpenClaw plugin object for one fleet plugin directory.
 *
 * hooks: [[hookName, priority, unreadFields?], ...] (unreadFields: event keys the Python body
 * of that hook never reads, left out of the line: they mirror the plugin's UNREAD_EVENT_FIELDS);
 * commands: [{name, description}]. register() only registers handlers (hooks, commands, the
 * `<id>.ready`, `<id>.selftest` and `<id>.stats` gateway methods) and resolves paths: it starts
 * nothing and writes nothing (OpenClaw also runs it inside CLI processes).
 */
export function definePlugin({ id, name, description, entryUrl, hooks = [], commands = [] }) {
  return {
    id,
    name,
    description,
    register(api) {
      const { pluginDir, releaseRoot } = locate(api, entryUrl);
      const bridge = new Bridge({ pluginId: id, pluginDir, releaseRoot, api });
      for (const [hook, priority, unread] of hooks) {
        if (Array.isArray(unread) && unread.length) bridge.unread.set(hook, unread.map(String));
        api.on(hook, (event, ctx) => bridge.hook(hook, event, ctx), { priority });
      }
      if (typeof api.registerGatewayMethod === "function") {
        api.registerGatewayMethod(`${id}.ready`, (opts) => bridge.ready(opts?.respond),
          { scope: "operator.read" });
        api.registerGatewayMethod(`${id}.selftest`, (opts) => bridge.selftest(opts?.respond),
          { scope: "operator.write" });
        api.registerGatewayMethod(`${id}.stats`, (opts) => bridge.statsRpc(opts?.respond),
          { scope: "operator.read" });
      }
      for (const cmd of commands) {
        api.registerCommand({
          name: cmd.name,
          description: cmd.description,
          acceptsArgs: true,
          requireAuth: false,
          handler: (ctx) => bridge.command(cmd.name, ctx),
        });
      }
    },
  };
}
