"""Storage: the revisioned store interface and its backends (embedded SQLite, etcd3), plus the watch cache."""
