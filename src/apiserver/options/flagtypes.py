"""Value types of the command-line flags, parsed and printed the way Go's pflag does it.

kube-apiserver's flags are Go ``pflag`` values (plus a few from component-base and klog), so the
accepted spellings follow Go's ``strconv`` and ``time`` packages: ``strconv.ParseBool`` forms for
booleans, ``strconv.ParseInt`` with base prefixes for integers, ``time.ParseDuration`` syntax for
durations, Kubernetes quantities for sizes. We write these small parsers ourselves: no Python
library reproduces Go's exact syntax and error texts, and users copy command lines between the two
servers. Error texts mirror Go's (``strconv.ParseInt: parsing "x": invalid syntax``) because
operators search for them.

Each type knows how to parse one occurrence (``parse``), how to combine a repeated occurrence with
what came before (``merge``: scalars replace, lists and maps accumulate), how to print a value for
``--help`` (``format``), and the type word ``--help`` shows (``label``).
"""

from __future__ import annotations

import csv
import decimal
import ipaddress
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs

from apiserver.gocompat.boolparse import parse_bool
from apiserver.gocompat.duration import format_go_duration, parse_go_duration
from apiserver.gocompat.errors import GoValueError
from apiserver.gocompat.intparse import parse_int
from apiserver.gocompat.quote import go_quote

TypeName = Literal[
    "bool",
    "int",
    "level",
    "float",
    "string",
    "ip",
    "strings",
    "stringarray",
    "duration",
    "cidrs",
    "portrange",
    "map",
    "configmap",
    "boolmap",
    "metriclabels",
    "quantity",
    "vmodule",
    "version",
]

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


#: One occurrence of a flag could not be parsed; the message is Go's wording. The same class as
#: the Go-compatible parsers raise (:mod:`apiserver.gocompat`), so their errors are flag errors.
FlagValueError = GoValueError


# ---------------------------------------------------------------------------------------------
# Go strconv (ParseInt and ParseBool are apiserver.gocompat's)


def parse_int_flag(text: str, *, bits: int = 64, base: int = 0) -> int:
    """pflag's ``int``: ``strconv.ParseInt(text, 0, 64)`` (0x, 0o, 0b and 0 prefixes)."""
    return parse_int(text, base, bits)


_DEC_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_HEX_FLOAT = re.compile(
    r"[+-]?0[xX](?:[0-9a-fA-F]+(?:\.[0-9a-fA-F]*)?|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+"
)
_SPECIAL_FLOAT = re.compile(r"[+-]?(?:inf|infinity)|nan", re.IGNORECASE)


def parse_go_float(text: str) -> float:
    """``strconv.ParseFloat(text, 64)``: decimal, hexadecimal (``0x1p-2``), Inf and NaN."""
    if _DEC_FLOAT.fullmatch(text) or _SPECIAL_FLOAT.fullmatch(text):
        value = float(text)
    elif _HEX_FLOAT.fullmatch(text):
        value = float.fromhex(text)
    else:
        raise FlagValueError(f"strconv.ParseFloat: parsing {go_quote(text)}: invalid syntax")
    if math.isinf(value) and not _SPECIAL_FLOAT.fullmatch(text):
        raise FlagValueError(f"strconv.ParseFloat: parsing {go_quote(text)}: value out of range")
    return value


