"""generateName (apiserver pkg/storage/names/generate.go)."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from apiserver.apimachinery.names import ALPHANUMS, generate_name


def test_alphabet_is_kubes() -> None:
    assert ALPHANUMS == "bcdfghjklmnpqrstvwxz2456789"


def test_suffix_is_five_chars_from_the_alphabet() -> None:
    name = generate_name("event-", random.Random(7))
    assert name.startswith("event-")
    suffix = name[len("event-") :]
    assert len(suffix) == 5
    assert all(ch in ALPHANUMS for ch in suffix)


def test_deterministic_with_a_seeded_rng() -> None:
    assert generate_name("a-", random.Random(1)) == generate_name("a-", random.Random(1))


def test_prefix_cut_to_58_bytes() -> None:
    name = generate_name("x" * 70, random.Random(0))
    assert len(name) == 63
    assert name[:58] == "x" * 58
    assert len(generate_name("y" * 58)) == 63
    assert generate_name("y" * 57).startswith("y" * 57)


def test_multibyte_prefix_cut_in_bytes() -> None:
    name = generate_name("é" * 40, random.Random(0))  # 80 bytes
    assert name[:29] == "é" * 29
    assert len(name) == 29 + 5


@given(st.text(alphabet="abc-", max_size=80))
def test_never_longer_than_63(prefix: str) -> None:
    assert len(generate_name(prefix).encode()) <= 63
