"""The etcd3 storage backend (``--storage-backend=etcd3``, ``--store-servers``).

A Twisted-native client over etcd's ``/v3/`` JSON gateway; see :mod:`.store` for how it maps
the storage interface onto etcd, :mod:`.gateway` for the wire, :mod:`.watch` and
:mod:`.lease` for watches and TTLs.
"""

from apiserver.storage.etcd3.gateway import EtcdTLSPolicy
from apiserver.storage.etcd3.store import COMPACT_REV_KEY, Etcd3Store
from apiserver.storage.etcd3.watch import Etcd3Watch

__all__ = ["COMPACT_REV_KEY", "Etcd3Store", "Etcd3Watch", "EtcdTLSPolicy"]
