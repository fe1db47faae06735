"""A progressive rollout as a Temporal workflow: `deploy --engine temporal`.

The same rollout as fleet.deploy.rollout (waves, one failure budget, a bake between waves, an
abort that takes every changed host back, the same record), with every decision here and every
I/O in activities (fleet.deploy.rolloutleg: a host's transaction, status reads, the take back),
so Temporal can replay this code after any process dies and reach the same decisions. The record
is this workflow's state: the `record` query returns it (what `invoke status` shows), signals
`pause`, `resume` and `abort` steer it. Each host's activity goes to its site's task queue
(`fleet-site-<site>`, inventory var `site`), served by `invoke worker --queue <site>` inside
that network; the workflow itself runs on any worker (`fleet-rollouts`).

Pause and abort take effect between waves and cut a bake short (a wave's hosts in flight
finish their transactions first, as with Ctrl-C in the in-process engine); a bake cut short by
a pause is done again, in full, on resume.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from fleet.deploy import rollout, waves

WORKFLOW = "fleet-rollout"
WORKFLOW_QUEUE = "fleet-rollouts"
PAUSE_LIMIT_S = 7 * 24 * 3600.0  # a paused rollout waits this long for `resume`, then ends
HEARTBEAT_S = 15.0  # a worker silent this long is taken for dead: its host goes to another
HOST_LIMIT_S = 3 * 3600.0  # one host's transaction, however long its timeouts
READ_LIMIT_S = 1800.0
RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
                    maximum_interval=timedelta(seconds=20), maximum_attempts=5,
                    non_retryable_error_types=["RolloutError", "LegError"])


def site_queue(site: str) -> str:
    """The task queue of a site's workers."""
    return f"fleet-site-{site}"


def leg_of(record: dict, names: list[str], index: int | None = None) -> dict:
    """The part of the record an activity works on: these hosts only; with `index`, a record
    whose wave `index` holds just them (the activity deploys that wave)."""
    leg = dict(record, hosts={n: dict(record["hosts"][n]) for n in names}, events=[],
               budget={"max_fail": None, "tolerated": None})
    if index is not None:
        leg["waves"] = [list(names) if i == index else [] for i in range(len(record["waves"]))]
    return leg


