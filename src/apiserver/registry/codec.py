"""Serializing API objects the way kube-apiserver's serializers write them.

JSON: compact, one trailing newline (Go's ``json.Encoder``); ``pretty`` gives 2-space
indentation (also with a trailing newline). YAML: keys in object order, as sigs.k8s.io/yaml
writes them from JSON. orjson does the JSON work (measured: it matters for lists and watch
fan-out).
"""

from __future__ import annotations

from typing import Any

import orjson
import yaml

JSON_TYPE = "application/json"
YAML_TYPE = "application/yaml"


def encode_json(obj: Any, pretty: bool = False) -> bytes:
    if pretty:
        return orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
    return orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)


class _Dumper(yaml.SafeDumper):
    """Block style, no key sorting, long strings unwrapped (as sigs.k8s.io/yaml)."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


def encode_yaml(obj: Any) -> bytes:
    text = yaml.dump(
        obj,
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=1 << 30,
    )
    return text.encode()


def encode(obj: Any, media: str, pretty: bool = False) -> bytes:
    if media == "yaml":
        return encode_yaml(obj)
    return encode_json(obj, pretty)


def content_type(media: str) -> str:
    return YAML_TYPE if media == "yaml" else JSON_TYPE