def format_go_float(value: float) -> str:
    """``strconv.FormatFloat(v, 'g', -1, 64)``: shortest form, exponent only when large or tiny."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "0"
    dec = decimal.Decimal(repr(value))
    exponent = dec.adjusted()
    if -4 <= exponent < 21:
        text = format(dec, "f")
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        return text
    sign, digits, _ = dec.as_tuple()
    mantissa = "".join(map(str, digits)).rstrip("0") or "0"
    if len(mantissa) > 1:
        mantissa = mantissa[0] + "." + mantissa[1:]
    return f"{'-' if sign else ''}{mantissa}e{'+' if exponent >= 0 else '-'}{abs(exponent):02d}"


# Go time.Duration: apiserver.gocompat.duration; strconv.ParseBool: apiserver.gocompat.boolparse.


# ---------------------------------------------------------------------------------------------
# Kubernetes resource.Quantity

_QUANTITY = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))([a-zA-Z]*|[eE][+-]?[0-9]+)")
_BINARY_SUFFIX = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SUFFIX = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
QUANTITY_FORMAT_ERROR = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)


def parse_quantity(text: str) -> int:
    """A Kubernetes quantity (``0``, ``64Ki``, ``1M``, ``1.5Gi``, ``1e3``) as a whole number.

    Like ``Quantity.Value()``, fractions round up (away from zero for positive values).
    """
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise FlagValueError(QUANTITY_FORMAT_ERROR)
    number = decimal.Decimal(match.group(1))
    suffix = match.group(2)
    if suffix in _BINARY_SUFFIX:
        value = number * (2 ** _BINARY_SUFFIX[suffix])
    elif suffix in _DECIMAL_SUFFIX:
        value = number.scaleb(_DECIMAL_SUFFIX[suffix])
    elif suffix[:1] in ("e", "E"):
        value = number.scaleb(int(suffix[1:]))
    else:
        raise FlagValueError("unable to parse quantity's suffix")
    return int(value.to_integral_value(rounding=decimal.ROUND_CEILING))


# ---------------------------------------------------------------------------------------------
# Composite values


def split_csv(text: str) -> tuple[str, ...]:
    """pflag's ``StringSlice``: one CSV record (quotes protect commas); empty text is no items."""
    if text == "":
        return ()
    try:
        rows = list(csv.reader([text], strict=True))
    except csv.Error as exc:
        raise FlagValueError(f"parse error: {exc}") from exc
    return tuple(rows[0]) if rows else ()


def parse_cidrs(text: str) -> tuple[IPNetwork, ...]:
    """Comma-separated CIDRs; like Go's ``net.ParseCIDR`` host bits are allowed and dropped."""
    networks: list[IPNetwork] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if "/" not in item:
            raise FlagValueError(f"invalid CIDR address: {item}")
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError as exc:
            raise FlagValueError(f"invalid CIDR address: {item}") from exc
    return tuple(networks)


def parse_port_range(text: str) -> tuple[int, int]:
    """``utilnet.PortRange``: ``N1-N2``, ``N1+offset`` or a single port ``N``; inclusive bounds."""
    value = text.strip()
    if value == "":
        return (0, 0)
    has_hyphen, has_plus = "-" in value, "+" in value
    if has_hyphen and has_plus:
        raise FlagValueError(f"unable to parse port range: {value}")

    def atoi(part: str) -> int:
        return parse_int(part, func="Atoi")

    if has_hyphen:
        low_text, high_text = value.split("-", 1)
        low, high = atoi(low_text), atoi(high_text)
    elif has_plus:
        low_text, offset_text = value.split("+", 1)
        low = atoi(low_text)
        high = low + atoi(offset_text)
    else:
        low = high = atoi(value)
    if low > 65535 or high > 65535:
        raise FlagValueError(f"the port range cannot be greater than 65535: {value}")
    if high < low:
        raise FlagValueError(f"end port cannot be less than start port: {value}")
    if low < 0:
        raise FlagValueError(f"port range cannot contain negative ports: {value}")
    return (low, high)


def format_port_range(value: tuple[int, int]) -> str:
    low, high = value
    return f"{low}-{high}" if (low, high) != (0, 0) else ""


def parse_key_value_map(text: str) -> dict[str, str]:
    """component-base ``MapStringString``: ``k=v,k2=v2``; each item needs an ``=``."""
    result: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, val = item.partition("=")
        if not sep:
            raise FlagValueError(f"{item} must be formatted as key=value")
        result[key.strip()] = val.strip()
    return result


def parse_configuration_map(text: str) -> dict[str, str]:
    """component-base ``ConfigurationMap`` (``--runtime-config``): ``k=v`` or a bare ``k``."""
    result: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        key, _, val = item.partition("=")
        result[key.strip()] = val.strip()
    return result


def parse_bool_map(text: str) -> dict[str, bool]:
    """``--feature-gates``: ``Name=true,[component:]Other=false``; values are Go booleans."""
    result: dict[str, bool] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, val = item.partition("=")
        if not sep:
            raise FlagValueError(f"missing bool value for {key.strip()}")
        try:
            result[key.strip()] = parse_bool(val.strip())
        except FlagValueError as exc:
            raise FlagValueError(
                f"invalid value of {key.strip()}={val.strip()}, err: {exc}"
            ) from None
    return result


