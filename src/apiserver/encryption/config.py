"""``--encryption-provider-config``: the EncryptionConfiguration file, read, validated and
turned into transformers as kube-apiserver does it.

Follows k8s.io/apiserver ``pkg/apis/apiserver/v1/types_encryption.go`` and ``defaults.go``
(the file's shape; KMS ``timeout`` 3s, ``apiVersion`` v1, ``cachesize`` 1000 for v1 only),
``pkg/apis/apiserver/validation/validation_encryption.go`` (every check, with its text and
field path) and ``pkg/server/options/encryptionconfig/config.go`` (``LoadEncryptionConfig``:
the wrapping ``error while parsing file: ...`` / ``error while building transformers: ...``,
resource lookup exact, then ``*.<group>``, then ``*.*``, else identity; ``resource "x" is
masked by earlier rule "y"``).

The errors are :class:`EncryptionConfigError`, a ``ValueError``: at start-up ``tap`` reports
it and the server does not start; on an automatic reload the old configuration stays.
Secrets never appear in a message (``REDACTED``, as Go writes them).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import attrs
import yaml

from apiserver.apimachinery.schema import (
    STRING,
    UNTYPED,
    Field,
    List,
    Scalar,
    Struct,
)
from apiserver.apimachinery.strict import find_strict_errors
from apiserver.encryption.metrics import EncryptionMetrics
from apiserver.encryption.transformers import (
    AESCBC_PREFIX,
    AESGCM_PREFIX,
    IDENTITY,
    NO_MATCHING_PREFIX,
    SECRETBOX_PREFIX,
    AESCBCTransformer,
    AESGCMTransformer,
    PrefixTransformers,
    SecretboxTransformer,
    Transformer,
    aggregate,
)
from apiserver.gocompat import yamlguard
from apiserver.gocompat.duration import format_go_duration, parse_go_duration
from apiserver.gocompat.quote import go_quote

API_VERSION = "apiserver.config.k8s.io/v1"
KIND = "EncryptionConfiguration"
DEFAULT_KMS_TIMEOUT = 3.0
DEFAULT_KMS_CACHE_SIZE = 1000
AES_KEY_SIZES = (16, 24, 32)
SECRETBOX_KEY_SIZES = (32,)
KMS_V1_DEPRECATED = (
    "KMSv1 is deprecated and will only receive security updates going forward. Use KMSv2 "
    "instead.  Set --feature-gates=KMSv1=true to use the deprecated KMSv1 feature."
)
PROVIDER_NAMES = ("kms", "aesgcm", "aescbc", "secretbox", "identity")

GroupResource = tuple[str, str]


class EncryptionConfigError(ValueError):
    """A file that cannot be used; the message is kube-apiserver's."""


@attrs.frozen
class Key:
    name: str
    secret: str

    def go_json(self) -> dict[str, Any]:
        return {"Name": self.name, "Secret": "REDACTED"}


@attrs.frozen
class KMSConfiguration:
    api_version: str
    name: str
    cachesize: int | None
    endpoint: str
    timeout: float

    def go_json(self) -> dict[str, Any]:
        return {
            "APIVersion": self.api_version,
            "Name": self.name,
            "CacheSize": self.cachesize,
            "Endpoint": self.endpoint,
            "Timeout": format_go_duration(self.timeout),
        }


@attrs.frozen
class Provider:
    """One ``providers[]`` element: which of the five are set (validation needs to see
    them all; exactly one is valid)."""

    aesgcm: tuple[Key, ...] | None = None
    aescbc: tuple[Key, ...] | None = None
    secretbox: tuple[Key, ...] | None = None
    identity: bool = False
    kms: KMSConfiguration | None = None

    def go_json(self) -> str:
        def keys(value: tuple[Key, ...] | None) -> Any:
            return None if value is None else {"Keys": [k.go_json() for k in value]}

        doc = {
            "AESGCM": keys(self.aesgcm),
            "AESCBC": keys(self.aescbc),
            "Secretbox": keys(self.secretbox),
            "Identity": {} if self.identity else None,
            "KMS": self.kms.go_json() if self.kms is not None else None,
        }
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


@attrs.frozen
class ResourceConfiguration:
    resources: tuple[str, ...]
    providers: tuple[Provider, ...]


@attrs.frozen
class EncryptionConfiguration:
    resources: tuple[ResourceConfiguration, ...]


# --- decoding --------------------------------------------------------------------------

