"""fleet.gateway: the host service that loads plugins and runs agent sessions and subagents.

Standard library only, Python 3.9+. CLI (`python3 -m fleet.gateway` = `fleet-gateway`):

    [--state-dir D] init [--link-plugins-from DIR]      dev/test layout + extension symlinks
    [--state-dir D] run                                  foreground
    [--state-dir D] start|restart [--expect id=v]... [--timeout S] [--release DIR] [--json]
    [--state-dir D] stop [--timeout GRACE_S] [--json]    "not running" is exit 0
    [--state-dir D] status [--json]                      exit 0 ready, 1 unhealthy, 3 stopped
    [--state-dir D] call OP [key=str] [key:=json] [--json-args '{..}'|-] [--retry S] [--timeout S]
                                                         prints {"ok", "result"|"error"};
                                                         exit 0 iff ok, 3 if unreachable

Control ops (JSON lines on <state>/run/gateway.sock; args are the request's other keys):

    health                  pid, started_at, uptime_s, versions, plugins, ready, error, release,
                            releaseRoot, releaseVersion, stateDir, commands, hooks
    session.start           agentId? | sessionKey? (default agent:<default agent>:main); an open
                            session with that key is resumed (resumed: true)
    session.turn            sessionKey, prompt?, steps? (or assistant), messages?, trigger?,
                            success?, error? -> injectedContext, appended, notifications,
                            hookErrors, announce? + endedHookErrors? (a child's run that
                            released its held announce; subagent_ended fired after it)
    session.messages        sessionKey, messages? | steps? (appended without hooks; never
                            releases a held announce: only a run of the child does)
    session.close           sessionKey, reason? (new|reset fire before_reset; always session_end)
    sessions                all? -> open (or all) sessions
    subagent.spawn          parentSessionKey, task, agentId?, label?, [prompt|steps|messages]
                            -> childSessionKey, runId, workspaceDir, turn?
    subagent.end            childSessionKey, outcome? (ok|error|timeout|killed|reset|deleted),
                            reason?, error?, runtimeMs? -> ended, alreadyEnded, announce
                            {state: delivered|pending|silent, text}; subagent_ended fires
                            once the announce is delivered or silent (not while pending); a
                            pending child may end again with a non-ok outcome
    transcript              sessionKey, limit? -> session, messages
    persistent.invoke       sessionKey, key, config {lifetime, pendingMessage?, agentId?},
                            input, steps?, text?, error?, waitingInput?, scheduling? (silent)
    persistent.status       sessionKey? -> instances, runs
    persistent.cancel       runId
    command                 command ("/mc state"), sessionKey?
    commands                registered commands
    selftest                each loaded plugin's self-test through this gateway's hooks and
                            commands, on a scratch under <state>/selftest/ -> ok, plugins:
                            {id: {ok, plugin, version, checks: [{name, ok, detail}],
                            duration_ms, unsupported?}} (fleet/gateway/selftest.py)
    stats                   -> plugins: {id: {calls, errors, timeouts, restarts, since}}: each
                            loaded plugin's hook handler calls since the gateway started, those
                            that raised and those past their time limit (self-tests not counted)
    shutdown                graceful stop (same as SIGTERM)

Steps (the simulated model output): "text" | {"text"} | {"tool", "args", "result", "text"?} |
{"toolCall": {...}} | {"toolResult": {...}} | {"yield": true|{"message"}} |
{"compaction": true|{"tokensBefore"}} | {"message": <raw OpenClaw message>}.
"""
