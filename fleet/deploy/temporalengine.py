"""The control side of the Temporal engine: start a rollout workflow, follow it, signal it, list
the ones in flight, and serve as a worker of a site.

A rollout started here outlives this process: the workflow (fleet.deploy.rolloutflow) runs on
the workers, so a killed `invoke deploy` leaves it going, and `invoke status` finds it again by
its query. Every call to the server has a timeout; following a rollout polls its query once a
second until it ends or the caller's deadline passes (the rollout goes on either way).
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import gc
import os
import socket
from datetime import timedelta
from pathlib import Path
from typing import Callable

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHistory
from temporalio.service import RPCError
from temporalio.worker import Replayer, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from fleet.deploy import rolloutflow, rolloutleg
from fleet.deploy.temporalserver import Server

CONNECT_TIMEOUT_S = 10.0
RPC_TIMEOUT = timedelta(seconds=10)
POLL_S = 1.0
LIST_LIMIT = 50
# fleet's modules are imported once, not again in each workflow's sandbox: the workflow module
# imports fleet.deploy's pure parts, whose package also loads the SSH stack (cryptography's
# native module cannot be imported twice). rolloutflow keeps its own code deterministic.
RUNNER = SandboxedWorkflowRunner(
    restrictions=SandboxRestrictions.default.with_passthrough_modules("fleet"))


class EngineError(RuntimeError):
    """The server cannot be reached, a site has no worker, no such rollout; the message says
    what to do."""


# One event loop and one client per server for the whole process: the SDK's native runtime
# calls back into the loop a client was made on, and clients left behind on closed loops make
# the interpreter abort at exit (SIGABRT in PyGILState_Release while finalizing).
_LOOP: asyncio.AbstractEventLoop | None = None
_CLIENTS: dict[Server, Client] = {}


async def _connect(server: Server) -> Client:
    if server in _CLIENTS:
        return _CLIENTS[server]
    try:
        client = await asyncio.wait_for(Client.connect(
            server.address, namespace=server.namespace,
            connect_timeout=timedelta(seconds=CONNECT_TIMEOUT_S)), CONNECT_TIMEOUT_S + 5)
    except (RuntimeError, OSError, asyncio.TimeoutError) as exc:
        raise EngineError(f"cannot reach the Temporal server at {server.address} "
                          f"(namespace {server.namespace}): {exc}") from None
    _CLIENTS[server] = client
    return client


def _run(coro):
    global _LOOP
    if _LOOP is None:
        _LOOP = asyncio.new_event_loop()
        atexit.register(_close)
    return _LOOP.run_until_complete(coro)


def _close() -> None:
    """Drop the clients and settle their native callbacks while the interpreter still runs
    (temporalio/sdk-python#300: a callback that lands during finalization aborts the process)."""
    _CLIENTS.clear()
    gc.collect()
    if _LOOP is not None and not _LOOP.is_closed():
        _LOOP.run_until_complete(asyncio.sleep(0.1))
        _LOOP.close()


async def _pollers(client: Client, queue: str, kind: int) -> int:
    answer = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(namespace=client.namespace, task_queue=TaskQueue(name=queue),
                                 task_queue_type=kind), timeout=RPC_TIMEOUT)
    return len(answer.pollers)


def unserved(server: Server, sites: list[str]) -> list[str]:
    """The queues among the workflows' and these sites' that no worker polls ("workflows"
    for the first), so a rollout is refused before it waits on nobody."""
    async def check() -> list[str]:
        client = await _connect(server)
        missing = []
        if not await _pollers(client, rolloutflow.WORKFLOW_QUEUE,
                              TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW):
            missing.append("workflows")
        for site in sorted(set(sites)):
            if not await _pollers(client, rolloutflow.site_queue(site),
                                  TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY):
                missing.append(site)
        return missing
    return _run(check())


def start(server: Server, doc: dict) -> None:
    """Start the rollout `doc` describes (rolloutflow.RolloutFlow.run's argument)."""
    async def go() -> None:
        client = await _connect(server)
        await client.start_workflow(rolloutflow.WORKFLOW, doc, id=doc["id"],
                                    task_queue=rolloutflow.WORKFLOW_QUEUE,
                                    memo={"inventory": doc["inventory"]},
                                    rpc_timeout=RPC_TIMEOUT)
    _run(go())


