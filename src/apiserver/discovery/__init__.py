"""API discovery: the legacy and aggregated documents on ``/api`` and ``/apis``.

See :mod:`apiserver.discovery.handlers` for the HTTP behaviour and
:mod:`apiserver.discovery.documents` for the documents and ``--runtime-config``.
"""

from apiserver.discovery.documents import runtime_config_enables_events, runtime_config_errors
from apiserver.discovery.handlers import install_discovery

__all__ = ["install_discovery", "runtime_config_enables_events", "runtime_config_errors"]
