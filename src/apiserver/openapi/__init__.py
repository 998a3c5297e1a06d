"""OpenAPI: ``/openapi/v3`` (per group version) and ``/openapi/v2``.

See :mod:`apiserver.openapi.handlers` for the HTTP behaviour (kube-openapi's handler and
handler3) and :mod:`apiserver.openapi.documents` for the documents.
"""

from apiserver.openapi.handlers import install_openapi

__all__ = ["install_openapi"]
