"""The rollout side of `deploy --waves`, `deploy --resume`, `rollback --rollout` and `status`.

The tasks in fleet/cli/deploy.py parse flags and confirm hosts; this module shows the plan,
drives fleet.deploy.rollout with a view of its progress on stderr (the wave, each host's step,
the bake countdown and the budget left), asks what to do after a Ctrl-C between waves, and
prints the outcome: a table, then one line saying how the rollout ended and where every host
stands (or one `--json` document with the waves and each host's outcome).
"""

from __future__ import annotations

import sys

from invoke import Exit
from rich.text import Text

from fleet.cli.flags import USAGE_ERROR
from fleet.deploy import api, badreleases, inventory, report, rollout, waves
from fleet.deploy.runner import HostResult
from fleet.terminal.text import visible

INTERRUPTED = 130  # as a shell reports a command ended by SIGINT


def _err(text: str) -> None:
    print(visible(text, multiline=True), file=sys.stderr, flush=True)


class View(rollout.RolloutUI):
    """Progress on stderr: a LiveReport per wave, bake lines, the abort."""

    def __init__(self, yes: bool, as_json: bool):
        self.yes = yes
        self.interactive = not as_json and sys.stdin.isatty() and sys.stderr.isatty()
        self.live: report.LiveReport | None = None
        self.last_bake = -1.0

    def planned(self, record: dict) -> None:
        show_plan(record)

    def wave(self, index: int, count: int, hosts: list[str], budget_left: int | None) -> None:
        left = "unlimited" if budget_left is None else str(budget_left)
        title = f"wave {index + 1}/{count}: {len(hosts)} host(s), failures still tolerated: {left}"
        self.live = report.LiveReport(hosts, title)
        self.live.__enter__()
        if not self.live.console.is_terminal:
            _err(title)

    def host(self, host: str, step: str, note: str) -> None:
        if self.live is not None and host in self.live.state:
            self.live.update(host, step, note)
        elif step in (rollout.BAKE_FAILED,) or step in rollout.HOST_DONE:
            _err(f"  {host}: {step} {note}".rstrip())

    def wave_done(self, index: int, results: list[HostResult]) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)
            self.live = None
        failed = [r.host for r in results if not r.ok and r.result != "skipped"]
        _err(f"wave {index + 1} done: {len(results) - len(failed)} ok"
             + (f", failed: {', '.join(failed)}" if failed else ""))

    def bake(self, remaining_s: float, watched: int, budget_left: int | None) -> None:
        bucket = remaining_s // 10
        if remaining_s > 0 and bucket == self.last_bake:
            return  # one line per 10 s is enough in a log
        self.last_bake = bucket
        left = "unlimited" if budget_left is None else str(budget_left)
        _err(f"baking: {remaining_s:.0f}s left, watching {watched} host(s), failures still "
             f"tolerated: {left}")

    def aborting(self, reason: str, hosts: list[str]) -> None:
        _err(f"ABORTING: {reason}; taking back {len(hosts)} host(s)")
        self.live = report.LiveReport(hosts, "taking back")
        self.live.__enter__()

    def close(self) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)
            self.live = None

    def decide(self) -> str:
        self.close()
        if self.yes:
            _err("interrupted: --yes was given, so the rollout is taken back")
            return "abort"
        if not self.interactive:
            _err("interrupted: the rollout is paused (the last line says how to finish it or "
                 "take it back)")
            return "pause"
        while True:
            print("Rollout interrupted. [c]ontinue, [a]bort and take back, or [p]ause (finish "
                  "later with --resume)? [p] ", end="", file=sys.stderr, flush=True)
            try:
                answer = sys.stdin.readline().strip().lower()
            except KeyboardInterrupt:
                answer = "p"
            choice = {"c": "continue", "a": "abort", "p": "pause", "": "pause"}.get(answer[:1])
            if choice:
                return choice


def show_plan(record: dict) -> None:
    """The waves, the budget and the bake, before anything changes (and for `--dry-run`)."""
    _err(plan_text(record["waves"], record["budget"]["tolerated"],
                   record["budget"]["max_fail"], record["options"]["bake_s"]))


def show_plan_of(names: list[str], options: rollout.Options) -> None:
    """The plan of a rollout not started yet (`--dry-run`)."""
    _err(plan_text(waves.plan(names, options.waves), waves.budget(options.max_fail, len(names)),
                   options.max_fail, options.bake_s))


def plan_text(plan: list[list[str]], tolerated: int | None, max_fail: str | None,
              bake_s: float) -> str:
    lines = [f"rollout plan: {len(plan)} wave(s)"]
    for index, wave in enumerate(plan):
        names = ", ".join(wave if len(wave) <= 12 else [*wave[:12], f"... (+{len(wave) - 12})"])
        lines.append(f"  wave {index + 1}: {len(wave)} host(s): {names}")
    budget = ("unlimited failures (no --max-fail)" if tolerated is None else
              f"taken back when more than {tolerated} host(s) fail (--max-fail {max_fail})")
    lines.append(f"  budget: {budget}")
    lines.append(f"  bake between waves: {bake_s:g}s" if bake_s else
                 "  no bake between waves (--bake)")
    return "\n".join(lines)