_KEY = Struct("Key", (Field("name", STRING), Field("secret", STRING)))
_KEYS = Struct("AESConfiguration", (Field("keys", List(_KEY)),))
_KMS = Struct(
    "KMSConfiguration",
    (
        Field("apiVersion", STRING),
        Field("name", STRING),
        Field("cachesize", Scalar("integer")),
        Field("endpoint", STRING),
        Field("timeout", STRING),
    ),
)
_PROVIDER = Struct(
    "ProviderConfiguration",
    (
        Field("aesgcm", _KEYS),
        Field("aescbc", _KEYS),
        Field("secretbox", _KEYS),
        Field("identity", Struct("IdentityConfiguration", ())),
        Field("kms", _KMS),
    ),
)
_SCHEMA = Struct(
    "EncryptionConfiguration",
    (
        Field("kind", STRING),
        Field("apiVersion", STRING),
        Field(
            "resources",
            List(
                Struct(
                    "ResourceConfiguration",
                    (Field("resources", List(STRING)), Field("providers", List(_PROVIDER))),
                )
            ),
        ),
    ),
)
del UNTYPED


def _type_error(path: str, want: str) -> EncryptionConfigError:
    return EncryptionConfigError(
        f"json: cannot unmarshal value into Go struct field {path} of type {want}"
    )


