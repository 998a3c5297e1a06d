"""The open-files limit is raised to the hard limit, as Go's runtime does (service/limits.py)."""

from __future__ import annotations

import resource

import pytest

from apiserver.service import limits


class FakeLimits:
    def __init__(self, soft: int, hard: int, refuse: bool = False) -> None:
        self.soft, self.hard, self.refuse = soft, hard, refuse
        self.set: list[tuple[int, int]] = []

    def getrlimit(self, which: int) -> tuple[int, int]:
        assert which == resource.RLIMIT_NOFILE
        return self.soft, self.hard

    def setrlimit(self, which: int, value: tuple[int, int]) -> None:
        assert which == resource.RLIMIT_NOFILE
        if self.refuse:
            raise ValueError("not allowed")
        self.set.append(value)
        self.soft, self.hard = value


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeLimits:
    fake = FakeLimits(1024, 65536)
    monkeypatch.setattr(limits.resource, "getrlimit", fake.getrlimit)
    monkeypatch.setattr(limits.resource, "setrlimit", fake.setrlimit)
    return fake


def test_the_soft_limit_is_raised_to_the_hard_one(fake: FakeLimits) -> None:
    assert limits.raise_open_files_limit() == (1024, 65536)
    assert fake.set == [(65536, 65536)]


def test_nothing_changes_at_the_hard_limit_or_when_unlimited(fake: FakeLimits) -> None:
    fake.soft = fake.hard = 4096
    assert limits.raise_open_files_limit() == (4096, 4096)
    fake.soft, fake.hard = 1024, resource.RLIM_INFINITY
    assert limits.raise_open_files_limit() == (1024, 1024)
    assert fake.set == []


def test_a_refusal_leaves_the_limit(fake: FakeLimits) -> None:
    fake.refuse = True
    assert limits.raise_open_files_limit() == (1024, 1024)