def finish(run, record: dict, as_json: bool, started_as: str = "",
           where: str | None = None) -> None:
    """The outcome: table + final line, or the `--json` document; exit 1 unless completed.
    The run's hooks see that document first, `rollout-aborted` among them when this run took
    the rollout back (`started_as`: the record's state before this run, "" for a new one).
    `where`: where the record is kept, when not in its file (the Temporal engine's workflow)."""
    results = rollout.results(record)
    ok = record["state"] == rollout.COMPLETED and all(r.ok for r in results)
    line = rollout.summary(record)
    extra = rollout.document(record)
    extra["rollout"]["record"] = where or str(rollout.records_dir(record["inventory"]) /
                                              f"{record['id']}.json")
    extra["rollout"]["summary"] = line
    doc = report.json_document(run.action, results, ok, run.elapsed, extra)
    run.after(doc, took_back=record["state"] in (rollout.ABORTED, rollout.ABORTING)
              and started_as != rollout.ABORTED)
    if as_json:
        report.print_json(doc)
    else:
        console = report.stdout_console()
        console.print(report.results_table(f"rollout {record['id']}", results))
        console.print(Text.assemble(("OK" if ok else "FAILED", "green" if ok else "bold red"),
                                    f": {visible(line)} in {run.elapsed:.1f}s"),
                      highlight=False)
    if not ok:
        raise Exit(code=1)


def refuse_bad_release(inventory_path, artifact: api.ArtifactRef, force: bool) -> None:
    """Exit 2 when a rollout took this release back, unless `--force`."""
    try:
        why = rollout.bad_release_refusal(inventory_path, artifact)
    except badreleases.BadReleasesError as exc:
        raise Exit(f"error: {exc}", USAGE_ERROR) from None
    if why and not force:
        raise Exit(f"error: {why}", USAGE_ERROR)


def pick(inventory_path, rollout_id: str) -> dict:
    """The rollout to resume: `rollout_id`, else the newest unfinished one."""
    try:
        if rollout_id:
            return rollout.load(inventory_path, rollout_id)
    except rollout.RolloutError as exc:
        raise Exit(f"error: {exc}", USAGE_ERROR) from None
    pending = rollout.unfinished(inventory_path)
    if not pending:
        raise Exit(f"error: no rollout in progress for {inventory_path}; start one with "
                   f"`{inventory.command('deploy', [], inventory_path, '--waves', '1,25%,100%')}`",
                   USAGE_ERROR)
    return pending[0]


def artifact_of(record: dict) -> api.ArtifactRef:
    """The rollout's artifact, checked to be the very file it started with."""
    art = record["artifact"]
    take_back = rollout.next_steps(record)[1]
    try:
        ref = api.load_artifact(art["path"])
    except ValueError as exc:
        raise Exit(f"error: rollout {record['id']}: its artifact is gone or changed: {exc}; "
                   f"take the rollout back with `{take_back}`", USAGE_ERROR) from None
    if ref.sha256 != art["sha256"]:
        raise Exit(f"error: rollout {record['id']}: {art['path']} is no longer the artifact it "
                   f"started with (SHA-256 {ref.sha256[:12]}, not {art['sha256'][:12]}); take "
                   f"it back with `{take_back}`", USAGE_ERROR)
    return ref


def drive(action, view: View) -> dict:
    """Run `action()` (a rollout's run or take back), closing the view however it ends."""
    try:
        return action()
    except KeyboardInterrupt:  # while reading the hosts, before the record: nothing changed
        raise Exit("interrupted before the rollout started; nothing was changed",
                   INTERRUPTED) from None
    finally:
        view.close()


def status_lines(inventory_path, results: list[HostResult]) -> tuple[list[str], dict]:
    """What `invoke status` adds: rollouts in progress and releases rollouts took back (lines
    for people, and the same for `--json`)."""
    lines, doc = [], {"rollouts_in_progress": [], "bad_releases": {}}
    for record in rollout.unfinished(inventory_path):
        done = sum(1 for w in rollout.document(record)["rollout"]["waves"] if w["started"])
        doc["rollouts_in_progress"].append(
            {"id": record["id"], "state": record["state"],
             "release": record["artifact"]["release"], "waves_started": done,
             "waves": len(record["waves"]), "created": record.get("created")})
        finish, back = rollout.next_steps(record)
        lines.append(f"rollout {record['id']} {record['state']}: "
                     f"{record['artifact']['release']}, wave {done}/{len(record['waves'])} "
                     f"started; finish: {finish}; take back: {back}")
    try:
        bad = badreleases.load(inventory_path)
    except badreleases.BadReleasesError as exc:
        return [*lines, f"warning: {exc}"], doc
    running: dict[str, list[str]] = {}
    for res in results:
        name = (res.from_release or {}).get("release")
        if name in bad:
            running.setdefault(name, []).append(res.host)
    for name, entry in sorted(bad.items()):
        doc["bad_releases"][name] = dict(entry, running_on=running.get(name, []))
        where = (f"STILL RUNS on {', '.join(running[name])}" if name in running
                 else "runs on none of these hosts")
        lines.append(f"bad release {name}: taken back by rollout {entry.get('rollout')} "
                     f"({entry.get('time')}); {where}")
    return lines, doc


def hosts_of(record: dict) -> str:
    """The record's hosts as a `--hosts` selection."""
    return ",".join(record["hosts"])
