"""Status-line reason phrases as Go's net/http writes them (kube-apiserver's)."""

from __future__ import annotations

from apiserver.http.statustext import reason_phrase


def test_phrases_where_twisted_web_differs_from_go() -> None:
    assert reason_phrase(422) == b"Unprocessable Entity"
    assert reason_phrase(429) == b"Too Many Requests"
    assert reason_phrase(504) == b"Gateway Timeout"


def test_common_phrases() -> None:
    assert reason_phrase(200) == b"OK"
    assert reason_phrase(201) == b"Created"
    assert reason_phrase(409) == b"Conflict"
    assert reason_phrase(413) == b"Request Entity Too Large"


def test_a_code_go_does_not_know() -> None:
    assert reason_phrase(299) == b"status code 299"
