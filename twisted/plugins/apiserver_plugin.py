"""twistd plugin: ``twistd apiserver [flags]``.

Kept tiny and lazy: twistd imports every plugin module to list them, so the real work
(``apiserver.tap``) is only imported when this plugin is chosen.
"""

from twisted.application.service import ServiceMaker

apiserver = ServiceMaker(
    "apiserver",
    "apiserver.tap",
    "A Kubernetes-compatible API server (health endpoints and events.k8s.io/v1).",
    "apiserver",
)
