"""The man page's AUDIT section (apiserver.options.manpage)."""

from __future__ import annotations

from apiserver.options.manpage import render_man


def test_the_man_page_has_an_audit_section_before_files() -> None:
    page = render_man()
    assert "\n.SH AUDIT\n" in page
    section = page.split("\n.SH AUDIT\n", 1)[1].split("\n.SH ", 1)[0]
    assert page.index("\n.SH AUDIT\n") < page.index("\n.SH FILES\n")
    for needed in (
        "\\-\\-audit\\-policy\\-file",
        "Nothing is audited unless",
        "blocking\\-strict",
        "batch",
        "\\-\\-audit\\-webhook\\-config\\-file",
        "etc/audit\\-policy.yaml",
        "stops start\\-up",
    ):
        assert needed in section, needed
