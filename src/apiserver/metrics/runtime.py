"""Process-wide series every Kubernetes component exposes.

``kubernetes_build_info`` follows k8s.io/component-base ``metrics/version.go`` (a gauge of 1
whose labels are the ``/version`` fields). ``go_goroutines`` is what the Kubernetes
monitoring mixin's apiserver dashboard plots next to memory and CPU; a Python server has no
goroutines, so it reports its threads (the same set ``/debug/pprof/goroutine`` lists), and
``go_threads`` the same number. ``process_*`` come from prometheus-client's own
``ProcessCollector``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from apiserver.version import DEFAULT_GIT_VERSION, version_info

BUILD_INFO_LABELS = (
    "build_date",
    "compiler",
    "git_commit",
    "git_tree_state",
    "git_version",
    "go_version",
    "major",
    "minor",
    "platform",
)


class BuildInfoCollector(Collector):
    """``kubernetes_build_info``."""

    def __init__(self, git_version: str | None = None) -> None:
        info = version_info(git_version or DEFAULT_GIT_VERSION)
        self.values = [
            info.buildDate,
            info.compiler,
            info.gitCommit,
            info.gitTreeState,
            info.gitVersion,
            info.goVersion,
            info.major,
            info.minor,
            info.platform,
        ]

    def collect(self) -> Iterator[Any]:
        family = GaugeMetricFamily(
            "kubernetes_build_info",
            "A metric with a constant '1' value labeled by major, minor, git version, git "
            "commit, git tree state, build date, Go version, and compiler from which "
            "Kubernetes was built, and platform on which it is running.",
            labels=BUILD_INFO_LABELS,
        )
        family.add_metric(self.values, 1)
        yield family


class WorkerInfoCollector(Collector):
    """``apiserver_worker_info{worker, workers}``: which of the ``--workers`` processes
    answered this scrape (a constant 1, as multi-process exporters such as gunicorn's label
    each worker), so series from different scrapes of one port can be told apart."""

    def __init__(self, index: int, count: int) -> None:
        self.values = [str(index), str(count)]

    def collect(self) -> Iterator[Any]:
        family = GaugeMetricFamily(
            "apiserver_worker_info",
            "A metric with a constant '1' value labeled by the index of the worker process "
            "that answers and the number of worker processes (--workers).",
            labels=("worker", "workers"),
        )
        family.add_metric(self.values, 1)
        yield family


class ThreadsCollector(Collector):
    """``go_goroutines`` and ``go_threads``: the process's threads."""

    def __init__(self, enabled: Callable[[str], bool]) -> None:
        self.enabled = enabled

    def collect(self) -> Iterator[Any]:
        count = threading.active_count()
        for name, doc in (
            ("go_goroutines", "Number of goroutines that currently exist (here: threads)."),
            ("go_threads", "Number of OS threads created."),
        ):
            if self.enabled(name):
                yield GaugeMetricFamily(name, doc, value=count)
