"""The admission plugins kube-apiserver knows, in its order, and what each does here.

``ALL_ORDERED_PLUGINS`` is kube-apiserver 1.35's ``AllOrderedPlugins``
(k8s.io/kubernetes pkg/kubeapiserver/options/plugins.go): the order enabled plugins run in,
whatever order the flags name them in. ``DEFAULT_ON`` is the complement of its
``DefaultOffAdmissionPlugins``. Every name is accepted; three act on this server:

- ``EventRateLimit`` (:mod:`.eventratelimit`), the plugin written for events;
- ``AlwaysAdmit`` and ``AlwaysDeny`` (:mod:`.always`).

Every other plugin concerns objects this server does not serve (pods, namespaces, nodes,
quotas, certificates, policies and webhook configurations), so there is nothing for it to
check: it is logged at start-up as not applicable (``NOT_APPLICABLE`` says why), and the man
page says so. NamespaceLifecycle in particular (on by default) refuses writes into a
namespace that is terminating or missing; with no Namespace resource served there is no
namespace to look up, so events are accepted in any namespace, as they were before.
"""

from __future__ import annotations

ALL_ORDERED_PLUGINS: tuple[str, ...] = (
    "AlwaysAdmit",
    "NamespaceAutoProvision",
    "NamespaceLifecycle",
    "NamespaceExists",
    "LimitPodHardAntiAffinityTopology",
    "LimitRanger",
    "ServiceAccount",
    "NodeRestriction",
    "TaintNodesByCondition",
    "AlwaysPullImages",
    "ImagePolicyWebhook",
    "PodSecurity",
    "PodNodeSelector",
    "Priority",
    "DefaultTolerationSeconds",
    "PodTolerationRestriction",
    "EventRateLimit",
    "ExtendedResourceToleration",
    "DefaultStorageClass",
    "StorageObjectInUseProtection",
    "OwnerReferencesPermissionEnforcement",
    "PersistentVolumeClaimResize",
    "RuntimeClass",
    "CertificateApproval",
    "CertificateSigning",
    "ClusterTrustBundleAttest",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    "DenyServiceExternalIPs",
    "PodTopologyLabels",
    # kube-apiserver keeps policies, webhooks, quota and deny last.
    "MutatingAdmissionPolicy",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
    "AlwaysDeny",
)

DEFAULT_ON: frozenset[str] = frozenset(
    {
        "NamespaceLifecycle",
        "LimitRanger",
        "ServiceAccount",
        "DefaultStorageClass",
        "PersistentVolumeClaimResize",
        "DefaultTolerationSeconds",
        "MutatingAdmissionWebhook",
        "ValidatingAdmissionWebhook",
        "ResourceQuota",
        "StorageObjectInUseProtection",
        "Priority",
        "TaintNodesByCondition",
        "RuntimeClass",
        "CertificateApproval",
        "CertificateSigning",
        "ClusterTrustBundleAttest",
        "CertificateSubjectRestriction",
        "DefaultIngressClass",
        "PodSecurity",
        "PodTopologyLabels",
        "MutatingAdmissionPolicy",
        "ValidatingAdmissionPolicy",
    }
)

#: The plugins that act on this server.
ACTING: frozenset[str] = frozenset({"AlwaysAdmit", "AlwaysDeny", "EventRateLimit"})

_PODS = "pods"
#: Why each other plugin has nothing to do here: the objects it concerns are not served.
NOT_APPLICABLE: dict[str, str] = {
    "NamespaceAutoProvision": "namespaces",
    "NamespaceLifecycle": "namespaces (no Namespace resource is served, so there is no "
    "namespace to check)",
    "NamespaceExists": "namespaces",
    "LimitPodHardAntiAffinityTopology": _PODS,
    "LimitRanger": "pods, containers and LimitRanges",
    "ServiceAccount": _PODS,
    "NodeRestriction": "nodes and pods",
    "TaintNodesByCondition": "nodes",
    "AlwaysPullImages": _PODS,
    "ImagePolicyWebhook": _PODS,
    "PodSecurity": _PODS,
    "PodNodeSelector": _PODS,
    "Priority": "pods and PriorityClasses",
    "DefaultTolerationSeconds": _PODS,
    "PodTolerationRestriction": _PODS,
    "ExtendedResourceToleration": _PODS,
    "DefaultStorageClass": "PersistentVolumeClaims",
    "StorageObjectInUseProtection": "PersistentVolumes and PersistentVolumeClaims",
    "OwnerReferencesPermissionEnforcement": "owner references checked against RBAC "
    "permissions of the owner's resource",
    "PersistentVolumeClaimResize": "PersistentVolumeClaims",
    "RuntimeClass": "pods and RuntimeClasses",
    "CertificateApproval": "CertificateSigningRequests",
    "CertificateSigning": "CertificateSigningRequests",
    "ClusterTrustBundleAttest": "ClusterTrustBundles",
    "CertificateSubjectRestriction": "CertificateSigningRequests",
    "DefaultIngressClass": "Ingresses",
    "DenyServiceExternalIPs": "Services",
    "PodTopologyLabels": _PODS,
    "MutatingAdmissionPolicy": "MutatingAdmissionPolicy objects (not served)",
    "MutatingAdmissionWebhook": "MutatingWebhookConfiguration objects (not served)",
    "ValidatingAdmissionPolicy": "ValidatingAdmissionPolicy objects (not served)",
    "ValidatingAdmissionWebhook": "ValidatingWebhookConfiguration objects (not served)",
    "ResourceQuota": "ResourceQuota objects (not served)",
}


def enabled_plugin_names(
    enable: tuple[str, ...] | list[str],
    disable: tuple[str, ...] | list[str],
    legacy: tuple[str, ...] | list[str] = (),
) -> list[str]:
    """The plugins that run, in kube-apiserver's order
    (k8s.io/apiserver/pkg/server/options/admission.go ``enabledPluginNames``).

    ``--admission-control`` (``legacy``), when given, names exactly the plugins to run
    (k8s.io/kubernetes pkg/kubeapiserver/options/admission.go ``computePluginNames``);
    otherwise the default ones, plus ``enable``, minus ``disable``.
    """
    if legacy:
        wanted = set(legacy)
        return [name for name in ALL_ORDERED_PLUGINS if name in wanted]
    off = (set(ALL_ORDERED_PLUGINS) - DEFAULT_ON) | set(disable)
    off -= set(enable)
    return [name for name in ALL_ORDERED_PLUGINS if name not in off]
