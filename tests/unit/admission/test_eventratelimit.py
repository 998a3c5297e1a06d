"""EventRateLimit (k8s.io/kubernetes plugin/pkg/admission/eventratelimit) on a fake clock."""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet.task import Clock

from apiserver.admission import CREATE, DELETE, UPDATE, Attributes, Operation
from apiserver.admission.plugins.eventratelimit import (
    ConfigError,
    EventRateLimit,
    parse_configuration,
)
from apiserver.admission.ratelimit import LRUCache, TokenBucket
from apiserver.apimachinery import errors
from apiserver.auth.interface import UserInfo

CORE = ("", "v1")
EVENTS = ("events.k8s.io", "v1")


def config(*limits: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "eventratelimit.admission.k8s.io/v1alpha1",
        "kind": "Configuration",
        "limits": list(limits),
    }


def event_attrs(
    group_version: tuple[str, str] = CORE,
    *,
    operation: Operation = CREATE,
    namespace: str = "default",
    user: str | None = "alice",
    component: str = "kubelet",
    involved: str = "pod-a",
    dry_run: bool = False,
    kind: str = "Event",
) -> Attributes:
    obj = {
        "metadata": {"name": "e", "namespace": namespace},
        "source": {"component": component, "host": "node1"},
        "involvedObject": {
            "kind": "Pod",
            "namespace": namespace,
            "name": involved,
            "uid": "u1",
            "apiVersion": "v1",
        },
    }
    return Attributes(
        operation,
        group_version[0],
        group_version[1],
        "events",
        kind,
        namespace,
        "e",
        obj,
        dry_run=dry_run,
        user=UserInfo(user) if user is not None else None,
    )


def refusal(plugin: EventRateLimit, attributes: Attributes) -> errors.StatusError | None:
    try:
        plugin.validate(attributes)
    except errors.StatusError as error:
        return error
    return None


# --- token bucket and LRU cache ------------------------------------------------------------


def test_token_bucket_starts_full_and_refills_at_qps_up_to_burst() -> None:
    clock = Clock()
    bucket = TokenBucket(2.0, 3, clock)
    assert [bucket.try_accept() for _ in range(4)] == [True, True, True, False]
    clock.advance(0.5)  # one token back at 2 qps
    assert bucket.try_accept()
    assert not bucket.try_accept()
    clock.advance(100)  # never more than burst
    assert [bucket.try_accept() for _ in range(4)] == [True, True, True, False]


def test_token_bucket_fractional_refill_accumulates() -> None:
    clock = Clock()
    bucket = TokenBucket(1.0, 1, clock)
    assert bucket.try_accept()
    clock.advance(0.4)
    assert not bucket.try_accept()
    clock.advance(0.6)
    assert bucket.try_accept()


def test_lru_cache_evicts_least_recently_used() -> None:
    made: list[int] = []

    def factory() -> int:
        made.append(len(made))
        return made[-1]

    cache: LRUCache[int] = LRUCache(2, factory)
    assert cache.get("a") == 0
    assert cache.get("b") == 1
    assert cache.get("a") == 0  # "a" is now the most recent
    assert cache.get("c") == 2  # evicts "b"
    assert "b" not in cache and "a" in cache and len(cache) == 2
    assert cache.get("b") == 3  # comes back new


def test_lru_cache_size_must_be_positive() -> None:
    with pytest.raises(ValueError):
        LRUCache(0, int)


# --- the plugin ---------------------------------------------------------------------------


def test_server_limit_charges_every_core_event_and_refills() -> None:
    clock = Clock()
    plugin = EventRateLimit.from_config(config({"type": "Server", "qps": 1, "burst": 2}), clock)
    assert refusal(plugin, event_attrs(namespace="a")) is None
    assert refusal(plugin, event_attrs(namespace="b", user="bob")) is None
    error = refusal(plugin, event_attrs())
    assert error is not None
    assert (error.code, error.reason, error.details) == (429, "TooManyRequests", None)
    assert error.message == (
        "Too many requests: Too many requests: limit reached on type Server for key "
    )
    clock.advance(1)
    assert refusal(plugin, event_attrs()) is None


def test_namespace_limit_keys_by_namespace() -> None:
    plugin = EventRateLimit.from_config(
        config({"type": "Namespace", "qps": 1, "burst": 1}), Clock()
    )
    assert refusal(plugin, event_attrs(namespace="a")) is None
    assert refusal(plugin, event_attrs(namespace="b")) is None
    error = refusal(plugin, event_attrs(namespace="a"))
    assert error is not None
    assert error.message.endswith("limit reached on type Namespace for key a")


def test_user_limit_keys_by_user_name() -> None:
    plugin = EventRateLimit.from_config(config({"type": "User", "qps": 1, "burst": 1}), Clock())
    assert refusal(plugin, event_attrs(user="alice")) is None
    assert refusal(plugin, event_attrs(user="bob")) is None
    error = refusal(plugin, event_attrs(user="alice", namespace="other"))
    assert error is not None
    assert error.message.endswith("limit reached on type User for key alice")
    # No user: the empty key.
    assert refusal(plugin, event_attrs(user=None)) is None
    error = refusal(plugin, event_attrs(user=None))
    assert error is not None and error.message.endswith("for key ")


