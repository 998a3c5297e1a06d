"""flowcontrol.apiserver.k8s.io/v1, read-only: the FlowSchemas and PriorityLevelConfigurations
that priority and fairness runs with (:mod:`apiserver.flowcontrol.bootstrap`).

kube-apiserver stores these objects and lets them be edited; here the configuration is the
bootstrap one, so get, list and watch are served (JSON, and the Table kubectl asks for, with
the columns of k8s.io/kubernetes/pkg/printers/internalversion/printers.go) and every write is
refused with 405 MethodNotAllowed, as for a resource that does not offer the verb.
"""

from apiserver.api.flowcontrol.rest import FlowControlAPI, discovery_group

__all__ = ["FlowControlAPI", "discovery_group"]
