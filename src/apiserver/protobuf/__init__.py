"""Kubernetes protobuf (``application/vnd.kubernetes.protobuf``): the message definitions
(``generated/``, compiled from the ``.proto`` files there by ``make proto``) and the one codec
between them and the server's dicts (:mod:`apiserver.protobuf.codec`)."""
