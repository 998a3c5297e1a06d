"""``--workers=N``: N processes serve the one secure port; the process twistd started
supervises them.

kube-apiserver uses every core through Go's scheduler; one Python process uses one, so the
server runs several whole copies of itself. Each worker is an ordinary server (its own
reactor, handler chain, watch cache and store client) that binds ``--secure-port`` with
``SO_REUSEPORT``, so the kernel spreads new connections over them, as separate daemons
started with ``--permit-port-sharing`` on one etcd already could. With the embedded store
they share the one SQLite file (``apiserver.storage.sqlite``, "Several workers").

The supervisor (:class:`Supervisor`, the whole service tree of the parent) does, once,
before any worker starts, what must not be raced (``prepare``: the data directory, the
store's schema, the self-signed serving pair), then starts the workers, and:

* restarts a worker that exits, logging how it ended; a worker that dies within
  ``min_uptime`` seconds of its start waits ``backoff_base * 2**n`` seconds (at most
  ``backoff_max``) before the next try, so a crash loop does not spin; but when one dies
  that way ``start_attempts`` times in a row before any worker has lived ``min_uptime``
  seconds, the servers cannot start at all (the port taken, a store that refuses them):
  the supervisor stops the others and exits with status 1 (:attr:`Supervisor.failed`), as
  a lone server whose start-up fails does;
* on the first SIGTERM/SIGINT (:meth:`Supervisor.shutdown`) sends every worker
  :data:`GRACEFUL_SIGNAL`, which starts the worker's graceful shutdown (readyz fails, the
  shutdown delay, the drain; k8s.io/apiserver/pkg/server/genericapiserver.go), restarts
  nothing more, and stops the reactor when the last worker has exited, so twistd exits 0;
* on the second signal (:meth:`Supervisor.kill`) kills them at once.

The graceful signal is SIGUSR2 rather than SIGTERM so a worker that also receives the
SIGTERM itself (systemd's ``KillMode=control-group``, or Ctrl-C reaching the whole process
group) does not take the forwarded one for the second signal that exits at once.

A worker learns its place from :data:`WORKER_ENV` (``index/count/parent-pid``), set by the
parent: it is not a flag, so a worker runs exactly the parent's command line.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, cast

from twisted.application.service import Service
from twisted.internet.defer import Deferred, succeed
from twisted.internet.error import ProcessDone, ProcessTerminated
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.internet.protocol import ProcessProtocol
from twisted.logger import ILogObserver, Logger
from twisted.python.failure import Failure
from zope.interface import provider

from apiserver.service.workers_notify import NotifyRelay

__all__ = [
    "GRACEFUL_SIGNAL",
    "WORKER_ENV",
    "Supervisor",
    "die_with_parent",
    "process_spawner",
    "worker_from_environ",
    "worker_log_labeller",
    "worker_process_argv",
]

log = Logger()

#: ``index/count/parent-pid`` of a worker process; absent in the supervising process.
WORKER_ENV = "APISERVER_WORKER"
#: What the supervisor sends a worker to start its graceful shutdown.
GRACEFUL_SIGNAL = signal.SIGUSR2
#: twistd's entry point (``python -m twisted`` is ``twist``, which has other options).
_TWISTD = "from twisted.scripts.twistd import run; run()"
#: Environment the workers do not inherit: systemd talks to the supervising process only
#: (each worker gets a ``$NOTIFY_SOCKET`` of the supervisor's, ``workers_notify``).
_PARENT_ONLY = ("NOTIFY_SOCKET", "WATCHDOG_PID", "WATCHDOG_USEC", "LISTEN_FDS", "LISTEN_PID")


def worker_from_environ(environ: Mapping[str, str]) -> tuple[int, int, int] | None:
    """``(index, count, parent pid)`` when this process is a worker, else None."""
    raw = environ.get(WORKER_ENV)
    if not raw:
        return None
    parts = raw.split("/")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"${WORKER_ENV}: expected index/count/parent-pid, got {raw!r}")
    index, count, parent = (int(p) for p in parts)
    if not 0 <= index < count:
        raise ValueError(f"${WORKER_ENV}: worker index {index} is not below {count}")
    return index, count, parent


def worker_process_argv(plugin_argv: Sequence[str], twistd: Mapping[str, Any]) -> list[str]:
    """The command line of a worker: twistd in the foreground (no pid file, no daemon: the
    parent is the process the operator manages) with the parent's log and reactor choices
    and the plugin's arguments unchanged."""
    argv = [sys.executable, "-c", _TWISTD, "--nodaemon", "--pidfile="]
    for name in ("logfile", "logger", "reactor", "prefix"):
        value = twistd.get(name)
        if value:
            argv.append(f"--{name}={value}")
    if twistd.get("syslog"):
        argv.append("--syslog")
    elif not twistd.get("logfile") and twistd and not twistd.get("nodaemon"):
        # A daemonized twistd logs to twistd.log; its workers write there too.
        argv.append("--logfile=twistd.log")
    return [*argv, "apiserver", *plugin_argv]


