"""The review APIs: ``authentication.k8s.io/v1`` (SelfSubjectReview, TokenReview) and
``authorization.k8s.io/v1`` (SubjectAccessReview, LocalSubjectAccessReview,
SelfSubjectAccessReview, SelfSubjectRulesReview).

What ``kubectl auth whoami`` and ``kubectl auth can-i`` call. All are create-only virtual
resources (``k8s.io/kubernetes pkg/registry/authentication/rest/storage_authentication.go``,
``pkg/registry/authorization/rest/storage_authorization.go``): nothing is stored; ``POST``
answers 201 with the resulting object, any other method is 405. Who may call them is the
authorization filter's business (RBAC's ``system:basic-user`` gives every authenticated user
the three self reviews, ``apiserver.auth.authz.rbac``).

- :mod:`.wire`: bodies (JSON, YAML, protobuf through the one codec) and type meta;
- :mod:`.authentication` and :mod:`.authorization`: each kind's REST ``Create``.
"""

from apiserver.api.reviews.rest import (
    AUTHENTICATION_BASE,
    AUTHORIZATION_BASE,
    ReviewsAPI,
    discovery_groups,
)

__all__ = ["AUTHENTICATION_BASE", "AUTHORIZATION_BASE", "ReviewsAPI", "discovery_groups"]
