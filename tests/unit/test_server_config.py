"""The pure configuration helpers of ``apiserver.server``: which servers store events
(``--etcd-servers`` and ``--etcd-servers-overrides``, k8s.io/apiserver pkg/server/options/
etcd.go), whether the watch cache is on (``--watch-cache``, ``--watch-cache-sizes``), the HSTS
header (pkg/server/options/serving.go), which backend ``make_store`` builds, and the default
host names. Nothing here starts a store or touches the network."""

from __future__ import annotations

from pathlib import Path

import pytest
from twisted.internet.task import Clock
from twisted.internet.testing import MemoryReactorClock

from apiserver.options import ServerConfig, parse_args
from apiserver.server import (
    events_servers,
    hsts_value,
    make_cacher,
    make_store,
    watch_cache_enabled,
)
from apiserver.service.serving import default_host
from apiserver.storage.memory import MemoryStore


def config(*argv: str) -> ServerConfig:
    return parse_args(list(argv))


# --- --etcd-servers and --etcd-servers-overrides -------------------------------------------


def test_no_servers_means_the_embedded_store() -> None:
    assert events_servers(config()) == []


def test_servers_in_order() -> None:
    assert events_servers(config("--etcd-servers=http://a:2379,http://b:2379")) == [
        "http://a:2379",
        "http://b:2379",
    ]


@pytest.mark.parametrize("resource", ["/events", "events.k8s.io/events"])
def test_an_override_for_events_wins(resource: str) -> None:
    chosen = events_servers(
        config(
            "--etcd-servers=http://a:2379",
            f"--etcd-servers-overrides={resource}#http://e:1;http://f:2",
        )
    )
    assert chosen == ["http://e:1", "http://f:2"]


def test_overrides_for_other_resources_are_ignored() -> None:
    chosen = events_servers(
        config(
            "--etcd-servers=http://a:2379",
            "--etcd-servers-overrides=coordination.k8s.io/leases#http://l:3,/pods#http://p:4",
        )
    )
    assert chosen == ["http://a:2379"]


def test_an_override_alone_selects_etcd_for_events() -> None:
    assert events_servers(config("--etcd-servers-overrides=/events#http://e:1")) == ["http://e:1"]


# --- --watch-cache and --watch-cache-sizes ------------------------------------------------


def test_watch_cache_is_on_by_default() -> None:
    assert watch_cache_enabled(config())


def test_watch_cache_flag_turns_it_off() -> None:
    assert not watch_cache_enabled(config("--watch-cache=false"))


@pytest.mark.parametrize(
    ("sizes", "enabled"),
    [
        ("events#0", False),
        ("events.events.k8s.io#0", False),
        ("events#100", True),
        ("pods#0", True),
        ("pods#0,events#0", False),
    ],
)
def test_a_zero_size_for_events_turns_it_off(sizes: str, enabled: bool) -> None:
    assert watch_cache_enabled(config(f"--watch-cache-sizes={sizes}")) is enabled


def test_make_cacher_follows_the_flags() -> None:
    clock = Clock()
    store = MemoryStore(clock)
    assert make_cacher(config("--watch-cache=false"), store, clock) is None
    cacher = make_cacher(config("--etcd-prefix=/custom/"), store, clock)
    assert cacher is not None
    assert cacher.prefixes == (b"/custom/events/",)


# --- HSTS -----------------------------------------------------------------------------------


def test_hsts_value() -> None:
    assert hsts_value([]) is None
    assert hsts_value(["max-age=31536000"]) == "max-age=31536000"
    assert hsts_value(["max-age=1", "includeSubDomains", "preload"]) == (
        "max-age=1; includeSubDomains; preload"
    )
    directives = config("--strict-transport-security-directives=max-age=1,includeSubDomains")
    assert hsts_value(list(directives.strict_transport_security_directives)) == (
        "max-age=1; includeSubDomains"
    )


# --- make_store -----------------------------------------------------------------------------


def test_make_store_is_sqlite_in_the_data_dir(tmp_path: Path) -> None:
    from apiserver.storage.sqlite import SqliteStore

    data_dir = tmp_path / "data" / "nested"
    store = make_store(config(f"--data-dir={data_dir}"), MemoryReactorClock())
    assert store.kind == "sqlite"
    assert isinstance(store, SqliteStore)
    # Building has no side effects: the store service makes the directory at start.
    assert not data_dir.exists()


def test_make_store_is_etcd_when_servers_are_given(tmp_path: Path) -> None:
    from apiserver.storage.etcd3 import Etcd3Store

    argv = [
        f"--data-dir={tmp_path / 'unused'}",
        "--etcd-servers=http://127.0.0.1:2379,http://127.0.0.2:2379",
    ]
    store = make_store(config(*argv), MemoryReactorClock())
    assert store.kind == "etcd"
    assert isinstance(store, Etcd3Store)
    assert store.endpoints == ["http://127.0.0.1:2379", "http://127.0.0.2:2379"]
    assert not (tmp_path / "unused").exists()


def test_make_store_follows_an_events_override(tmp_path: Path) -> None:
    from apiserver.storage.etcd3 import Etcd3Store

    argv = [f"--data-dir={tmp_path}", "--etcd-servers-overrides=/events#http://127.0.0.9:2379"]
    store = make_store(config(*argv), MemoryReactorClock())
    assert store.kind == "etcd"
    assert isinstance(store, Etcd3Store)
    assert store.endpoints == ["http://127.0.0.9:2379"]


# --- default host ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bind", "host"),
    [("", "127.0.0.1"), ("0.0.0.0", "127.0.0.1"), ("::", "127.0.0.1"), ("10.0.0.5", "10.0.0.5")],
)
def test_default_host(bind: str, host: str) -> None:
    assert default_host(bind) == host
