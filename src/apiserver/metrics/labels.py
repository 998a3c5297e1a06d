"""component-base's metric options: disabled, hidden and label-restricted metrics.

Follows k8s.io/component-base ``metrics/options.go`` and ``metrics/registry.go``:

- ``--disabled-metrics``: the named metrics are never registered, and win over showing
  hidden ones;
- ``--show-hidden-metrics-for-version=<major>.<minor>`` (only the previous minor is accepted,
  checked in ``apiserver.options.validate``): a metric deprecated in version X is hidden from
  the minor after X on (``shouldHide`` in ``metrics/version.go``); naming X shows it again;
- ``--allow-metric-labels metric,label='v1,v2'`` and ``--allow-metric-labels-manifest`` (a
  YAML map of the same keys to the same comma-separated values; the flag wins for a key it
  names, ``metrics/opts.go`` ``SetLabelAllowListFromCLI``/``...FromManifest``): any other
  value of that label is reported as ``unexpected``.

The allow-list is applied when ``/metrics`` is scraped (:meth:`LabelPolicy.view`), not per
request: series whose label becomes ``unexpected`` are summed, which is what recording them
under ``unexpected`` in the first place would have given.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs
import yaml
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

UNEXPECTED = "unexpected"
#: The binary's minor version: metrics deprecated before it are hidden.
CURRENT = (1, 35)


class ManifestError(ValueError):
    """``--allow-metric-labels-manifest`` cannot be read or is not the expected YAML map."""


def load_manifest(path: str) -> dict[str, tuple[str, ...]]:
    """Read ``--allow-metric-labels-manifest``: ``{"metric,label": "v1,v2"}``."""
    try:
        with open(path, "rb") as handle:
            data = yaml.safe_load(handle)
    except OSError as exc:
        raise ManifestError(
            f"--allow-metric-labels-manifest: failed to read allow list manifest {path}: "
            f"{exc.strerror or exc}"
        ) from None
    except yaml.YAMLError as exc:
        raise ManifestError(
            f"--allow-metric-labels-manifest: failed to parse allow list manifest {path}: {exc}"
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise ManifestError(
            f"--allow-metric-labels-manifest: allow list manifest {path} must map "
            "'metric,label' to 'value1,value2'"
        )
    result: dict[str, tuple[str, ...]] = {}
    for key, value in data.items():
        if key.count(",") != 1:
            raise ManifestError(
                f"--allow-metric-labels-manifest: {path}: key {key!r} must be metric,label"
            )
        result[key.strip()] = tuple(v.strip() for v in value.split(",") if v.strip())
    return result


def _minor(version: str) -> tuple[int, int]:
    major, _, minor = version.partition(".")
    return int(major), int(minor.split(".")[0])


@attrs.frozen
class LabelPolicy:
    """What to register and which label values to report."""

    disabled: frozenset[str] = frozenset()
    show_hidden: str = ""
    #: (metric, label) -> allowed values.
    allow: Mapping[tuple[str, str], frozenset[str]] = attrs.field(factory=dict)

    @classmethod
    def from_flags(
        cls,
        disabled: Iterable[str] = (),
        show_hidden: str = "",
        allow: Mapping[str, Iterable[str]] | None = None,
        manifest: str = "",
    ) -> LabelPolicy:
        """Build from the flags; a bad manifest raises :class:`ManifestError`."""
        merged: dict[str, tuple[str, ...]] = load_manifest(manifest) if manifest else {}
        merged.update({k: tuple(v) for k, v in (allow or {}).items()})
        table: dict[tuple[str, str], frozenset[str]] = {}
        for key, values in merged.items():
            metric, _, label = key.partition(",")
            table[(metric.strip(), label.strip())] = frozenset(values)
        return cls(frozenset(disabled), show_hidden or "", table)

    def enabled(self, name: str, deprecated: str | None = None) -> bool:
        """Whether ``name`` is registered: not disabled, and not hidden (a metric deprecated
        in ``deprecated`` is hidden from the next minor on, unless shown again)."""
        if name in self.disabled:
            return False
        if deprecated is None:
            return True
        if CURRENT <= _minor(deprecated):
            return True
        return bool(self.show_hidden) and _minor(self.show_hidden) == _minor(deprecated)

    def view(self, registry: Any) -> Any:
        """``registry`` with the allow-list applied (what ``generate_latest`` is given)."""
        if not self.allow:
            return registry
        return _AllowListView(registry, self.allow)


class _AllowListView:
    def __init__(self, registry: Any, allow: Mapping[tuple[str, str], frozenset[str]]) -> None:
        self.registry = registry
        self.by_metric: dict[str, list[tuple[str, frozenset[str]]]] = {}
        for (metric, label), values in allow.items():
            self.by_metric.setdefault(metric, []).append((label, values))

    def collect(self) -> Iterator[Metric]:
        for family in self.registry.collect():
            rules = self.by_metric.get(family.name) or self.by_metric.get(
                family.name + "_total" if family.type == "counter" else ""
            )
            if not rules:
                yield family
                continue
            yield _restrict(family, rules)


def _restrict(family: Metric, rules: list[tuple[str, frozenset[str]]]) -> Metric:
    out = Metric(family.name, family.documentation, family.type, family.unit)
    merged: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    order: list[tuple[str, tuple[tuple[str, str], ...]]] = []
    for sample in family.samples:
        labels = dict(sample.labels)
        for label, allowed in rules:
            if label in labels and labels[label] not in allowed:
                labels[label] = UNEXPECTED
        key = (sample.name, tuple(sorted(labels.items())))
        if key not in merged:
            merged[key] = 0.0
            order.append(key)
        merged[key] += sample.value
    for name, items in order:
        out.samples.append(Sample(name, dict(items), merged[(name, items)], None, None))
    return out
