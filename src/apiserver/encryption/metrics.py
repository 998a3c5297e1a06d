"""The encryption-at-rest metrics of kube-apiserver, counted in plain Python and turned into
Prometheus families at scrape time.

Follows k8s.io/apiserver ``pkg/storage/value/metrics.go`` (transformation operations and
latencies, envelope cache misses, DEK generation),
``pkg/storage/value/encrypt/envelope/metrics/metrics.go`` (KMS operation latency, key ID
hashes, DEK cache fill) and ``pkg/server/options/encryptionconfig/metrics/metrics.go``
(automatic reloads). All are ALPHA there. A transformation is on the request path, so
recording is a dict update and a bisect, never a prometheus-client lock.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)


def _exponential(start: float, factor: float, count: int) -> tuple[float, ...]:
    return tuple(start * factor**i for i in range(count))


TRANSFORM_BUCKETS = _exponential(5e-6, 2, 25)
DEK_GENERATION_BUCKETS = _exponential(5e-6, 2, 14)
KMS_LATENCY_BUCKETS = _exponential(5e-4, 2, 14)
INTER_ARRIVAL_BUCKETS = _exponential(60, 2, 10)


class _Histogram:
    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def buckets(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip(self.bounds, self.counts, strict=False):
            running += count
            out.append((repr(float(bound)), running))
        out.append(("+Inf", running + self.counts[-1]))
        return out


def hash_label(value: str) -> str:
    """``sha256:<hex>`` of a non-empty value, as the envelope metrics label key IDs and the
    API server ID (``envelope/metrics/metrics.go`` ``getHash``)."""
    return f"sha256:{hashlib.sha256(value.encode()).hexdigest()}" if value else ""


class EncryptionMetrics:
    """Every encryption series, registered as one collector (``registry.register(self)``)."""

    def __init__(self, clock: Any = None) -> None:
        self._clock = clock
        self.operations: dict[tuple[str, str, str, str], int] = {}
        self.durations: dict[tuple[str, str], _Histogram] = {}
        self.cache_misses = 0
        self.dek_generation = _Histogram(DEK_GENERATION_BUCKETS)
        self.dek_generation_failures = 0
        self.kms_latency: dict[tuple[str, str, str], _Histogram] = {}
        self.key_id_hash: dict[tuple[str, str, str, str], int] = {}
        self.key_id_hash_last: dict[tuple[str, str, str, str], float] = {}
        self.key_id_status_last: dict[tuple[str, str, str], float] = {}
        self.invalid_key_id_from_status: dict[tuple[str, str], int] = {}
        self.dek_cache_size: dict[str, int] = {}
        self.reloads: dict[tuple[str, str], int] = {}
        self.reload_last: dict[tuple[str, str], float] = {}
        self.config_info: tuple[str, str] | None = None
        self.dek_cache_fill_percent = 0.0
        self._last_arrival: dict[str, float] = {}
        self.inter_arrival: dict[str, _Histogram] = {}

    def _now(self) -> float:
        if self._clock is None:
            import time

            return time.time()
        return float(self._clock.seconds())

    # --- recording -------------------------------------------------------------------

    def transformation(
        self, resource: str, kind: str, prefix: str, seconds: float, status: str
    ) -> None:
        """``RecordTransformation``: the count always, the latency on success only."""
        key = (resource, kind, prefix, status)
        self.operations[key] = self.operations.get(key, 0) + 1
        if status == "OK":
            histogram = self.durations.get((kind, prefix))
            if histogram is None:
                histogram = self.durations[(kind, prefix)] = _Histogram(TRANSFORM_BUCKETS)
            histogram.observe(seconds)

    def arrival(self, kind: str) -> None:
        """``RecordArrival`` (KMS v1): seconds between transformations of one type."""
        now = self._now()
        last = self._last_arrival.get(kind)
        self._last_arrival[kind] = now
        if last is not None:
            histogram = self.inter_arrival.get(kind)
            if histogram is None:
                histogram = self.inter_arrival[kind] = _Histogram(INTER_ARRIVAL_BUCKETS)
            histogram.observe(now - last)

    def cache_miss(self) -> None:
        self.cache_misses += 1

    def data_key_generated(self, seconds: float, failed: bool) -> None:
        if failed:
            self.dek_generation_failures += 1
        else:
            self.dek_generation.observe(seconds)

    def kms_operation(self, provider: str, method: str, code: str, seconds: float) -> None:
        key = (provider, method, code)
        histogram = self.kms_latency.get(key)
        if histogram is None:
            histogram = self.kms_latency[key] = _Histogram(KMS_LATENCY_BUCKETS)
        histogram.observe(seconds)

    def key_id(self, kind: str, provider: str, key_id: str, apiserver_id: str) -> None:
        key = (kind, provider, hash_label(key_id), hash_label(apiserver_id))
        self.key_id_hash[key] = self.key_id_hash.get(key, 0) + 1
        self.key_id_hash_last[key] = self._now()

    def key_id_from_status(self, provider: str, key_id: str, apiserver_id: str) -> None:
        self.key_id_status_last[(provider, hash_label(key_id), hash_label(apiserver_id))] = (
            self._now()
        )

    def invalid_key_id(self, provider: str, error: str) -> None:
        key = (provider, error)
        self.invalid_key_id_from_status[key] = self.invalid_key_id_from_status.get(key, 0) + 1

    def reload(self, success: bool, apiserver_id: str, config_hash: str = "") -> None:
        status = "success" if success else "failure"
        key = (status, hash_label(apiserver_id))
        self.reloads[key] = self.reloads.get(key, 0) + 1
        self.reload_last[key] = self._now()
        if success and config_hash:
            self.config_info = (hash_label(apiserver_id), config_hash)

    def loaded(self, apiserver_id: str, config_hash: str) -> None:
        self.config_info = (hash_label(apiserver_id), config_hash)

    # --- the collector ---------------------------------------------------------------

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        ops = CounterMetricFamily(
            "apiserver_storage_transformation_operations_total",
            "Total number of transformations. Successful transformation will have a status "
            "'OK' and a varied status string when the transformation fails.",
            labels=["resource", "transformation_type", "transformer_prefix", "status"],
        )
        for labels, count in self.operations.items():
            ops.add_metric(list(labels), count)
        yield ops
        durations = HistogramMetricFamily(
            "apiserver_storage_transformation_duration_seconds",
            "Latencies in seconds of value transformation operations.",
            labels=["transformation_type", "transformer_prefix"],
        )
        for hlabels, histogram in self.durations.items():
            durations.add_metric(list(hlabels), histogram.buckets(), histogram.total)
        yield durations
        misses = CounterMetricFamily(
            "apiserver_storage_envelope_transformation_cache_misses_total",
            "Total number of cache misses while accessing key decryption key(KEK).",
        )
        misses.add_metric([], self.cache_misses)
        yield misses
        generation = HistogramMetricFamily(
            "apiserver_storage_data_key_generation_duration_seconds",
            "Latencies in seconds of data encryption key(DEK) generation operations.",
        )
        generation.add_metric([], self.dek_generation.buckets(), self.dek_generation.total)
        yield generation
        failures = CounterMetricFamily(
            "apiserver_storage_data_key_generation_failures_total",
            "Total number of failed data encryption key(DEK) generation operations.",
        )
        failures.add_metric([], self.dek_generation_failures)
        yield failures
        fill = GaugeMetricFamily(
            "apiserver_envelope_encryption_dek_cache_fill_percent",
            "Percent of the cache slots currently occupied by cached DEKs.",
        )
        fill.add_metric([], self.dek_cache_fill_percent)
        yield fill
        arrivals = HistogramMetricFamily(
            "apiserver_envelope_encryption_dek_cache_inter_arrival_time_seconds",
            "Time (in seconds) of inter arrival of transformation requests.",
            labels=["transformation_type"],
        )
        for kind, histogram in self.inter_arrival.items():
            arrivals.add_metric([kind], histogram.buckets(), histogram.total)
        yield arrivals
        kms = HistogramMetricFamily(
            "apiserver_envelope_encryption_kms_operations_latency_seconds",
            "KMS operation duration with gRPC error code status total.",
            labels=["provider_name", "method_name", "grpc_status_code"],
        )
        for klabels, histogram in self.kms_latency.items():
            kms.add_metric(list(klabels), histogram.buckets(), histogram.total)
        yield kms
        id_labels = ["transformation_type", "provider_name", "key_id_hash", "apiserver_id_hash"]
        key_ids = CounterMetricFamily(
            "apiserver_envelope_encryption_key_id_hash_total",
            "Number of times a keyID is used split by transformation type, provider, and "
            "apiserver identity.",
            labels=id_labels,
        )
        for ilabels, count in self.key_id_hash.items():
            key_ids.add_metric(list(ilabels), count)
        yield key_ids
        last = GaugeMetricFamily(
            "apiserver_envelope_encryption_key_id_hash_last_timestamp_seconds",
            "The last time in seconds when a keyID was used.",
            labels=id_labels,
        )
        for ilabels, seconds in self.key_id_hash_last.items():
            last.add_metric(list(ilabels), seconds)
        yield last
        status_last = GaugeMetricFamily(
            "apiserver_envelope_encryption_key_id_hash_status_last_timestamp_seconds",
            "The last time in seconds when a keyID was returned by the Status RPC call.",
            labels=["provider_name", "key_id_hash", "apiserver_id_hash"],
        )
        for slabels, seconds in self.key_id_status_last.items():
            status_last.add_metric(list(slabels), seconds)
        yield status_last
        invalid = CounterMetricFamily(
            "apiserver_envelope_encryption_invalid_key_id_from_status_total",
            "Number of times an invalid keyID is returned by the Status RPC call split by error.",
            labels=["provider_name", "error"],
        )
        for vlabels, count in self.invalid_key_id_from_status.items():
            invalid.add_metric(list(vlabels), count)
        yield invalid
        cache_size = GaugeMetricFamily(
            "apiserver_envelope_encryption_dek_source_cache_size",
            "Number of records in data encryption key (DEK) source cache. On a restart, this "
            "value is an approximation of the number of decrypt RPC calls the server will make "
            "to the KMS plugin.",
            labels=["provider_name"],
        )
        for provider, size in self.dek_cache_size.items():
            cache_size.add_metric([provider], size)
        yield cache_size
        reloads = CounterMetricFamily(
            "apiserver_encryption_config_controller_automatic_reloads_total",
            "Total number of reload successes and failures of encryption configuration split "
            "by apiserver identity.",
            labels=["status", "apiserver_id_hash"],
        )
        for rlabels, count in self.reloads.items():
            reloads.add_metric(list(rlabels), count)
        yield reloads
        reload_last = GaugeMetricFamily(
            "apiserver_encryption_config_controller_automatic_reload_last_timestamp_seconds",
            "Timestamp of the last successful or failed automatic reload of encryption "
            "configuration split by apiserver identity.",
            labels=["status", "apiserver_id_hash"],
        )
        for rlabels, seconds in self.reload_last.items():
            reload_last.add_metric(list(rlabels), seconds)
        yield reload_last
        info = GaugeMetricFamily(
            "apiserver_encryption_config_controller_last_config_info",
            "Information about the last applied encryption configuration with hash as label, "
            "split by apiserver identity.",
            labels=["apiserver_id_hash", "hash"],
        )
        if self.config_info is not None:
            info.add_metric(list(self.config_info), 1)
        yield info


__all__ = ["EncryptionMetrics", "hash_label"]
