"""Admission: the mutating and validating checks between decoding and storage.

kube-apiserver runs admission inside the REST layer, not in the filter chain
(k8s.io/apiserver/pkg/endpoints/handlers/create.go, update.go, patch.go; the registry's
``rest.AdmissionToValidateObjectFunc``): once the body is decoded and defaulted, **mutating**
admission may change the object; once the strategy has validated it, **validating** admission
may refuse it; then it is stored. This package is the place for that:

- :class:`Admission` is the interface a plugin (or a chain of them) implements, after
  k8s.io/apiserver/pkg/admission/interfaces.go (``MutationInterface``,
  ``ValidationInterface``);
- :class:`Attributes` is what it is told about the request (``admission.Attributes``);
- :class:`AlwaysAdmit` is the no-op implementation.

The REST handlers take ``admission: Admission | None``; None (the default, and the server's
setting unless a plugin that acts here is enabled) skips the calls altogether, so the write
paths pay nothing for it. The server builds the chain from the admission flags
(:mod:`apiserver.admission.config`; the plugins are in :mod:`apiserver.admission.plugins`).
Where they call it:

- events (:mod:`apiserver.api.events.rest`): CREATE on create, and on update and apply-patch
  of a missing object; UPDATE on update and patch (``old_obj`` the stored object). Mutating
  before the server-set fields and validation, validating after them, just before storage.
  DELETE (on delete and on each item of deletecollection): validating only, with no new
  object and the stored one as ``old_obj``, run on the object about to be deleted or marked
  for its finalizers, on every attempt of the registry's compare-and-swap
  (``rest.AdmissionToValidateObjectDeleteFunc``, handlers/delete.go).
- TokenRequest (:mod:`apiserver.api.tokenrequest.rest`): CREATE on ``serviceaccounts/token``,
  both checks before the token is issued (``token.go`` calls ``createValidation`` first).

A refusal is an exception (normally an ``apiserver.apimachinery.errors.StatusError``, e.g. a
403 ``Forbidden`` or 422 ``Invalid``), which the REST layer answers as it does its own.
"""

from __future__ import annotations

from apiserver.admission.interface import (
    CONNECT,
    CREATE,
    DELETE,
    UPDATE,
    Admission,
    AlwaysAdmit,
    Attributes,
    Operation,
    run_mutating,
    run_validating,
)

__all__ = [
    "CONNECT",
    "CREATE",
    "DELETE",
    "UPDATE",
    "Admission",
    "AlwaysAdmit",
    "Attributes",
    "Operation",
    "run_mutating",
    "run_validating",
]