@workflow.defn(name=WORKFLOW)
class RolloutFlow:
    """One rollout; its id is the workflow's."""

    def __init__(self) -> None:
        self.record: dict = {}
        self.paused = False
        self.abort_reason = ""

    # --- what operators see and steer ---------------------------------------------------

    @workflow.query
    def state(self) -> dict:
        return self.record

    @workflow.signal
    def pause(self) -> None:
        self.paused = True

    @workflow.signal
    def resume(self) -> None:
        self.paused = False

    @workflow.signal
    def abort(self, reason: str) -> None:
        self.abort_reason = reason or "aborted by the operator"

    # --- the record -----------------------------------------------------------------------

    def _now(self) -> str:
        return workflow.now().strftime("%Y-%m-%dT%H:%M:%SZ")

    def _event(self, what: str) -> None:
        self.record["updated"] = self._now()
        self.record["events"].append({"time": self._now(), "what": what[:500]})

    def _failures(self) -> int:
        return sum(1 for h in self.record["hosts"].values() if h.get("counted"))

    def _spent(self) -> bool:
        return waves.spent(self._failures(), self.record["budget"]["tolerated"])

    def _by_site(self, names: list[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for name in names:
            out.setdefault(self.record["hosts"][name]["site"], []).append(name)
        return out

    def _merge(self, hosts: dict) -> None:
        for name, entry in hosts.items():
            site = self.record["hosts"][name]["site"]
            self.record["hosts"][name] = dict(entry, site=site)

    async def _act(self, name: str, site: str, *args, limit: float = READ_LIMIT_S):
        return await workflow.execute_activity(
            name, args=list(args), task_queue=site_queue(site),
            start_to_close_timeout=timedelta(seconds=limit),
            heartbeat_timeout=timedelta(seconds=HEARTBEAT_S), retry_policy=RETRY)

    # --- the run --------------------------------------------------------------------------

    @workflow.run
    async def run(self, start: dict) -> dict:
        """`start`: id, owner, inventory, artifact, options, hosts ([name, site] in order)."""
        names = [n for n, _ in start["hosts"]]
        opts = start["options"]
        plan = waves.plan(names, opts["waves"])
        wave_of = {n: i for i, wave in enumerate(plan) for n in wave}
        self.record = {
            "schema": rollout.SCHEMA, "id": start["id"], "engine": "temporal",
            "state": rollout.RUNNING, "created": self._now(), "owner": start["owner"],
            "inventory": start["inventory"], "artifact": start["artifact"], "options": opts,
            "budget": {"max_fail": opts["max_fail"],
                       "tolerated": waves.budget(opts["max_fail"], len(names))},
            "waves": plan, "next_wave": 0, "baked": -1, "reason": "", "events": [],
            "hosts": {n: {"wave": wave_of[n], "site": s, "before": None, "now": None,
                          "read": False, "outcome": rollout.PENDING, "note": ""}
                      for n, s in start["hosts"]}}
        await self._read_all(names)
        self._event(f"planned {len(plan)} wave(s) of {', '.join(str(len(w)) for w in plan)}")
        while self.record["next_wave"] < len(plan):
            index = self.record["next_wave"]
            if self.abort_reason:
                return await self._abort(self.abort_reason)
            if self.paused:
                if not await self._paused("paused by the operator"):
                    return self.record
                continue
            if index and self.record["baked"] < index - 1 and opts["bake_s"] > 0:
                baked = await self._bake(index - 1)
                if self._spent():
                    return await self._abort(self._spent_reason())
                if baked:
                    self.record["baked"] = index - 1
                continue  # paused or aborted meanwhile? (a bake cut short is done again)
            verdict = await self._wave(index)
            if self._spent():
                return await self._abort(self._spent_reason())
            if verdict == "refused":
                if not await self._paused("another run holds some of this wave's hosts (see "
                                          "their notes); nothing was changed on them"):
                    return self.record
                continue
            self.record["next_wave"] = index + 1
        if self.abort_reason:  # sent while the last wave ran: taken back all the same
            return await self._abort(self.abort_reason)
        await self._final_read()
        self.record["state"] = rollout.COMPLETED
        self._event("completed")
        return self.record

    async def _paused(self, why: str) -> bool:
        """Wait for `resume` (or `abort`); False when the pause outlived PAUSE_LIMIT_S."""
        self.paused = True
        self.record["state"], self.record["reason"] = rollout.PAUSED, why
        self._event(why)
        try:
            await workflow.wait_condition(lambda: not self.paused or bool(self.abort_reason),
                                          timeout=PAUSE_LIMIT_S)
        except asyncio.TimeoutError:
            self._event(f"no resume within {PAUSE_LIMIT_S / 86400:g} days: ended paused")
            return False
        self.paused = False
        if not self.abort_reason:
            self.record["state"], self.record["reason"] = rollout.RUNNING, ""
            self._event("resumed")
        return True

    async def _read_all(self, names: list[str]) -> None:
        """Every host read once, before anything changes: the release to return it to."""
        sites = self._by_site(names)
        answers = await asyncio.gather(*(self._act("fleet.read", site, leg_of(
            self.record, hosts)) for site, hosts in sites.items()))
        for answer in answers:
            for name, read in answer.items():
                entry = self.record["hosts"][name]
                entry.update(before=read["before"], now=read["before"], read=read["ok"],
                             note="" if read["ok"] else f"not read at the start: {read['note']}")

    async def _wave(self, index: int) -> str:
        """Each host of the wave its own activity, at most `parallel` at once; a host not
        started once the budget is spent stays pending (the abort marks it not started)."""
        hosts = self.record["hosts"]
        names = [n for n in self.record["waves"][index]
                 if hosts[n]["outcome"] in (rollout.PENDING, rollout.DEPLOYING)]
        self._event(f"wave {index + 1}: {len(names)} host(s)")
        gate = asyncio.Semaphore(max(1, int(self.record["options"]["parallel"])))
        verdicts: list[str] = []

        async def one(name: str) -> None:
            async with gate:
                if self._spent():
                    return
                hosts[name]["outcome"] = rollout.DEPLOYING
                try:
                    answer = await self._act("fleet.deploy", hosts[name]["site"],
                                             leg_of(self.record, [name], index),
                                             limit=HOST_LIMIT_S)
                except ActivityError as exc:  # no worker could finish it: where it stands is
                    # not known, so it is counted and the take back reads it first
                    entry = hosts[name]
                    entry.update(outcome=rollout.FAILED, now=None, counted=True,
                                 failure=f"no worker finished its transaction: {exc.cause or exc}",
                                 note=f"no worker finished its transaction: {exc.cause or exc}")
                    return
                self._merge(answer["hosts"])
                verdicts.append(answer["verdict"])

        await asyncio.gather(*(one(n) for n in names))
        failed = [n for n in names if hosts[n].get("counted")]
        self._event(f"wave {index + 1} done: {len(names) - len(failed)} ok"
                    + (f", failed: {', '.join(failed)}" if failed else ""))
        return "refused" if "refused" in verdicts else "done"

    async def _bake(self, index: int) -> bool:
        """Watch every host changed so far for `bake_s` (rollout.Rollout._bake, its timer
        here, its reads in activities); False when a pause or an abort cut it short."""
        opts = self.record["options"]
        watched = [n for n, h in self.record["hosts"].items() if h["outcome"] == rollout.DEPLOYED]
        self._event(f"bake after wave {index + 1}: {opts['bake_s']:g}s, {len(watched)} host(s)")
        self.record["baking"] = {"wave": index + 1, "until": ""}
        baseline: dict[str, dict] = {}
        schedule = rollout.BakeSchedule.starting(workflow.time(), float(opts["bake_s"]),
                                                 float(opts["watch_every_s"]))
        self.record["baking"]["until"] = (workflow.now() + timedelta(
            seconds=float(opts["bake_s"]))).strftime("%Y-%m-%dT%H:%M:%SZ")
        while watched:
            wait = schedule.wait(workflow.time())
            if wait is None:
                break
            if wait:
                try:  # a timer a pause or an abort cuts short
                    await workflow.wait_condition(lambda: bool(self.abort_reason) or self.paused,
                                                  timeout=max(0.1, wait))
                    self.record.pop("baking", None)
                    return False
                except asyncio.TimeoutError:
                    pass
            sites = self._by_site(watched)
            answers = await asyncio.gather(*(self._act(
                "fleet.watch", site, leg_of(self.record, names), names,
                baseline.get(site, {})) for site, names in sites.items()))
            for site, answer in zip(sites, answers):
                baseline[site] = answer["baseline"]
                for name, seen in answer["problems"].items():
                    entry = self.record["hosts"][name]
                    entry.update(outcome=rollout.BAKE_FAILED, now=seen["now"], counted=True,
                                 note=f"during the bake: {seen['problem']}"[:2000],
                                 failure=f"during the bake: {seen['problem']}")
                    watched.remove(name)
            if self._spent():
                break
        self.record.pop("baking", None)
        return True

    def _spent_reason(self) -> str:
        failed = [n for n, h in self.record["hosts"].items() if h.get("counted")]
        return (f"failure budget spent: {len(failed)} host(s) failed ({', '.join(failed)}), "
                f"more than the {self.record['budget']['tolerated']} tolerated "
                f"(--max-fail {self.record['budget']['max_fail']})")

    async def _abort(self, reason: str) -> dict:
        """Every host the rollout touched back to its release before, per site, each read
        first (rollout.Rollout._abort and its `_revert_plan`, in the activities)."""
        rec = self.record
        rec["state"], rec["reason"] = rollout.ABORTING, reason
        self._event(f"aborting: {reason}")
        for entry in rec["hosts"].values():
            if entry["outcome"] == rollout.PENDING:
                entry.update(outcome=rollout.NOT_STARTED, note="its wave never started")
        touched = [n for n, h in rec["hosts"].items() if h["outcome"] in rollout.TOUCHED]
        sites = self._by_site(touched)
        if not sites:  # nothing changed anywhere; still remembered as bad, by one worker
            first = next(iter(rec["hosts"].values()))["site"]
            sites = {first: []}
        answers = await asyncio.gather(*(self._act(
            "fleet.take_back", site, leg_of(rec, names), reason, limit=HOST_LIMIT_S)
            for site, names in sites.items()), return_exceptions=True)
        for (site, names), answer in zip(sites.items(), answers):
            if isinstance(answer, BaseException):
                for name in names:
                    rec["hosts"][name].update(outcome=rollout.REVERT_FAILED, now=None,
                                              note=f"no worker of site {site} took it back: "
                                                   f"{getattr(answer, 'cause', None) or answer}")
            else:
                self._merge(answer)
        failed = [n for n in touched if rec["hosts"][n]["outcome"] == rollout.REVERT_FAILED]
        rec["state"] = rollout.ABORTING if failed else rollout.ABORTED
        self._event("abort incomplete: could not take back " + ", ".join(failed) if failed
                    else "aborted")
        return rec

    async def _final_read(self) -> None:
        """The failed hosts read again before the record is final (rollout's `_final_read`)."""
        failed = [n for n, h in self.record["hosts"].items()
                  if h["outcome"] in (rollout.FAILED, rollout.BAKE_FAILED)]
        for site, names in self._by_site(failed).items():
            self._merge(await self._act("fleet.final_read", site, leg_of(self.record, names),
                                        limit=HOST_LIMIT_S))