class Spawner(Protocol):
    """Starts worker ``index`` with ``protocol`` and returns its process transport."""

    def __call__(self, index: int, protocol: ProcessProtocol) -> Any: ...


def process_spawner(
    reactor: Any,
    argv: Sequence[str],
    environ: Mapping[str, str],
    count: int,
    extra_env: Callable[[int], Mapping[str, str]] | None = None,
) -> Spawner:
    """A :class:`Spawner` running ``argv`` with the worker marker in the environment (and
    ``extra_env(index)``: the worker's own ``$NOTIFY_SOCKET``); the workers write to the
    supervisor's standard output and error."""
    base = {k: v for k, v in environ.items() if k not in _PARENT_ONLY}
    parent = os.getpid()

    def spawn(index: int, protocol: ProcessProtocol) -> Any:
        env = dict(base)
        if extra_env is not None:
            env.update(extra_env(index))
        env[WORKER_ENV] = f"{index}/{count}/{parent}"
        return reactor.spawnProcess(
            protocol, argv[0], list(argv), env=env, childFDs={0: 0, 1: 1, 2: 2}
        )

    return spawn


def die_with_parent(parent_pid: int) -> None:
    """Have the kernel send this worker SIGTERM when its supervisor dies (Linux
    ``PR_SET_PDEATHSIG``), so a killed supervisor leaves no worker serving on its own."""
    name = ctypes.util.find_library("c")
    if name is not None:
        try:
            ctypes.CDLL(name, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent_pid:
        # The supervisor died before the request took effect.
        os.kill(os.getpid(), signal.SIGTERM)


def worker_log_labeller(index: int) -> ILogObserver:
    """A log observer, added before twistd's own, that names the worker in each event's
    system (``[worker-1 apiserver.server#info]``), since every worker writes to the same
    log as the supervisor."""
    label = f"worker-{index}"

    @provider(ILogObserver)
    def observe(event: dict[str, Any]) -> None:
        system = event.get("log_system")
        if system is None:
            level = event.get("log_level")
            name = getattr(level, "name", "-")
            system = f"{event.get('log_namespace', '-')}#{name}"
        if not str(system).startswith(label):
            event["log_system"] = f"{label} {system}"

    return cast(ILogObserver, observe)


class _Worker(ProcessProtocol):
    """One incarnation of worker ``index``."""

    def __init__(self, supervisor: Supervisor, index: int) -> None:
        self.supervisor = supervisor
        self.index = index

    def processEnded(self, reason: Failure) -> None:
        self.supervisor._ended(self, reason)


def _how(reason: Failure) -> str:
    value = reason.value
    if isinstance(value, ProcessDone):
        return "with status 0"
    if isinstance(value, ProcessTerminated):
        if value.signal is not None:
            try:
                return f"on signal {signal.Signals(value.signal).name}"
            except ValueError:
                return f"on signal {value.signal}"
        return f"with status {value.exitCode}"
    return str(value)


class Supervisor(Service):
    """Starts ``count`` workers through ``spawn`` and keeps them running (module docstring).

    ``clock`` times restarts (a test passes a ``Clock``); ``prepare`` runs once when the
    service starts, before the first worker; ``on_stopped`` runs when every worker has
    exited after :meth:`shutdown` (the real one stops the reactor).
    """

    name = "workers"

    def __init__(
        self,
        count: int,
        spawn: Spawner,
        clock: IReactorTime,
        *,
        prepare: Callable[[], None] | None = None,
        on_stopped: Callable[[], None] | None = None,
        relay: NotifyRelay | None = None,
        min_uptime: float = 10.0,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        start_attempts: int = 5,
    ) -> None:
        self.count = count
        self._spawn_fn = spawn
        self._clock = clock
        self._prepare = prepare
        self._on_stopped = on_stopped
        #: systemd's notifications on behalf of the workers (``$NOTIFY_SOCKET`` set).
        self.relay = relay
        self.min_uptime = min_uptime
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        #: The running process transport of each worker index.
        self.processes: dict[int, Any] = {}
        self._protocols: dict[int, _Worker] = {}
        self._started_at: dict[int, float] = {}
        self._pids: dict[int, int | None] = {}
        self._quick_deaths: dict[int, int] = {}
        self._restarts: dict[int, IDelayedCall] = {}
        #: A worker that dies within ``min_uptime`` this many times in a row before any
        #: worker has lived ``min_uptime`` means the servers cannot start (the port taken, the
        #: store unreachable): the supervisor then stops, with :attr:`failed` set, as a lone
        #: server whose start-up fails exits.
        self.start_attempts = start_attempts
        #: True once a worker has run ``min_uptime`` seconds.
        self.ever_up = False
        self.failed = False
        self._up_checks: dict[int, IDelayedCall] = {}
        #: Restarts made so far (all workers).
        self.restarted = 0
        self.stopping = False
        self._stopped: Deferred[None] | None = None

    # -- service ------------------------------------------------------------------------------

    def startService(self) -> None:
        super().startService()
        if self._prepare is not None:
            self._prepare()
        if self.relay is not None:
            self.relay.start()
        log.info("starting {count} worker processes", count=self.count)
        for index in range(self.count):
            self._spawn(index)

    def stopService(self) -> Deferred[None]:
        super().stopService()
        self.shutdown()
        return self._wait_stopped()

    # -- signals ------------------------------------------------------------------------------

    def shutdown(self, signum: int | None = None) -> None:
        """Start the graceful shutdown of every worker (the first SIGTERM/SIGINT)."""
        if self.stopping:
            return
        self.stopping = True
        if self.relay is not None:
            self.relay.stopping()
        if signum is not None:
            log.info(
                "received signal {sig}: graceful shutdown of {n} workers",
                sig=signum,
                n=len(self.processes),
            )
        for calls in (self._restarts, self._up_checks):
            for call in calls.values():
                if call.active():
                    call.cancel()
            calls.clear()
        for process in list(self.processes.values()):
            self._signal(process, int(GRACEFUL_SIGNAL))
        self._check_all_stopped()

    def kill(self) -> None:
        """Kill every worker at once (the second signal). Safe in a signal handler."""
        self.stopping = True
        for process in list(self.processes.values()):
            self._signal(process, int(signal.SIGKILL))

    def pids(self) -> list[int]:
        return [p.pid for p in self.processes.values() if getattr(p, "pid", None)]

    # -- internals ----------------------------------------------------------------------------

    def _signal(self, process: Any, signum: int) -> None:
        try:
            process.signalProcess(signum)
        except Exception:  # ProcessExitedAlready: its processEnded follows
            pass

    def _spawn(self, index: int) -> None:
        self._restarts.pop(index, None)
        protocol = _Worker(self, index)
        self._protocols[index] = protocol
        self._started_at[index] = self._clock.seconds()
        process = self._spawn_fn(index, protocol)
        self.processes[index] = process
        self._pids[index] = getattr(process, "pid", None)
        if not self.ever_up:
            self._up_checks[index] = self._clock.callLater(
                self.min_uptime, self._still_up, index, protocol
            )

    def _still_up(self, index: int, protocol: _Worker) -> None:
        self._up_checks.pop(index, None)
        if self._protocols.get(index) is protocol:
            self.ever_up = True

    def _ended(self, protocol: _Worker, reason: Failure) -> None:
        index = protocol.index
        if self._protocols.get(index) is not protocol:
            return
        del self._protocols[index]
        self.processes.pop(index, None)
        if self.relay is not None:
            self.relay.worker_ended(index)
        pid = self._pids.get(index)
        if self.stopping:
            log.info(
                "worker {index} (pid {pid}) exited {how}", index=index, pid=pid, how=_how(reason)
            )
            self._check_all_stopped()
            return
        uptime = self._clock.seconds() - self._started_at.get(index, 0.0)
        if uptime >= self.min_uptime:
            self._quick_deaths[index] = 0
        else:
            check = self._up_checks.pop(index, None)
            if check is not None and check.active():
                check.cancel()
        quick = self._quick_deaths.get(index, 0)
        if not self.ever_up and quick + 1 >= self.start_attempts:
            log.critical(
                "worker {index} (pid {pid}) exited {how} at start-up {n} times in a row and "
                "no worker has started: stopping",
                index=index,
                pid=pid,
                how=_how(reason),
                n=quick + 1,
            )
            self.failed = True
            self.shutdown()
            return
        delay = 0.0 if quick == 0 else min(self.backoff_max, self.backoff_base * 2 ** (quick - 1))
        self._quick_deaths[index] = quick + 1
        log.error(
            "worker {index} (pid {pid}) exited {how} after {uptime:.1f}s; restarting it in "
            "{delay:.1f}s",
            index=index,
            pid=pid,
            how=_how(reason),
            uptime=uptime,
            delay=delay,
        )
        self.restarted += 1
        self._restarts[index] = self._clock.callLater(delay, self._spawn, index)

    def _wait_stopped(self) -> Deferred[None]:
        if not self.processes:
            return succeed(None)
        if self._stopped is None:
            self._stopped = Deferred()
        d: Deferred[None] = Deferred()

        def fire(result: object) -> object:
            d.callback(None)
            return result

        self._stopped.addBoth(fire)
        return d

    def _check_all_stopped(self) -> None:
        if self.processes:
            return
        if self.relay is not None:
            self.relay.stop()
            self.relay = None
        if self._stopped is not None and not self._stopped.called:
            self._stopped.callback(None)
        if self._on_stopped is not None:
            on_stopped, self._on_stopped = self._on_stopped, None
            on_stopped()
