"""The worked example of the storage format, shared by the codec and storage tests.

``golden/core-event-web.17f0.pb`` is its stored value (a core/v1 Event in the ``k8s\\x00``
envelope); :data:`WEB_EVENT` is that Event in the stored (core/v1) shape, without the
resourceVersion that is never stored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

GOLDEN_BYTES = (Path(__file__).parent / "golden" / "core-event-web.17f0.pb").read_bytes()

WEB_EVENT: dict[str, Any] = {
    "metadata": {
        "name": "web.17f0",
        "namespace": "default",
        "uid": "u1",
        "creationTimestamp": "2023-11-14T22:13:20Z",
    },
    "involvedObject": {
        "kind": "Pod",
        "namespace": "default",
        "name": "web",
        "uid": "u2",
        "apiVersion": "v1",
    },
    "reason": "Started",
    "message": "Started container",
    "source": {"component": "kubelet", "host": "node1"},
    "firstTimestamp": "2023-11-14T22:13:20Z",
    "lastTimestamp": "2023-11-14T22:13:20Z",
    "count": 1,
    "type": "Normal",
    "reportingComponent": "kubelet",
    "reportingInstance": "node1",
}
