"""What the supervisor of ``--workers`` does once, before any worker starts.

Several workers starting together would otherwise race for things that must exist exactly
once (decided here, and documented in docs/architecture.md, "Worker processes"):

* ``--data-dir`` and the embedded store's schema (creation, or a future migration): made
  here, in one write transaction, so no worker ever sees a half-made or half-migrated file.
  The shared lock beside the file is taken for a moment first, so a lone server still
  running on the directory stops the start here, with its message, instead of sending the
  workers into a restart loop.
* the self-signed serving pair in ``--cert-dir``: written here, so every worker serves the
  same certificate.

What runs later, once, is chosen by worker index, not raced: worker 0 alone runs the
embedded store's TTL sweeper and compactor (``apiserver.server.make_store``). Everything
else a server does at start (the etcd client, the watch cache, post-start hooks that write
through the API with create-if-absent semantics) is safe to do in every worker, as it is
for several kube-apiservers on one etcd.
"""

from __future__ import annotations

import os

from apiserver.options import ServerConfig
from apiserver.server import events_servers
from apiserver.service.serving import self_signed_pair
from apiserver.storage.sqlite import schema
from apiserver.storage.sqlite.writer import release_lock, take_lock

__all__ = ["prepare_shared_state"]


def prepare_shared_state(config: ServerConfig) -> None:
    """The once-only steps above; raises StorageError (or OSError) when one fails."""
    if not events_servers(config):
        os.makedirs(config.data_dir, exist_ok=True)
        path = os.path.join(config.data_dir, "store.db")
        fd = take_lock(path, shared=True)
        try:
            conn, _, _ = schema.open_writer(path)
            conn.close()
        finally:
            release_lock(fd)
    if not config.tls_cert_file and not config.tls_private_key_file:
        self_signed_pair(config)