_METRIC_LABEL_KEY = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*,[a-zA-Z_][a-zA-Z0-9_]*")
METRIC_LABELS_FORMAT_ERROR = (
    "--allow-metric-labels must have a list of kv pair with format "
    "`metricName,labelName=labelValue, labelValue,...`"
)


def parse_metric_labels(text: str) -> dict[str, tuple[str, ...]]:
    """``--allow-metric-labels metric,label='v1,v2'`` (no splitting at commas before the ``=``).

    The key is ``metric,label``; the value, quotes removed, is the list of allowed label values.
    """
    key, sep, val = text.partition("=")
    key = key.strip()
    if not sep or not _METRIC_LABEL_KEY.fullmatch(key):
        raise FlagValueError(METRIC_LABELS_FORMAT_ERROR)
    val = val.strip()
    if len(val) >= 2 and val[0] == val[-1] and val[0] in "'\"":
        val = val[1:-1]
    values = tuple(v.strip() for v in val.split(",") if v.strip())
    return {key: values}


_VMODULE_ERROR = "syntax error: expect comma-separated list of filename=N"


def parse_vmodule(text: str) -> tuple[tuple[str, int], ...]:
    """klog ``-vmodule``: ``pattern=N,...`` with glob patterns matched against file names."""
    result: list[tuple[str, int]] = []
    for item in text.split(","):
        if not item:
            continue  # klog ignores empty items ("a=1,,b=2")
        pattern, sep, level = item.partition("=")
        if not sep or not pattern:
            raise FlagValueError(_VMODULE_ERROR)
        try:
            number = parse_int(level, 10, 32)
        except FlagValueError:
            raise FlagValueError(_VMODULE_ERROR) from None
        result.append((pattern, number))
    return tuple(result)


_VERSION_OVERRIDE = re.compile(r"v\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]*)?")


def parse_version_flag(text: str) -> str:
    """``--version``: a boolean, ``raw``, or ``vX.Y.Z`` (sets the reported version)."""
    if text == "raw":
        return "raw"
    if text.startswith("v"):
        if not _VERSION_OVERRIDE.fullmatch(text):
            raise FlagValueError(f'could not parse "{text}" as a version of the form vX.Y.Z')
        return text
    return "true" if parse_bool(text) else "false"


def _parse_ip(text: str) -> str:
    stripped = text.strip()
    if stripped == "":
        return ""
    try:
        ipaddress.ip_address(stripped)
    except ValueError:
        raise FlagValueError(f'failed to parse IP: "{stripped}"') from None
    return stripped


# ---------------------------------------------------------------------------------------------
# The type registry


def _replace(old: Any, new: Any, first: bool) -> Any:
    return new


def _append(old: Any, new: Any, first: bool) -> Any:
    return tuple(new) if first else tuple(old) + tuple(new)


def _update(old: Any, new: Any, first: bool) -> Any:
    merged = {} if first else dict(old)
    merged.update(new)
    return merged


def _fmt_str(value: Any) -> str:
    return str(value)


def _fmt_bool(value: Any) -> str:
    return "true" if value else "false"


def _fmt_list(value: Any) -> str:
    return "[" + ",".join(str(v) for v in value) + "]"


def _fmt_map(value: Any) -> str:
    return "[" + ",".join(f"{k}={v}" for k, v in sorted(value.items())) + "]"


def _fmt_metric_labels(value: Any) -> str:
    return "[" + ",".join(f"{k}='{','.join(v)}'" for k, v in sorted(value.items())) + "]"


def _fmt_vmodule(value: Any) -> str:
    return ",".join(f"{p}={n}" for p, n in value)


@attrs.frozen
class FlagType:
    """How one kind of flag value is read, combined, and shown."""

    name: TypeName
    label: str  # the type word in --help (pflag's Value.Type()); "" for booleans
    parse: Callable[[str], Any]
    merge: Callable[[Any, Any, bool], Any] = _replace
    format: Callable[[Any], str] = _fmt_str
    no_opt_default: str | None = None  # the value of a bare ``--flag`` (pflag NoOptDefVal)
    repeatable: bool = False  # whether occurrences accumulate instead of replacing
    check: Callable[[Any], bool] = lambda value: True  # does a default have the right shape?


