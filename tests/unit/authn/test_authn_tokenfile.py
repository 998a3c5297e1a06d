"""--token-auth-file: Go encoding/csv semantics and the reference's start-up errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from authn_helpers import result_of

from apiserver.auth.authn.common import ConfigError
from apiserver.auth.authn.tokenfile import CSVError, TokenFileAuthenticator, parse_csv
from apiserver.auth.interface import UserInfo


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "tokens.csv"
    path.write_text(text)
    return str(path)


def test_rows_groups_and_quotes(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'tok1,alice,uid-1,"system:masters,dev"\n'
        "tok2,bob,uid-2\n"
        '"to,k3","carol ""c""",uid-3,\n'
        "\n"
        "tok4,dave,uid-4,one,ignored-extra\r\n",
    )
    auth = TokenFileAuthenticator.from_file(path)
    assert auth.tokens == {
        "tok1": UserInfo("alice", "uid-1", ("system:masters", "dev")),
        "tok2": UserInfo("bob", "uid-2", ()),
        "to,k3": UserInfo('carol "c"', "uid-3", ("",)),
        "tok4": UserInfo("dave", "uid-4", ("one",)),
    }
    result = result_of(auth.authenticate_token("tok1", ()))
    assert result.user.name == "alice"
    assert auth.authenticate_token("nope", ()) is None


def test_spaces_are_kept(tmp_path: Path) -> None:
    auth = TokenFileAuthenticator.from_file(write(tmp_path, " tok, alice ,u\n"))
    assert auth.tokens == {" tok": UserInfo(" alice ", "u", ())}


def test_empty_token_skipped_and_duplicate_last_wins(tmp_path: Path) -> None:
    auth = TokenFileAuthenticator.from_file(write(tmp_path, ",nobody,0\nt,first,1\nt,second,2\n"))
    assert auth.tokens == {"t": UserInfo("second", "2", ())}


def test_too_few_columns_stops_start_up(tmp_path: Path) -> None:
    path = write(tmp_path, "tok1,alice,1\ntok2,bob\n")
    with pytest.raises(ConfigError) as info:
        TokenFileAuthenticator.from_file(path)
    assert str(info.value) == (
        f"token file '{path}' must have at least 3 columns (token, user name, user uid), found 2"
    )


def test_bad_quoting_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, 'tok1,al"ice,1\n')
    with pytest.raises(ConfigError) as info:
        TokenFileAuthenticator.from_file(path)
    assert str(info.value) == (
        f"token file '{path}': parse error on line 1, column 8: bare \" in non-quoted-field"
    )


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        TokenFileAuthenticator.from_file(str(tmp_path / "absent.csv"))
    assert "--token-auth-file" in str(info.value)
    assert "absent.csv" in str(info.value)


def test_csv_reader_errors() -> None:
    with pytest.raises(CSVError, match=r'extraneous or missing " in quoted-field'):
        parse_csv('"abc"x,1\n')
    with pytest.raises(CSVError, match=r"record on line 1; parse error on line 2"):
        parse_csv('"abc\ndef')
    assert parse_csv('"a\nb",c\n') == [(1, ["a\nb", "c"])]
    assert parse_csv("a,,\n") == [(1, ["a", "", ""])]
