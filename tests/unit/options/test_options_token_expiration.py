"""Start-up checks of --service-account-max-token-expiration with
--service-account-extend-token-expiration (kube-apiserver's completeServiceAccountOptions)."""

from __future__ import annotations

import pytest

from apiserver.options import OptionsError, parse_args

TRANSITION = (
    "service-account-extend-token-expiration is true, in order to correctly trigger safe "
    "transition logic, service-account-max-token-expiration must be set longer than 3607 "
    "seconds (currently {})"
)
EXTENSION = (
    "service-account-extend-token-expiration is true, enabling tokens valid up to 31536000 "
    "seconds, which is longer than service-account-max-token-expiration set to {}"
)


@pytest.mark.parametrize(
    ("args", "warnings"),
    [
        ([], []),
        (["--service-account-max-token-expiration=1h"], [TRANSITION, EXTENSION]),
        (["--service-account-max-token-expiration=2h"], [EXTENSION]),
        (["--service-account-max-token-expiration=8760h"], []),
        (["--service-account-max-token-expiration=9000h"], []),
        (
            [
                "--service-account-max-token-expiration=1h",
                "--service-account-extend-token-expiration=false",
            ],
            [],
        ),
    ],
)
def test_warnings(args: list[str], warnings: list[str]) -> None:
    config = parse_args(args)
    shown = {"1h": "1h0m0s", "2h": "2h0m0s"}
    value = next((a.split("=")[1] for a in args if "max-token" in a), "")
    expected = [w.format(shown.get(value, "")) for w in warnings]
    assert [w for w in config.warnings if "service-account" in w] == expected


def test_out_of_range_is_an_error_without_warnings() -> None:
    with pytest.raises(OptionsError) as info:
        parse_args(["--service-account-max-token-expiration=59m"])
    assert info.value.errors == [
        "--service-account-max-token-expiration: the service-account-max-token-expiration must "
        "be between 1 hour and 2^32 seconds"
    ]
