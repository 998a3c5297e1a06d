"""core/v1 ``serviceaccounts``: what TokenRequest and service-account token validation need.

Served by the events' REST implementation (:class:`apiserver.api.events.rest.EventsAPI`) with
a view of its own (:data:`apiserver.api.serviceaccounts.view.SERVICE_ACCOUNTS`), on a
:class:`~apiserver.registry.store.Registry` keyed ``<--store-prefix>/serviceaccounts/<ns>/
<name>`` as kube-apiserver lays them out (``k8s.io/kubernetes pkg/registry/core/
serviceaccount/storage/storage.go``), so the TokenRequest API and the service-account
authenticator find them where they look. No token controller and no Secrets: a deleted
ServiceAccount simply makes its bound tokens fail (``service account token has been
invalidated`` / not found).
"""

from apiserver.api.serviceaccounts.view import GR, SERVICE_ACCOUNTS, STORAGE

__all__ = ["GR", "SERVICE_ACCOUNTS", "STORAGE"]
