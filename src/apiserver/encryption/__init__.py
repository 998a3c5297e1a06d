"""Encryption at rest (``--encryption-provider-config``), kube-apiserver's providers and
stored bytes: :mod:`.config` reads and validates the EncryptionConfiguration and builds the
transformers of :mod:`.transformers` (identity, aescbc, aesgcm, secretbox) and :mod:`.kmsv2`
(KMS v2 plugins over gRPC); :mod:`.dynamic` holds the configuration in force, swapped by the
automatic reload; :mod:`.metrics` counts what kube-apiserver counts. The registry sees only
:class:`apiserver.storage.value.ValueTransformer`.
"""
