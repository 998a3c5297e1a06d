"""flowcontrol.apiserver.k8s.io/v1: the FlowSchemas and PriorityLevelConfigurations that
priority and fairness runs with, stored like any resource (kube-apiserver's
``pkg/registry/flowcontrol``).

- :mod:`.types`: schema, defaults and validation;
- :mod:`.rest`: get, list, watch, create, update, patch, delete, deletecollection and the
  ``status`` subresource;
- :mod:`.ensurer`: the bootstrap configuration kept in storage
  (``pkg/registry/flowcontrol/ensurer``);
- :mod:`.controller`: watches the stored objects and reconfigures priority and fairness
  (``apf_controller.go``'s config consumer), and writes the FlowSchemas' ``Dangling``
  condition.
"""

from apiserver.api.flowcontrol.rest import FlowControlAPI, discovery_group

__all__ = ["FlowControlAPI", "discovery_group"]
