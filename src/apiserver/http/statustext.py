"""The reason phrases of HTTP/1.1 status lines, as Go's ``net/http`` writes them.

Why not twisted.web's ``RESPONSES``: it has no phrase for 422 or 429 (twisted.web writes
``Unknown Status``) and spells 504 ``Gateway Time-out``, while kube-apiserver, a Go server,
answers ``422 Unprocessable Entity``, ``429 Too Many Requests`` and ``504 Gateway Timeout``.
Go's ``http.StatusText`` table (RFC 9110 names, with Go's spellings such as ``Request
Entity Too Large``); a code Go does not know gets the line Go writes for it,
``status code <n>`` (``net/http/server.go`` ``writeStatusLine``).
"""

from __future__ import annotations

GO_STATUS_TEXT: dict[int, bytes] = {
    100: b"Continue",
    101: b"Switching Protocols",
    102: b"Processing",
    103: b"Early Hints",
    200: b"OK",
    201: b"Created",
    202: b"Accepted",
    203: b"Non-Authoritative Information",
    204: b"No Content",
    205: b"Reset Content",
    206: b"Partial Content",
    207: b"Multi-Status",
    208: b"Already Reported",
    226: b"IM Used",
    300: b"Multiple Choices",
    301: b"Moved Permanently",
    302: b"Found",
    303: b"See Other",
    304: b"Not Modified",
    305: b"Use Proxy",
    307: b"Temporary Redirect",
    308: b"Permanent Redirect",
    400: b"Bad Request",
    401: b"Unauthorized",
    402: b"Payment Required",
    403: b"Forbidden",
    404: b"Not Found",
    405: b"Method Not Allowed",
    406: b"Not Acceptable",
    407: b"Proxy Authentication Required",
    408: b"Request Timeout",
    409: b"Conflict",
    410: b"Gone",
    411: b"Length Required",
    412: b"Precondition Failed",
    413: b"Request Entity Too Large",
    414: b"Request URI Too Long",
    415: b"Unsupported Media Type",
    416: b"Requested Range Not Satisfiable",
    417: b"Expectation Failed",
    418: b"I'm a teapot",
    421: b"Misdirected Request",
    422: b"Unprocessable Entity",
    423: b"Locked",
    424: b"Failed Dependency",
    425: b"Too Early",
    426: b"Upgrade Required",
    428: b"Precondition Required",
    429: b"Too Many Requests",
    431: b"Request Header Fields Too Large",
    451: b"Unavailable For Legal Reasons",
    500: b"Internal Server Error",
    501: b"Not Implemented",
    502: b"Bad Gateway",
    503: b"Service Unavailable",
    504: b"Gateway Timeout",
    505: b"HTTP Version Not Supported",
    506: b"Variant Also Negotiates",
    507: b"Insufficient Storage",
    508: b"Loop Detected",
    510: b"Not Extended",
    511: b"Network Authentication Required",
}


def reason_phrase(code: int) -> bytes:
    """The text after the code on a status line."""
    known = GO_STATUS_TEXT.get(code)
    return known if known is not None else b"status code %d" % code
