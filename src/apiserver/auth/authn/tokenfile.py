"""Static bearer tokens (``--token-auth-file``).

Reference: ``AS/pkg/authentication/token/tokenfile/tokenfile.go``. The file is CSV as Go's
``encoding/csv`` reads it with a variable field count: ``token,user,uid[,"g1,g2"]``.

- fewer than 3 fields stops start-up: ``token file '<path>' must have at least 3 columns
  (token, user name, user uid), found <n>``;
- an empty token is skipped (with a warning), a duplicate token replaces the earlier one;
- column 4 is split on ``,`` (an empty column gives the group ``""``); more columns are ignored.

Why a hand-written reader instead of Python's ``csv``: Go's reader differs in ways that
matter for which files start (it refuses a bare ``"`` inside an unquoted field and junk after a
closing quote, skips empty lines, and reports ``parse error on line L, column C``), and a
file accepted by kube-apiserver must mean the same thing here.
"""

from __future__ import annotations

from twisted.logger import Logger

from apiserver.auth.authn.common import ConfigError, TokenOutcome, read_file
from apiserver.auth.interface import AuthResult, UserInfo

log = Logger()


class CSVError(ValueError):
    """Go's ``csv.ParseError`` text."""


def parse_csv(text: str) -> list[tuple[int, list[str]]]:
    """Records as Go's ``encoding/csv`` reads them (comma ``,``, no comments, no trimming).

    Returns ``(line number, fields)`` pairs; raises CSVError on malformed quoting.
    """
    text = text.replace("\r\n", "\n")
    records: list[tuple[int, list[str]]] = []
    pos, n, line = 0, len(text), 1
    while pos < n:
        if text[pos] == "\n":  # an empty line is skipped
            pos += 1
            line += 1
            continue
        start_line = line
        fields: list[str] = []
        line_start = pos
        while True:
            if pos < n and text[pos] == '"':
                # Quoted field.
                pos += 1
                value: list[str] = []
                while True:
                    if pos >= n:
                        raise CSVError(
                            _parse_error(start_line, line, pos - line_start + 1, "quote")
                        )
                    ch = text[pos]
                    if ch == '"':
                        if pos + 1 < n and text[pos + 1] == '"':
                            value.append('"')
                            pos += 2
                            continue
                        pos += 1
                        break
                    if ch == "\n":
                        line += 1
                        line_start = pos + 1
                    value.append(ch)
                    pos += 1
                fields.append("".join(value))
                if pos < n and text[pos] not in ",\n":
                    raise CSVError(_parse_error(start_line, line, pos - line_start + 1, "quote"))
            else:
                end = pos
                while end < n and text[end] not in ",\n":
                    if text[end] == '"':
                        raise CSVError(_parse_error(start_line, line, end - line_start + 1, "bare"))
                    end += 1
                fields.append(text[pos:end])
                pos = end
            if pos < n and text[pos] == ",":
                pos += 1
                continue
            # End of record (newline or end of input).
            if pos < n:
                pos += 1
                line += 1
            break
        records.append((start_line, fields))
    return records


def _parse_error(start_line: int, line: int, column: int, kind: str) -> str:
    message = (
        'extraneous or missing " in quoted-field'
        if kind == "quote"
        else 'bare " in non-quoted-field'
    )
    if start_line != line:
        return (
            f"record on line {start_line}; parse error on line {line}, column {column}: {message}"
        )
    return f"parse error on line {line}, column {column}: {message}"


def load_token_file(path: str) -> dict[str, UserInfo]:
    """Token -> user, or ConfigError naming the file and the problem."""
    data = read_file(path, "token-auth-file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"token file '{path}' is not valid UTF-8") from None
    try:
        records = parse_csv(text)
    except CSVError as error:
        raise ConfigError(f"token file '{path}': {error}") from None
    tokens: dict[str, UserInfo] = {}
    for number, (_line, record) in enumerate(records, start=1):
        if len(record) < 3:
            raise ConfigError(
                f"token file '{path}' must have at least 3 columns (token, user name, user uid), "
                f"found {len(record)}"
            )
        token = record[0]
        if not token:
            log.warn(
                "empty token has been found in token file '{path}', record number '{n}'",
                path=path,
                n=number,
            )
            continue
        if token in tokens:
            log.warn(
                "duplicate token has been found in token file '{path}', record number '{n}'",
                path=path,
                n=number,
            )
        groups = tuple(record[3].split(",")) if len(record) >= 4 else ()
        tokens[token] = UserInfo(name=record[1], uid=record[2], groups=groups)
    return tokens


class TokenFileAuthenticator:
    """Looks bearer tokens up in the static table."""

    def __init__(self, tokens: dict[str, UserInfo]) -> None:
        self.tokens = tokens

    @classmethod
    def from_file(cls, path: str) -> TokenFileAuthenticator:
        return cls(load_token_file(path))

    def authenticate_token(self, token: str, audiences: tuple[str, ...]) -> TokenOutcome:
        user = self.tokens.get(token)
        if user is None:
            return None
        return AuthResult(user)