def _str(value: Any, path: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _type_error(path, "string")
    return value


def _list(value: Any, path: str, want: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _type_error(path, want)
    return value


def _keys(value: Any, path: str) -> tuple[Key, ...] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _type_error(path, "v1.AESConfiguration")
    out = []
    for entry in _list(value.get("keys"), path + ".keys", "[]v1.Key"):
        if not isinstance(entry, dict):
            raise _type_error(path + ".keys", "v1.Key")
        out.append(
            Key(_str(entry.get("name"), "Key.name"), _str(entry.get("secret"), "Key.secret"))
        )
    return tuple(out)


def _kms(value: Any) -> KMSConfiguration | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _type_error("ProviderConfiguration.kms", "v1.KMSConfiguration")
    api_version = _str(value.get("apiVersion"), "KMSConfiguration.apiVersion") or "v1"
    cachesize = value.get("cachesize")
    if cachesize is not None and (isinstance(cachesize, bool) or not isinstance(cachesize, int)):
        raise _type_error("KMSConfiguration.cachesize", "int32")
    if cachesize is None and api_version == "v1":
        cachesize = DEFAULT_KMS_CACHE_SIZE
    raw_timeout = value.get("timeout")
    if raw_timeout is None:
        timeout = DEFAULT_KMS_TIMEOUT
    else:
        try:
            timeout = parse_go_duration(_str(raw_timeout, "KMSConfiguration.timeout"))
        except ValueError as error:
            raise EncryptionConfigError(str(error)) from None
    return KMSConfiguration(
        api_version,
        _str(value.get("name"), "KMSConfiguration.name"),
        cachesize,
        _str(value.get("endpoint"), "KMSConfiguration.endpoint"),
        timeout,
    )


def decode(data: bytes) -> EncryptionConfiguration:
    """The configuration in ``data`` (YAML or JSON), strictly: an unknown or duplicated
    field is an error (``serializer.EnableStrict``). Raises :class:`EncryptionConfigError`
    with the decoder's text."""
    try:
        text = data.decode("utf-8")
        doc = json.loads(text) if text.lstrip().startswith("{") else yamlguard.load(text)
    except yaml.MarkedYAMLError as error:
        # Go's wording (``yaml: line N: <problem>``), without PyYAML's snippet of the file:
        # the line may hold a key.
        mark = error.problem_mark or error.context_mark
        line = f"line {mark.line + 1}: " if mark is not None else ""
        raise EncryptionConfigError(
            f"error converting YAML to JSON: yaml: {line}{error.problem or error.context}"
        ) from None
    except (ValueError, yaml.YAMLError, RecursionError) as error:
        raise EncryptionConfigError(f"error converting YAML to JSON: {error}") from None
    if not isinstance(doc, dict) or not doc.get("kind"):
        short = data.decode("utf-8", "replace").strip()
        raise EncryptionConfigError(f"Object 'Kind' is missing in '{short[:70]}'")
    kind, version = doc.get("kind"), doc.get("apiVersion") or ""
    if kind != KIND or version != API_VERSION:
        raise EncryptionConfigError(
            f'no kind "{kind}" is registered for version "{version}" in scheme '
            '"k8s.io/apiserver/pkg/server/options/encryptionconfig/config.go"'
        )
    problems = find_strict_errors(
        data, _SCHEMA, content_type="json" if text.lstrip().startswith("{") else "yaml"
    )
    if problems:
        raise EncryptionConfigError("strict decoding error: " + ", ".join(problems))
    rules = []
    for rule in _list(
        doc.get("resources"), "EncryptionConfiguration.resources", "[]v1.ResourceConfiguration"
    ):
        if not isinstance(rule, dict):
            raise _type_error("EncryptionConfiguration.resources", "v1.ResourceConfiguration")
        resources = tuple(
            _str(r, "ResourceConfiguration.resources")
            for r in _list(rule.get("resources"), "ResourceConfiguration.resources", "[]string")
        )
        providers = []
        for entry in _list(
            rule.get("providers"), "ResourceConfiguration.providers", "[]v1.ProviderConfiguration"
        ):
            if not isinstance(entry, dict):
                raise _type_error("ResourceConfiguration.providers", "v1.ProviderConfiguration")
            identity = entry.get("identity")
            if identity is not None and not isinstance(identity, dict):
                raise _type_error("ProviderConfiguration.identity", "v1.IdentityConfiguration")
            providers.append(
                Provider(
                    aesgcm=_keys(entry.get("aesgcm"), "ProviderConfiguration.aesgcm"),
                    aescbc=_keys(entry.get("aescbc"), "ProviderConfiguration.aescbc"),
                    secretbox=_keys(entry.get("secretbox"), "ProviderConfiguration.secretbox"),
                    identity=identity is not None,
                    kms=_kms(entry.get("kms")),
                )
            )
        rules.append(ResourceConfiguration(resources, tuple(providers)))
    return EncryptionConfiguration(tuple(rules))


# --- validation (validation_encryption.go) ---------------------------------------------


def parse_group_resource(text: str) -> GroupResource:
    """``schema.ParseGroupResource``: ``deployments.apps`` is (apps, deployments)."""
    resource, dot, group = text.partition(".")
    return (group, resource) if dot else ("", text)


def group_resource_string(gr: GroupResource) -> str:
    """``grYAMLString``: ``*.`` for every core resource, else ``resource.group``."""
    group, resource = gr
    if group == "" and resource == "*":
        return "*."
    return f"{resource}.{group}" if group else resource


def _required(path: str, detail: str) -> str:
    return f"{path}: Required value: {detail}"


def _invalid(path: str, value: str, detail: str) -> str:
    return f"{path}: Invalid value: {value}: {detail}"


def _json_list(values: Sequence[str]) -> str:
    return json.dumps(list(values), separators=(",", ":"), ensure_ascii=False)


def _validate_overlap(resources: Sequence[str], path: str) -> list[str]:
    if len(resources) < 2:
        return []
    parsed = [parse_group_resource(r) for r in resources]
    overlap = duplicate = False
    for i, first in enumerate(parsed):
        for j, second in enumerate(parsed):
            if i == j:
                continue
            if first == second and not duplicate:
                duplicate = True
                continue
            if overlap:
                continue
            if first == ("*", "*"):
                overlap = True
                continue
            if first[0] != second[0]:
                continue
            if first[1] == "*" or second[1] == "*":
                overlap = True
    errors = []
    if duplicate:
        errors.append(
            _invalid(
                path, _json_list(resources), "the same resource cannot be specified multiple times"
            )
        )
    if overlap:
        errors.append(
            _invalid(
                path,
                _json_list(resources),
                "using overlapping resources such as 'secrets' and '*.' in the same resource "
                "list is not allowed as they will be masked",
            )
        )
    return errors


def _validate_names(resources: Sequence[str], path: str) -> list[str]:
    errors = []
    for j, res in enumerate(resources):
        at, value = f"{path}[{j}]", go_quote(res)
        group, resource = parse_group_resource(res)
        if res.lower() != res:
            detail = "resource name should not contain capital letters"
        elif res == "*":
            detail = (
                "use '*.' to encrypt all the resources from core API group or *.* to encrypt "
                "all resources"
            )
        elif res in ("apiserveripinfo", "serviceipallocations", "servicenodeportallocations"):
            detail = "resources which do not have REST API/s cannot be encrypted"
        elif group == "events.k8s.io":
            detail = (
                "'*.events.k8s.io' objects are stored using the 'events' API group in etcd. "
                "Use 'events' instead in the config file"
            )
        elif group == "extensions":
            detail = "'extensions' group has been removed and cannot be used for encryption"
        elif group == "*" and resource != "*":
            detail = "encrypting the same resource across groups is not supported"
        else:
            continue
        errors.append(_invalid(at, value, detail))
    return errors


def _validate_single(provider: Provider, path: str) -> list[str]:
    found = sum(
        (
            provider.kms is not None,
            provider.aesgcm is not None,
            provider.aescbc is not None,
            provider.secretbox is not None,
            provider.identity,
        )
    )
    if found == 0:
        return [
            _invalid(
                path,
                provider.go_json(),
                "provider does not contain any of the expected providers: KMS, AESGCM, AESCBC, "
                "Secretbox, Identity",
            )
        ]
    if found > 1:
        return [
            _invalid(
                path,
                provider.go_json(),
                "more than one provider specified in a single element, should split into "
                "different list elements",
            )
        ]
    return []


def decode_secret(secret: str) -> bytes | None:
    """Go's ``base64.StdEncoding.DecodeString`` (padding required; CR and LF ignored)."""
    try:
        return base64.b64decode(secret.replace("\r", "").replace("\n", ""), validate=True)
    except (binascii.Error, ValueError):
        return None


def _validate_keys(keys: Sequence[Key], path: str, sizes: Sequence[int]) -> list[str]:
    if not keys:
        return [_required(path, "at least one keys is required")]
    errors = []
    for i, key in enumerate(keys):
        at = f"{path}[{i}]"
        if not key.name:
            errors.append(_required(f"{at}.name", "name is a mandatory field for a key"))
        if not key.secret:
            errors.append(_required(f"{at}.secret", "secret is a mandatory field for a key"))
            continue
        secret = decode_secret(key.secret)
        if secret is None:
            errors.append(_invalid(f"{at}.secret", '"REDACTED"', "secrets must be base64 encoded"))
            continue
        if len(secret) not in sizes:
            wanted = "[" + " ".join(str(s) for s in sizes) + "]"
            errors.append(
                _invalid(
                    f"{at}.secret",
                    '"REDACTED"',
                    f"secret is not of the expected length, got {len(secret)}, expected one of "
                    f"{wanted}",
                )
            )
    return errors


def _validate_kms(kms: KMSConfiguration, path: str, names: set[str], reload: bool) -> list[str]:
    errors = []
    if not kms.name:
        errors.append(_required(f"{path}.name", "name is a mandatory field for a provider"))
    if kms.api_version != "v1" and ":" in kms.name:
        errors.append(
            _invalid(
                f"{path}.name",
                go_quote(kms.name),
                f"invalid KMS provider name {kms.name}, must not contain ':'",
            )
        )
    if (reload or kms.api_version != "v1") and kms.name in names:
        errors.append(
            _invalid(
                f"{path}.name",
                go_quote(kms.name),
                f"duplicate KMS provider name {kms.name}, names must be unique",
            )
        )
    if kms.timeout <= 0:
        errors.append(
            _invalid(
                f"{path}.timeout",
                json.dumps(format_go_duration(kms.timeout)),
                "timeout should be a positive value",
            )
        )
    if not kms.endpoint:
        errors.append(_invalid(f"{path}.endpoint", '""', "endpoint is a mandatory field for a kms"))
    else:
        try:
            scheme = urlsplit(kms.endpoint).scheme
        except ValueError as error:
            errors.append(
                _invalid(
                    f"{path}.endpoint",
                    go_quote(kms.endpoint),
                    f"invalid endpoint for kms provider, error: {error}",
                )
            )
        else:
            if scheme != "unix":
                errors.append(
                    _invalid(
                        f"{path}.endpoint",
                        go_quote(kms.endpoint),
                        f"unsupported scheme {go_quote(scheme)} for KMS provider, only unix is "
                        "supported",
                    )
                )
    if kms.api_version != "v1" and kms.cachesize is not None:
        errors.append(
            _invalid(f"{path}.cachesize", str(kms.cachesize), "cachesize is not supported in v2")
        )
    if kms.api_version == "v1" and kms.cachesize == 0:
        errors.append(
            _invalid(
                f"{path}.cachesize",
                "0",
                "cachesize should be a positive value, or negative to disable",
            )
        )
    if kms.api_version not in ("v1", "v2"):
        errors.append(
            _invalid(
                f"{path}.apiVersion",
                go_quote(kms.api_version),
                # (sic) kube-apiserver formats the word "apiVersion" into the message.
                "unsupported apiVersion apiVersion for KMS provider, only v1 and v2 are supported",
            )
        )
    return errors


def validate(config: EncryptionConfiguration, reload: bool) -> list[str]:
    """``ValidateEncryptionConfiguration``: every problem, in Go's order and wording."""
    root = "resources"
    if not config.resources:
        return [_required(root, "at least one resources is required")]
    errors: list[str] = []
    kms_names: set[str] = set()
    for i, rule in enumerate(config.resources):
        r, p = f"{root}[{i}].resources", f"{root}[{i}].providers"
        if not rule.resources:
            errors.append(_required(r, f"at least one {r} is required"))
        errors += _validate_overlap(rule.resources, r)
        errors += _validate_names(rule.resources, r)
        if not rule.providers:
            errors.append(_required(p, f"at least one {p} is required"))
        for j, provider in enumerate(rule.providers):
            at = f"{p}[{j}]"
            errors += _validate_single(provider, at)
            if provider.kms is not None:
                errors += _validate_kms(provider.kms, f"{at}.kms", kms_names, reload)
                kms_names.add(provider.kms.name)
            elif provider.aesgcm is not None:
                errors += _validate_keys(provider.aesgcm, f"{at}.aesgcm.keys", AES_KEY_SIZES)
            elif provider.aescbc is not None:
                errors += _validate_keys(provider.aescbc, f"{at}.aescbc.keys", AES_KEY_SIZES)
            elif provider.secretbox is not None:
                errors += _validate_keys(
                    provider.secretbox, f"{at}.secretbox.keys", SECRETBOX_KEY_SIZES
                )
    return errors


# --- loading ---------------------------------------------------------------------------


def config_hash(data: bytes) -> str:
    """``computeEncryptionConfigHash``: ``sha256:<hex>`` of the file's bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def read_file(path: str) -> tuple[bytes, str]:
    """The file's bytes and hash (``loadDataAndHash``)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        reason = (error.strerror or str(error)).lower()
        raise EncryptionConfigError(
            f"error reading encryption provider configuration file {go_quote(path)}: "
            f"open {path}: {reason}"
        ) from None
    if not data:
        raise EncryptionConfigError(
            f"encryption provider configuration file {go_quote(path)} is empty"
        )
    return data, config_hash(data)


def load_config(path: str, reload: bool) -> tuple[EncryptionConfiguration, str]:
    """``loadConfig``: the validated configuration and the file's hash."""
    try:
        data, digest = read_file(path)
    except EncryptionConfigError as error:
        raise EncryptionConfigError(f"error while loading file: {error}") from None
    try:
        config = decode(data)
    except EncryptionConfigError as error:
        raise EncryptionConfigError(
            f"error decoding encryption provider configuration file {go_quote(path)}: {error}"
        ) from None
    problems = validate(config, reload)
    if problems:
        raise EncryptionConfigError(aggregate(problems))
    return config, digest


# --- building transformers --------------------------------------------------------------


def _key_transformers(
    keys: Sequence[Key],
    make: Callable[[bytes], Transformer],
    no_match: str,
    metrics: EncryptionMetrics | None,
) -> PrefixTransformers:
    per_key: list[tuple[bytes, Transformer]] = []
    for key in keys:
        secret = decode_secret(key.secret)
        if secret is None:
            raise EncryptionConfigError(f"could not obtain secret for named key {key.name}")
        per_key.append(((key.name + ":").encode(), make(secret)))
    return PrefixTransformers(per_key, no_match, metrics)


KMSFactory = Callable[[KMSConfiguration], tuple[bytes, Transformer, Any]]


@attrs.define
class BuiltConfiguration:
    """``encryptionconfig.EncryptionConfiguration``: transformers per resource rule, the
    KMS probes in file order, the file's hash and how long to wait before closing
    the KMS connections of a configuration replaced by a reload."""

    transformers: dict[GroupResource, PrefixTransformers]
    probes: list[Any]
    content_hash: str
    close_grace_period: float
    kms_v1_used: bool = False
    kms_v2_used: bool = False

    def transformer_for(self, resource: GroupResource) -> Transformer:
        """``transformerFromOverrides``: exact, ``*.<group>``, ``*.*``, else identity (which
        refuses encrypted data)."""
        transformers = self.transformers
        found = (
            transformers.get(resource)
            or transformers.get((resource[0], "*"))
            or transformers.get(("*", "*"))
        )
        return found if found is not None else IDENTITY

    def close(self) -> None:
        for probe in self.probes:
            close = getattr(probe, "close", None)
            if close is not None:
                close()


def build(
    config: EncryptionConfiguration,
    content_hash: str,
    *,
    metrics: EncryptionMetrics | None = None,
    kms_factory: KMSFactory | None = None,
    feature_gates: Mapping[str, bool] | None = None,
) -> BuiltConfiguration:
    """``getTransformerOverridesAndKMSPluginProbes``: raises :class:`EncryptionConfigError`
    (without the ``error while building transformers:`` wrapping, which
    :func:`load_encryption_config` adds)."""
    by_resource: dict[GroupResource, list[tuple[bytes, Transformer]]] = {}
    probes: list[Any] = []
    built = BuiltConfiguration({}, probes, content_hash, 0.0)
    timeout_sum = 0.0
    try:
        for rule in config.resources:
            transformers: list[tuple[bytes, Transformer]] = []
            for provider in rule.providers:
                if provider.aesgcm is not None:
                    transformers.append(
                        (
                            AESGCM_PREFIX,
                            _key_transformers(
                                provider.aesgcm,
                                AESGCMTransformer,
                                "no matching key was found for the provided AES transformer",
                                metrics,
                            ),
                        )
                    )
                elif provider.aescbc is not None:
                    transformers.append(
                        (
                            AESCBC_PREFIX,
                            _key_transformers(
                                provider.aescbc,
                                AESCBCTransformer,
                                "no matching key was found for the provided AES transformer",
                                metrics,
                            ),
                        )
                    )
                elif provider.secretbox is not None:
                    transformers.append(
                        (
                            SECRETBOX_PREFIX,
                            _key_transformers(
                                provider.secretbox,
                                SecretboxTransformer,
                                "no matching key was found for the provided Secretbox transformer",
                                metrics,
                            ),
                        )
                    )
                elif provider.kms is not None:
                    kms = provider.kms
                    if kms.api_version == "v1" and not (feature_gates or {}).get("KMSv1", False):
                        raise EncryptionConfigError(KMS_V1_DEPRECATED)
                    if kms_factory is None:
                        raise EncryptionConfigError(
                            f"could not configure KMS plugin {go_quote(kms.name)}, unsupported "
                            f"KMS API version {go_quote(kms.api_version)}"
                        )
                    prefix, transformer, probe = kms_factory(kms)
                    probes.append(probe)
                    if kms.api_version == "v1":
                        built.kms_v1_used = True
                        timeout_sum += 2 * kms.timeout
                    else:
                        built.kms_v2_used = True
                        timeout_sum += kms.timeout
                    transformers.append((prefix, transformer))
                elif provider.identity:
                    transformers.append((b"", IDENTITY))
                else:
                    raise EncryptionConfigError(
                        "provider does not contain any of the expected providers: KMS, AESGCM, "
                        "AESCBC, Secretbox, Identity"
                    )
            for resource in rule.resources:
                gr = parse_group_resource(resource)
                for mask in ((gr[0], "*"), ("*", "*")):
                    if mask in by_resource:
                        raise EncryptionConfigError(
                            f"resource {go_quote(group_resource_string(gr))} is masked by "
                            f"earlier rule {go_quote(group_resource_string(mask))}"
                        )
                by_resource.setdefault(gr, []).extend(transformers)
    except Exception:
        built.close()
        raise
    built.transformers = {
        gr: PrefixTransformers(items, NO_MATCHING_PREFIX, metrics)
        for gr, items in by_resource.items()
    }
    built.close_grace_period = 2 * timeout_sum
    return built


def load_encryption_config(
    path: str,
    reload: bool,
    *,
    metrics: EncryptionMetrics | None = None,
    kms_factory: KMSFactory | None = None,
    feature_gates: Mapping[str, bool] | None = None,
) -> BuiltConfiguration:
    """``LoadEncryptionConfig``: parse, validate and build, with kube-apiserver's wrapping."""
    try:
        config, digest = load_config(path, reload)
    except EncryptionConfigError as error:
        raise EncryptionConfigError(f"error while parsing file: {error}") from None
    try:
        return build(
            config, digest, metrics=metrics, kms_factory=kms_factory, feature_gates=feature_gates
        )
    except EncryptionConfigError as error:
        raise EncryptionConfigError(f"error while building transformers: {error}") from None


__all__ = [
    "API_VERSION",
    "KIND",
    "BuiltConfiguration",
    "EncryptionConfigError",
    "EncryptionConfiguration",
    "KMSConfiguration",
    "Key",
    "Provider",
    "ResourceConfiguration",
    "build",
    "config_hash",
    "decode",
    "group_resource_string",
    "load_config",
    "load_encryption_config",
    "parse_group_resource",
    "read_file",
    "validate",
]
