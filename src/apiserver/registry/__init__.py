"""The generic registry between the REST handlers and the storage interface."""
