"""``make run`` (apiserver.devrun): the command line it hands to ``apiserver``."""

from __future__ import annotations

from pathlib import Path

import pytest

from apiserver import devrun


def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> list[str]:
    seen: list[list[str]] = []
    monkeypatch.setattr(devrun.os, "execv", lambda exe, argv: seen.append(argv))
    devrun.main(["--port", "16443", "--var", str(tmp_path / "var"), *extra])
    return seen[0][1:]


def test_service_accounts_work_out_of_the_box(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flags = run(tmp_path, monkeypatch)
    key = tmp_path / "var" / "certs" / "service-account.key"
    assert f"--service-account-issuer={devrun.DEV_ISSUER}" in flags
    assert f"--service-account-key-file={key}" in flags
    assert f"--service-account-signing-key-file={key}" in flags
    assert key.read_bytes().startswith(b"-----BEGIN RSA PRIVATE KEY-----")
    assert key.stat().st_mode & 0o077 == 0
    before = key.read_bytes()
    run(tmp_path, monkeypatch)
    assert key.read_bytes() == before  # made once
    assert (tmp_path / "var" / "kubeconfig").exists()


def test_own_service_account_flags_win(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    flags = run(tmp_path, monkeypatch, "--", "--service-account-issuer=https://x")
    assert [f for f in flags if f.startswith("--service-account-")] == [
        "--service-account-issuer=https://x"
    ]


def test_console_sign_in_url_with_the_admin_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = run(tmp_path, monkeypatch)
    tokens = tmp_path / "var" / "certs" / "tokens.csv"
    assert f"--token-auth-file={tokens}" in flags
    token, user, uid, groups = tokens.read_text().strip().split(",")
    assert (user, uid, groups) == ("admin", "admin", '"system:masters"')
    assert tokens.stat().st_mode & 0o077 == 0
    assert f"https://127.0.0.1:16443/ui/#token={token}" in capsys.readouterr().out
    run(tmp_path, monkeypatch)
    assert tokens.read_text().startswith(token + ",")  # made once


def test_own_token_file_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = run(tmp_path, monkeypatch, "--", "--token-auth-file=/x.csv")
    assert [f for f in flags if f.startswith("--token-auth-file")] == ["--token-auth-file=/x.csv"]
    assert "https://127.0.0.1:16443/ui/\n" in capsys.readouterr().out
