"""The activities of a Temporal rollout: what one site's worker does for it, with the in-process
rollout's own code (fleet.deploy.rollout), over the hosts of its own inventory.

Each activity gets a leg: the rollout's record cut down to its hosts (rolloutflow.leg_of). It
drives a `Leg`, a rollout.Rollout that never writes a record file (the workflow holds the
record), and returns the hosts' entries as the Rollout left them:

- `fleet.read`: each host's release before anything changes;
- `fleet.deploy`: one host's transaction (`Rollout._wave` on a wave of one host). A retry (a
  worker died, or the activity failed) enters it as a host a dead run had in flight: the host
  is read first (`_settle`: a lock our installer still holds is waited for; our own audit line
  that says it installed or failed is taken as the answer), so it never repeats a switch that
  may already have happened; and the installer itself reads the host before it switches. It
  heartbeats at every step and every few seconds between, so a worker that dies is noticed and
  its hosts go to another worker of the site;
- `fleet.watch`: one round of the bake's watch (`_watch_problem`);
- `fleet.take_back`: `Rollout._abort` over the leg (`_revert_plan`: each host read first);
- `fleet.final_read`: the failed hosts read again (`_final_read`).

The worker's owner name in the hosts' audit lines and locks is the rollout's (`run_owner`),
whichever worker runs it, so each worker recognises what another left.
"""

from __future__ import annotations

import asyncio
import contextvars
from pathlib import Path
from typing import Callable

from temporalio import activity
from temporalio.exceptions import ApplicationError

from fleet.deploy import api, rollout
from fleet.deploy.inventory import Host
from fleet.deploy.runner import RunOptions

BEAT_EVERY_S = 3.0
Resolver = Callable[[list[str]], list[Host]]  # host names -> the worker inventory's hosts


class Leg(rollout.Rollout):
    """A Rollout over the hosts of one site whose record lives in the workflow."""

    def save(self) -> None:
        """The workflow keeps the record: nothing to write here."""


class Beats(rollout.RolloutUI):
    """Each host step, heartbeated from the runner's threads through the activity's loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, context: contextvars.Context):
        self.loop = loop
        self.context = context
        self.last = ""

    def host(self, host: str, step: str, note: str) -> None:
        self.last = f"{host}: {step}"
        self.loop.call_soon_threadsafe(activity.heartbeat, self.last, context=self.context)


class Activities:
    """The activities of one worker, over the hosts of its inventory."""

    def __init__(self, inventory_path: Path, resolve: Resolver):
        self.inventory_path = inventory_path
        self.resolve = resolve

    def _leg(self, record: dict, ui: rollout.RolloutUI | None = None,
             with_artifact: bool = False) -> Leg:
        try:
            hosts = self.resolve(list(record["hosts"]))
        except ValueError as exc:
            raise _fatal(f"{self.inventory_path}: {exc}") from None
        artifact = _artifact(record) if with_artifact else None
        try:
            return Leg(self.inventory_path, record, hosts, artifact, ui, record["owner"])
        except rollout.RolloutError as exc:
            raise _fatal(str(exc)) from None

    async def _beating(self, work: Callable[[Beats], object]):
        """Run `work` on a thread, heartbeating its last step every BEAT_EVERY_S."""
        beats = Beats(asyncio.get_running_loop(), contextvars.copy_context())
        job = asyncio.ensure_future(asyncio.to_thread(work, beats))
        while True:
            done, _ = await asyncio.wait({job}, timeout=BEAT_EVERY_S)
            if done:
                return job.result()
            activity.heartbeat(beats.last)

    @activity.defn(name="fleet.read")
    async def read(self, record: dict) -> dict:
        """Each host's release before the rollout (rollout.Rollout.start's read)."""
        def work(beats: Beats) -> dict:
            leg = self._leg(record, beats)
            read = api.status(leg._hosts(list(record["hosts"])), beats.host,
                              RunOptions(parallel=int(record["options"]["parallel"])),
                              leg.tx_owner)
            return {r.host: {"ok": r.ok, "note": r.note,
                             "before": rollout._release_of(r.from_release) if r.ok else None}
                    for r in read}
        return await self._beating(work)

    @activity.defn(name="fleet.deploy")
    async def deploy(self, record: dict) -> dict:
        """One host's transaction, the host read first (see the module doc)."""
        index = next(i for i, wave in enumerate(record["waves"]) if wave)
        if activity.info().attempt > 1:  # an attempt before this one may have switched it
            for entry in record["hosts"].values():
                entry["outcome"] = rollout.DEPLOYING

        def work(beats: Beats) -> dict:
            leg = self._leg(record, beats, with_artifact=True)
            verdict = leg._wave(index)
            return {"hosts": leg.record["hosts"], "verdict": verdict}
        return await self._beating(work)

    @activity.defn(name="fleet.watch")
    async def watch(self, record: dict, names: list[str], baseline: dict) -> dict:
        """One round of the bake's watch: the hosts that are not healthy, and why."""
        def work(beats: Beats) -> dict:
            leg = self._leg(record, beats)
            read = api.status(leg._hosts(names), lambda *_: None, leg._options(), leg.tx_owner)
            problems = {}
            for res in read:
                problem = leg._watch_problem(res, baseline,
                                             int(record["options"]["max_hook_errors"]))
                if problem:
                    problems[res.host] = {"problem": problem,
                                          "now": rollout._release_of(res.from_release)}
            return {"problems": problems, "baseline": baseline}
        return await self._beating(work)

    @activity.defn(name="fleet.take_back")
    async def take_back(self, record: dict, reason: str) -> dict:
        """The leg's touched hosts back to their releases before; the release remembered as
        bad in this worker's inventory."""
        def work(beats: Beats) -> dict:
            leg = self._leg(record, beats)
            return leg._abort(reason)["hosts"]
        return await self._beating(work)

    @activity.defn(name="fleet.final_read")
    async def final_read(self, record: dict) -> dict:
        def work(beats: Beats) -> dict:
            leg = self._leg(record, beats)
            leg._final_read()
            return leg.record["hosts"]
        return await self._beating(work)

    def all(self) -> list:
        return [self.read, self.deploy, self.watch, self.take_back, self.final_read]


def _fatal(message: str) -> ApplicationError:
    """An error no retry can mend (a host not in this worker's inventory, the artifact missing
    or changed): the workflow hears it at once."""
    return ApplicationError(message, type="LegError", non_retryable=True)


def _artifact(record: dict) -> api.ArtifactRef:
    """The rollout's artifact, at the path it started from, checked byte for byte."""
    art = record["artifact"]
    try:
        ref = api.load_artifact(art["path"])
    except ValueError as exc:
        raise _fatal(f"the rollout's artifact is not here: {exc}; a worker needs it at "
                     f"{art['path']} (copy it there, same SHA-256)") from None
    if ref.sha256 != art["sha256"]:
        raise _fatal(f"{art['path']} is not the rollout's artifact (SHA-256 {ref.sha256[:12]}, "
                     f"not {art['sha256'][:12]})")
    return ref