def _is_str_tuple(value: Any) -> bool:
    return isinstance(value, tuple) and all(isinstance(v, str) for v in value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


TYPES: Mapping[TypeName, FlagType] = {
    "bool": FlagType(
        "bool",
        "",
        parse_bool,
        format=_fmt_bool,
        no_opt_default="true",
        check=lambda v: isinstance(v, bool),
    ),
    "int": FlagType("int", "int", parse_int_flag, check=_is_int),
    "level": FlagType("level", "Level", lambda text: parse_int(text, 10, 32), check=_is_int),
    "float": FlagType(
        "float",
        "float",
        parse_go_float,
        format=format_go_float,
        check=lambda v: isinstance(v, float),
    ),
    "string": FlagType("string", "string", str, check=lambda v: isinstance(v, str)),
    "ip": FlagType("ip", "ip", _parse_ip, check=lambda v: isinstance(v, str)),
    "strings": FlagType(
        "strings",
        "strings",
        split_csv,
        merge=_append,
        format=_fmt_list,
        repeatable=True,
        check=_is_str_tuple,
    ),
    "stringarray": FlagType(
        "stringarray",
        "stringArray",
        lambda text: (text,),
        merge=_append,
        format=_fmt_list,
        repeatable=True,
        check=_is_str_tuple,
    ),
    "duration": FlagType(
        "duration",
        "duration",
        parse_go_duration,
        format=format_go_duration,
        check=lambda v: isinstance(v, float),
    ),
    "cidrs": FlagType(
        "cidrs",
        "string",
        parse_cidrs,
        format=lambda v: ",".join(str(n) for n in v),
        check=lambda v: isinstance(v, tuple),
    ),
    "portrange": FlagType(
        "portrange",
        "portRange",
        parse_port_range,
        format=format_port_range,
        check=lambda v: isinstance(v, tuple) and len(v) == 2,
    ),
    "map": FlagType(
        "map",
        "mapStringString",
        parse_key_value_map,
        merge=_update,
        format=_fmt_map,
        repeatable=True,
        check=lambda v: isinstance(v, dict),
    ),
    "configmap": FlagType(
        "configmap",
        "mapStringString",
        parse_configuration_map,
        merge=_update,
        format=_fmt_map,
        repeatable=True,
        check=lambda v: isinstance(v, dict),
    ),
    "boolmap": FlagType(
        "boolmap",
        "colonSeparatedMultimapStringString",
        parse_bool_map,
        merge=_update,
        format=lambda v: _fmt_map({k: _fmt_bool(b) for k, b in v.items()}),
        repeatable=True,
        check=lambda v: isinstance(v, dict),
    ),
    "metriclabels": FlagType(
        "metriclabels",
        "stringToString",
        parse_metric_labels,
        merge=_update,
        format=_fmt_metric_labels,
        repeatable=True,
        check=lambda v: isinstance(v, dict),
    ),
    "quantity": FlagType("quantity", "quantity", parse_quantity, check=_is_int),
    "vmodule": FlagType(
        "vmodule",
        "pattern=N,...",
        parse_vmodule,
        format=_fmt_vmodule,
        check=lambda v: isinstance(v, tuple),
    ),
    "version": FlagType(
        "version",
        "version[=true]",
        parse_version_flag,
        no_opt_default="true",
        check=lambda v: isinstance(v, str),
    ),
}


def is_zero(type_name: TypeName, value: Any) -> bool:
    """Whether pflag would leave ``(default ...)`` off: the zero value of the type."""
    if type_name == "version":
        return value == "false"
    if type_name == "portrange":
        return tuple(value) == (0, 0)
    return not value


@attrs.frozen
class NamedCertKey:
    """One ``--tls-sni-cert-key`` value: certificate and key files, and optional SNI names."""

    cert_file: str
    key_file: str
    names: tuple[str, ...] = ()


def parse_named_cert_key(text: str) -> NamedCertKey:
    """``cert,key`` or ``cert,key:*.foo.com,foo.com`` (component-base ``NamedCertKey``)."""
    pair, colon, names_text = text.partition(":")
    names: tuple[str, ...] = ()
    if colon:
        if not names_text.strip():
            raise FlagValueError("empty names list is not allowed")
        names = tuple(name.strip() for name in names_text.split(","))
    files = pair.strip().split(",")
    if len(files) != 2:
        raise FlagValueError("expected comma separated certificate and key file paths")
    return NamedCertKey(files[0].strip(), files[1].strip(), names)