def test_source_and_object_limit_keys_by_source_and_involved_object() -> None:
    plugin = EventRateLimit.from_config(
        config({"type": "SourceAndObject", "qps": 1, "burst": 1}), Clock()
    )
    assert refusal(plugin, event_attrs(involved="pod-a")) is None
    assert refusal(plugin, event_attrs(involved="pod-b")) is None
    assert refusal(plugin, event_attrs(component="other", involved="pod-a")) is None
    error = refusal(plugin, event_attrs(involved="pod-a"))
    assert error is not None
    assert error.message.endswith(
        "limit reached on type SourceAndObject for key kubeletnode1Poddefaultpod-au1v1"
    )


def test_cache_size_evicts_buckets_which_come_back_full() -> None:
    plugin = EventRateLimit.from_config(
        config({"type": "Namespace", "qps": 1, "burst": 1, "cacheSize": 1}), Clock()
    )
    assert refusal(plugin, event_attrs(namespace="a")) is None
    assert refusal(plugin, event_attrs(namespace="a")) is not None
    assert refusal(plugin, event_attrs(namespace="b")) is None  # evicts "a"
    assert refusal(plugin, event_attrs(namespace="a")) is None  # a new, full bucket
    cache = plugin.enforcers[0].cache
    assert cache is not None and cache.size == 1


def test_default_cache_size() -> None:
    plugin = EventRateLimit.from_config(config({"type": "User", "qps": 1, "burst": 1}), Clock())
    cache = plugin.enforcers[0].cache
    assert cache is not None and cache.size == 4096
    server = EventRateLimit.from_config(config({"type": "Server", "qps": 1, "burst": 1}), Clock())
    assert server.enforcers[0].cache is None


def test_every_limit_is_charged_and_each_refusal_named() -> None:
    plugin = EventRateLimit.from_config(
        config(
            {"type": "Server", "qps": 1, "burst": 1},
            {"type": "Namespace", "qps": 1, "burst": 1},
            {"type": "User", "qps": 1, "burst": 5},
        ),
        Clock(),
    )
    assert refusal(plugin, event_attrs()) is None
    error = refusal(plugin, event_attrs())
    assert error is not None
    assert error.message == (
        "Too many requests: [Too many requests: limit reached on type Server for key , "
        "Too many requests: limit reached on type Namespace for key default]"
    )


def test_only_core_events_on_create_and_update_are_limited() -> None:
    """admission.go: GroupKind core Event, Handler(Create, Update), dry-run skipped."""
    plugin = EventRateLimit.from_config(config({"type": "Server", "qps": 1, "burst": 1}), Clock())
    assert plugin.handles(CREATE) and plugin.handles(UPDATE) and not plugin.handles(DELETE)
    # events.k8s.io/v1 carries the GroupKind events.k8s.io/Event: never limited.
    for _ in range(5):
        assert refusal(plugin, event_attrs(EVENTS)) is None
    # Other kinds and dry-run requests are not limited either.
    assert refusal(plugin, event_attrs(kind="Pod")) is None
    assert refusal(plugin, event_attrs(dry_run=True)) is None
    assert refusal(plugin, event_attrs(operation=UPDATE)) is None
    assert refusal(plugin, event_attrs()) is not None


# --- configuration ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (None, "limits: Invalid value: null: must not be empty"),
        (config(), "limits: Invalid value: []: must not be empty"),
        (
            config({"type": "Pod", "qps": 1, "burst": 1}),
            'limits[0].type: Unsupported value: "Pod": supported values: "Namespace", '
            '"Server", "SourceAndObject", "User"',
        ),
        (
            config({"type": "Server", "qps": 1, "burst": 0}),
            "limits[0].burst: Invalid value: 0: must be positive",
        ),
        (
            config({"type": "Server", "qps": 0, "burst": 1}),
            "limits[0].qps: Invalid value: 0: must be positive",
        ),
        (
            config({"type": "User", "qps": 1, "burst": 1, "cacheSize": -1}),
            "limits[0].cacheSize: Invalid value: -1: must not be negative",
        ),
        (
            config({"type": "Server", "qps": 0, "burst": 0}),
            "[limits[0].burst: Invalid value: 0: must be positive, "
            "limits[0].qps: Invalid value: 0: must be positive]",
        ),
        (
            {"apiVersion": "v1", "kind": "Configuration", "limits": []},
            'no kind "Configuration" is registered for version "v1"',
        ),
        (
            config({"type": "Server", "qps": "x", "burst": 1}),
            "json: cannot unmarshal string into Go struct field Limit.limits.qps of type int32",
        ),
    ],
)
def test_bad_configurations(doc: dict[str, Any] | None, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_configuration(doc)
    assert str(raised.value).startswith(message)


def test_server_limit_ignores_negative_cache_size() -> None:
    limits = parse_configuration(config({"type": "Server", "qps": 1, "burst": 1, "cacheSize": -1}))
    assert limits[0].cache_size == -1