def follow(server: Server, rollout_id: str, seen: Callable[[dict], None],
           deadline_s: float) -> tuple[dict, bool]:
    """Poll the rollout's record until it ends or `deadline_s` passes, handing each new one to
    `seen`: (the last record, ended)."""
    async def go() -> tuple[dict, bool]:
        client = await _connect(server)
        handle = client.get_workflow_handle(rollout_id)
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline_s
        last: dict = {}
        while True:
            info = await handle.describe(rpc_timeout=RPC_TIMEOUT)
            if info.status != WorkflowExecutionStatus.RUNNING:
                if info.status == WorkflowExecutionStatus.COMPLETED:
                    last = await handle.result(rpc_timeout=RPC_TIMEOUT)
                    seen(last)
                    return last, True
                raise EngineError(f"rollout {rollout_id}: its workflow ended "
                                  f"{info.status.name.lower() if info.status else 'unknown'}; "
                                  "the Temporal Web UI shows why")
            try:
                record = await handle.query(rolloutflow.RolloutFlow.state,
                                            rpc_timeout=RPC_TIMEOUT)
            except RPCError:  # no worker answered in time: the next poll asks again
                record = last
            if record and record != last:
                last = record
                seen(record)
            if loop.time() > end:
                return last, False
            await asyncio.sleep(POLL_S)
    try:
        return _run(go())
    except RPCError as exc:
        raise EngineError(f"rollout {rollout_id}: {exc}") from None


def signal(server: Server, rollout_id: str, name: str, *args: str) -> bool:
    """Send `pause`, `resume` or `abort` to a rollout; False when it has ended already."""
    async def go() -> bool:
        client = await _connect(server)
        handle = client.get_workflow_handle(rollout_id)
        info = await handle.describe(rpc_timeout=RPC_TIMEOUT)
        if info.status != WorkflowExecutionStatus.RUNNING:
            return False
        await handle.signal(name, *args, rpc_timeout=RPC_TIMEOUT)
        return True
    try:
        return _run(go())
    except RPCError as exc:
        raise EngineError(f"rollout {rollout_id}: no such rollout on {server.address} "
                          f"({exc}); `fleet status` lists those in flight") from None


def in_flight(server: Server, inventory_path: str | Path) -> list[dict]:
    """Records of this inventory's rollouts whose workflows still run, newest first."""
    async def go() -> list[dict]:
        client = await _connect(server)
        out = []
        query = (f"WorkflowType = '{rolloutflow.WORKFLOW}' AND "
                 "ExecutionStatus = 'Running'")
        async for wf in client.list_workflows(query, limit=LIST_LIMIT,
                                              rpc_timeout=RPC_TIMEOUT):
            if await wf.memo_value("inventory", None) != str(inventory_path):
                continue  # another inventory's (its `fleet status` shows it)
            try:
                record = await client.get_workflow_handle(wf.id).query(
                    rolloutflow.RolloutFlow.state, rpc_timeout=RPC_TIMEOUT)
            except RPCError:
                record = {"id": wf.id, "state": "running", "inventory": str(inventory_path),
                          "note": "no worker answered its query within "
                                  f"{RPC_TIMEOUT.total_seconds():g}s"}
            if record:
                out.append(record)
        return sorted(out, key=lambda r: r.get("id", ""), reverse=True)
    return _run(go())


def history(server: Server, rollout_id: str) -> str:
    """The rollout's event history, as the JSON `temporal workflow show --output json` prints:
    what `replay` checks this code against."""
    async def go() -> str:
        client = await _connect(server)
        handle = client.get_workflow_handle(rollout_id)
        found = await handle.fetch_history(rpc_timeout=RPC_TIMEOUT)
        return found.to_json()
    try:
        return _run(go())
    except RPCError as exc:
        raise EngineError(f"rollout {rollout_id}: no history on {server.address} ({exc})") from None


def replay(history_json: str, rollout_id: str) -> None:
    """Run this version's workflow code over a recorded history, as a worker that takes over the
    rollout would. EngineError when the code would take another path than the one recorded: a
    change of that kind breaks the rollouts in flight, so it goes behind `workflow.patched`, or
    the workers are upgraded only once no rollout runs (docs/operations.md)."""
    recorded = WorkflowHistory.from_json(rollout_id, history_json)
    replayer = Replayer(workflows=[rolloutflow.RolloutFlow], workflow_runner=RUNNER)
    try:
        _run(replayer.replay_workflow(recorded))
    except Exception as exc:  # the SDK's nondeterminism and workflow-task failures alike
        raise EngineError(f"rollout {rollout_id} does not replay on this version of "
                          f"fleet: {type(exc).__name__}: {exc}") from None


def serve(server: Server, site: str, inventory_path: Path, resolve: rolloutleg.Resolver,
          ready: Callable[[], None], parallel: int = 32) -> None:
    """Be a worker of `site` until interrupted: rollouts' workflows (any worker runs them) and
    the activities of the site's hosts, up to `parallel` hosts at once."""
    activities = rolloutleg.Activities(inventory_path, resolve)
    identity = f"{os.getpid()}@{socket.gethostname()} site {site}"

    async def go() -> None:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=parallel))
        client = await _connect(server)
        flows = Worker(client, task_queue=rolloutflow.WORKFLOW_QUEUE,
                       workflows=[rolloutflow.RolloutFlow], workflow_runner=RUNNER,
                       identity=identity)
        hosts = Worker(client, task_queue=rolloutflow.site_queue(site),
                       activities=activities.all(), max_concurrent_activities=parallel,
                       identity=identity)
        async with flows, hosts:
            ready()
            await asyncio.Event().wait()  # until Ctrl-C or SIGTERM ends the process
    _run(go())
