"""Storage: the store interface, its backends (embedded SQLite, etcd3), the watch cache."""
