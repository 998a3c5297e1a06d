"""Value types: Go's spellings of booleans, integers, floats, durations, quantities, lists, maps."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apiserver.gocompat.boolparse import parse_bool as parse_go_bool
from apiserver.gocompat.duration import (
    format_go_duration,
    format_go_duration_ns,
    parse_go_duration,
    parse_go_duration_ns,
)
from apiserver.options.flagtypes import (
    TYPES,
    FlagValueError,
    NamedCertKey,
    format_go_float,
    parse_bool_map,
    parse_cidrs,
    parse_configuration_map,
    parse_go_float,
    parse_key_value_map,
    parse_metric_labels,
    parse_named_cert_key,
    parse_port_range,
    parse_quantity,
    parse_version_flag,
    parse_vmodule,
    split_csv,
)
from apiserver.options.flagtypes import parse_int_flag as parse_go_int


@pytest.mark.parametrize("text", ["1", "t", "T", "TRUE", "true", "True"])
def test_go_bool_true(text: str) -> None:
    assert parse_go_bool(text) is True


@pytest.mark.parametrize("text", ["0", "f", "F", "FALSE", "false", "False"])
def test_go_bool_false(text: str) -> None:
    assert parse_go_bool(text) is False


@pytest.mark.parametrize("text", ["yes", "tRuE", "", " true", "2", "on"])
def test_go_bool_invalid(text: str) -> None:
    with pytest.raises(FlagValueError, match=r'strconv.ParseBool: parsing ".*": invalid syntax'):
        parse_go_bool(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("42", 42),
        ("-7", -7),
        ("+7", 7),
        ("0x1f", 31),
        ("0o17", 15),
        ("017", 15),
        ("0b101", 5),
        ("1_000", 1000),
        ("9223372036854775807", 2**63 - 1),
    ],
)
def test_go_int(text: str, value: int) -> None:
    assert parse_go_int(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1.5", "08", "1__0", "_1", " 1", "0x", "--1"])
def test_go_int_invalid(text: str) -> None:
    with pytest.raises(FlagValueError, match="invalid syntax"):
        parse_go_int(text)


def test_go_int_out_of_range() -> None:
    with pytest.raises(FlagValueError, match=r'parsing "9223372036854775808": value out of range'):
        parse_go_int("9223372036854775808")
    with pytest.raises(FlagValueError, match="out of range"):
        parse_go_int("2147483648", bits=32, base=10)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0.0),
        ("0.001", 0.001),
        ("1e-3", 0.001),
        (".5", 0.5),
        ("5.", 5.0),
        ("-2", -2.0),
        ("0x1p-2", 0.25),
        ("+Inf", float("inf")),
    ],
)
def test_go_float(text: str, value: float) -> None:
    assert parse_go_float(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1,5", " 1", "1e", "0x1"])
def test_go_float_invalid(text: str) -> None:
    with pytest.raises(FlagValueError, match=r"strconv.ParseFloat: parsing .*: invalid syntax"):
        parse_go_float(text)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (10.0, "10"),
        (0.001, "0.001"),
        (0.0, "0"),
        (1e21, "1e+21"),
        (1.5e-7, "1.5e-07"),
        (-3.25, "-3.25"),
    ],
)
def test_go_float_format(value: float, text: str) -> None:
    assert format_go_float(value) == text


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1m0s", 60.0),
        ("300ms", 0.3),
        ("2h45m", 9900.0),
        ("1.5h", 5400.0),
        ("-1s", -1.0),
        ("0", 0.0),
        ("-0", 0.0),
        ("+5s", 5.0),
        ("1us", 1e-6),
        ("1\u00b5s", 1e-6),
        ("1\u03bcs", 1e-6),
        ("1ns", 1e-9),
        (".5s", 0.5),
        ("5.s", 5.0),
        ("1h1m1s1ms", 3661.001),
    ],
)
def test_go_duration(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", 'time: invalid duration ""'),
        ("abc", 'time: invalid duration "abc"'),
        ("5", 'time: missing unit in duration "5"'),
        ("5x", 'time: unknown unit "x" in duration "5x"'),
        (".s", 'time: invalid duration ".s"'),
        ("-", 'time: invalid duration "-"'),
        ("1h 2m", 'time: unknown unit "h " in duration "1h 2m"'),
        ("9999999999h", 'time: invalid duration "9999999999h"'),
    ],
)
def test_go_duration_invalid(text: str, message: str) -> None:
    with pytest.raises(FlagValueError) as info:
        parse_go_duration(text)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (3600.0, "1h0m0s"),
        (2.0, "2s"),
        (0, "0s"),
        (0.3, "300ms"),
        (-1.0, "-1s"),
        (9900.0, "2h45m0s"),
        (1.5, "1.5s"),
        (60.0, "1m0s"),
        (1e-6, "1\u00b5s"),
        (1.5e-9, "2ns"),
        (90061.0, "25h1m1s"),
        (0.0015, "1.5ms"),
    ],
)
def test_go_duration_format(seconds: float, text: str) -> None:
    assert format_go_duration(seconds) == text


@given(st.integers(min_value=-(2**63) + 1, max_value=2**63 - 1))
def test_go_duration_round_trip(nanos: int) -> None:
    assert parse_go_duration_ns(format_go_duration_ns(nanos)) == nanos


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("64Ki", 65536),
        ("1M", 1_000_000),
        ("1Mi", 1 << 20),
        ("1.5Gi", 3 << 29),
        ("1e3", 1000),
        ("1k", 1000),
        ("100m", 1),
        ("2E", 2 * 10**18),
        ("+5", 5),
    ],
)
def test_quantity(text: str, value: int) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1KB", "1 Ki", "Ki", "1.2.3"])
def test_quantity_invalid(text: str) -> None:
    with pytest.raises(FlagValueError):
        parse_quantity(text)


def test_string_slice_is_csv() -> None:
    assert split_csv("a,b,c") == ("a", "b", "c")
    assert split_csv('"a,b",c') == ("a,b", "c")
    assert split_csv("") == ()
    assert split_csv("a, b") == ("a", " b")  # pflag does not trim


def test_cidrs() -> None:
    assert parse_cidrs("10.0.0.0/24,fd00::/108") == (
        ipaddress.ip_network("10.0.0.0/24"),
        ipaddress.ip_network("fd00::/108"),
    )
    assert parse_cidrs("10.0.0.5/24") == (ipaddress.ip_network("10.0.0.0/24"),)  # like Go
    for bad in ("10.0.0.0", "10.0.0.0/33", "nonsense/8"):
        with pytest.raises(FlagValueError, match="invalid CIDR address"):
            parse_cidrs(bad)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("30000-32767", (30000, 32767)),
        ("30000+2767", (30000, 32767)),
        ("80", (80, 80)),
        (" 1-2 ", (1, 2)),
        ("", (0, 0)),
    ],
)
def test_port_range(text: str, value: tuple[int, int]) -> None:
    assert parse_port_range(text) == value


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("5-3", "end port cannot be less than start port: 5-3"),
        ("1-70000", "the port range cannot be greater than 65535: 1-70000"),
        ("a-b", 'strconv.Atoi: parsing "a": invalid syntax'),
        ("1-2+3", "unable to parse port range: 1-2+3"),
    ],
)
def test_port_range_invalid(text: str, message: str) -> None:
    with pytest.raises(FlagValueError) as info:
        parse_port_range(text)
    assert str(info.value) == message


def test_maps() -> None:
    assert parse_key_value_map("a=b, c=d=e") == {"a": "b", "c": "d=e"}
    with pytest.raises(FlagValueError, match="nokey must be formatted as key=value"):
        parse_key_value_map("nokey")
    assert parse_configuration_map("api/all=false,batch/v1") == {"api/all": "false", "batch/v1": ""}
    assert parse_bool_map("A=true,kube:B=F") == {"A": True, "kube:B": False}
    with pytest.raises(FlagValueError, match=r"invalid value of A=maybe, err: strconv.ParseBool"):
        parse_bool_map("A=maybe")
    with pytest.raises(FlagValueError, match="missing bool value for A"):
        parse_bool_map("A")


def test_metric_labels() -> None:
    assert parse_metric_labels("metric1,label1='v1,v2,v3'") == {
        "metric1,label1": ("v1", "v2", "v3")
    }
    assert parse_metric_labels("m,l=a") == {"m,l": ("a",)}
    for bad in ("metric1", "metric1=v", "1m,l=v"):
        with pytest.raises(FlagValueError, match="--allow-metric-labels must have a list"):
            parse_metric_labels(bad)


def test_vmodule() -> None:
    assert parse_vmodule("foo*=3,bar=2") == (("foo*", 3), ("bar", 2))
    assert parse_vmodule("") == ()
    for bad in ("foo", "=3", "foo=x"):
        with pytest.raises(FlagValueError, match="expect comma-separated list of filename=N"):
            parse_vmodule(bad)


def test_version_flag_values() -> None:
    assert parse_version_flag("true") == "true"
    assert parse_version_flag("0") == "false"
    assert parse_version_flag("raw") == "raw"
    assert parse_version_flag("v1.36.2") == "v1.36.2"
    assert parse_version_flag("v1.36.0-alpha.1") == "v1.36.0-alpha.1"
    with pytest.raises(FlagValueError):
        parse_version_flag("v1.x")
    with pytest.raises(FlagValueError, match="ParseBool"):
        parse_version_flag("maybe")


def test_named_cert_key() -> None:
    assert parse_named_cert_key("a.crt,a.key") == NamedCertKey("a.crt", "a.key", ())
    assert parse_named_cert_key("a.crt,a.key:*.foo.com, foo.com") == NamedCertKey(
        "a.crt", "a.key", ("*.foo.com", "foo.com")
    )
    with pytest.raises(FlagValueError, match="empty names list is not allowed"):
        parse_named_cert_key("a.crt,a.key:")
    with pytest.raises(FlagValueError, match="expected comma separated certificate and key"):
        parse_named_cert_key("a.crt")


def test_merge_semantics_by_type() -> None:
    assert TYPES["strings"].merge(("a",), ("b",), False) == ("a", "b")
    assert TYPES["strings"].merge(("default",), ("b",), True) == ("b",)
    assert TYPES["map"].merge({"a": "1"}, {"b": "2"}, False) == {"a": "1", "b": "2"}
    assert TYPES["int"].merge(1, 2, False) == 2
    assert TYPES["strings"].repeatable and not TYPES["int"].repeatable
